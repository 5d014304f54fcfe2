//! The OpenAPI document, generated from the route annotations, and the
//! Swagger UI that renders it.

use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, RefOr, ResponseBuilder};
use utoipa_swagger_ui::SwaggerUi;

/// Document-level information; paths and schemas are added by the routes.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Kairos",
        description = "Distributed job scheduler. Create one-shot, cron, fixed-rate or fixed-delay \
jobs, follow their executions, and control them. Every `/openapi/*` route needs \
`Authorization: Bearer <key>`. Every error is `{\"error\":{\"code\",\"message\"}}`."
    ),
    tags(
        (name = "jobs", description = "Create, read and list jobs"),
        (name = "control", description = "Pause, resume, trigger, change and cancel jobs"),
        (name = "workflows", description = "DAGs of job templates and their runs"),
        (name = "executions", description = "Triggers of jobs and their history"),
        (name = "callbacks", description = "Deliveries of execution outcomes to callback URLs"),
        (name = "workers", description = "Workers and their load (operator keys)"),
        (name = "limits", description = "Concurrency limits per handler and per tenant (operator keys)"),
        (name = "admin", description = "Tenants (operator keys); API keys, callback secrets and the audit trail (admin keys: their own tenant; operator keys: every tenant)"),
        (name = "operations", description = "Health, readiness and metrics")
    )
)]
pub(crate) struct ApiDoc;

/// The base document the route annotations are merged into.
pub(crate) fn base() -> Document {
    ApiDoc::openapi()
}

/// Name of the bearer security scheme in the document.
const BEARER: &str = "bearer";

/// Adds what every `/openapi/*` operation shares and no annotation repeats:
/// the bearer requirement, `401`/`403` (authentication), `500`/`503`, the
/// body errors of operations that take a body, `422` on operations with
/// query or path parameters (an unknown or invalid one, or one holding a
/// NUL), and `429` (the create limits on job creation; elsewhere the limit
/// on failed authentications per client address).
pub(crate) fn finish(mut doc: Document) -> Document {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("kai_<prefix>_<secret>")
                .description(Some("An API key; its role decides what it may do."))
                .build(),
        ),
    );
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with("/openapi/") {
            continue;
        }
        let ops = [
            (&mut item.get, "get"),
            (&mut item.post, "post"),
            (&mut item.put, "put"),
            (&mut item.patch, "patch"),
            (&mut item.delete, "delete"),
        ];
        for (op, method) in ops {
            if let Some(op) = op.as_mut() {
                secure(op, path == "/openapi/jobs" && method == "post");
            }
        }
    }
    doc
}

fn error_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build(),
    )
}

fn secure(op: &mut Operation, creates_jobs: bool) {
    op.security = Some(vec![SecurityRequirement::new::<_, [&str; 0], &str>(
        BEARER,
        [],
    )]);
    let mut add = |code: &str, description: &str| {
        op.responses
            .responses
            .entry(code.to_string())
            .or_insert_with(|| error_response(description));
    };
    add(
        "401",
        "`unauthorized`: missing, malformed, unknown, expired or revoked API key",
    );
    add("403", "`forbidden`: the key's role does not allow this");
    add(
        "500",
        "`internal`: an unexpected failure (details are logged)",
    );
    add("503", "`unavailable`: the database cannot be reached");
    if creates_jobs {
        add(
            "429",
            "`rate_limited` (with `Retry-After`): the key created jobs too fast, or this \
             client address failed to authenticate too often; `live_job_limit`: the tenant \
             holds as many unfinished jobs as it may",
        );
    }
    add(
        "429",
        "`rate_limited` (with `Retry-After`): this client address failed to authenticate \
         too often",
    );
    let takes = |place: fn(&ParameterIn) -> bool| {
        op.parameters
            .iter()
            .flatten()
            .any(|p| matches!(p, RefOr::T(p) if place(&p.parameter_in)))
    };
    if takes(|p| matches!(p, ParameterIn::Query)) {
        add(
            "422",
            "`invalid_field`: a query parameter is unknown or invalid",
        );
    }
    if takes(|p| matches!(p, ParameterIn::Path)) {
        add(
            "422",
            "`invalid_field`: a path parameter holds a NUL character",
        );
    }
    if op.request_body.is_some() {
        add("400", "`invalid_json`: the body is not well-formed JSON");
        add("413", "`payload_too_large`: the body is too large");
        add(
            "415",
            "`unsupported_media_type`: the body is not declared as JSON",
        );
        add("422", "A field is missing, unknown or invalid");
    }
}

/// Swagger UI at `/docs`, reading the document from `/openapi.json`.
pub(crate) fn swagger_ui(doc: Document) -> SwaggerUi {
    SwaggerUi::new("/docs").url("/openapi.json", doc)
}
