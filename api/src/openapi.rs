//! The OpenAPI document, generated from the route annotations, and the
//! Swagger UI that renders it.

use utoipa::OpenApi;
use utoipa::openapi::OpenApi as Document;
use utoipa_swagger_ui::SwaggerUi;

/// Document-level information; paths and schemas are added by the routes.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Kairos",
        description = "Distributed job scheduler. Create one-shot, cron, fixed-rate or fixed-delay \
jobs, follow their executions, and control them. Every error is `{\"error\":{\"code\",\"message\"}}`."
    ),
    tags(
        (name = "jobs", description = "Create, read and list jobs"),
        (name = "control", description = "Pause, resume, trigger, change and cancel jobs"),
        (name = "executions", description = "Triggers of jobs and their history"),
        (name = "callbacks", description = "Deliveries of execution outcomes to callback URLs"),
        (name = "workers", description = "Workers and their load"),
        (name = "operations", description = "Health, readiness and metrics")
    )
)]
pub(crate) struct ApiDoc;

/// The base document the route annotations are merged into.
pub(crate) fn base() -> Document {
    ApiDoc::openapi()
}

/// Swagger UI at `/docs`, reading the document from `/openapi.json`.
pub(crate) fn swagger_ui(doc: Document) -> SwaggerUi {
    SwaggerUi::new("/docs").url("/openapi.json", doc)
}
