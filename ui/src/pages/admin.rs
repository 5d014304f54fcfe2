//! Admin pages: API keys — create (the token is shown once), list by
//! prefix, revoke — and the audit trail. An admin key sees its own tenant;
//! an operator key sees every tenant, picks one (`?tenant=`, its own by
//! default), and may create operator keys.

use super::query;
use crate::UiState;
use crate::flash::Notice;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Redirect, Response};
use kairos_core::tenant::ApiKey;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;

/// Notice or error carried over a redirect, and the audit page cursor.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AdminQuery {
    #[serde(default)]
    notice: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    sig: String,
    #[serde(default)]
    cursor: String,
    /// The tenant shown (operators only; an admin always sees its own).
    #[serde(default)]
    tenant: String,
}

/// The tenant a page shows: the one asked for if the key may manage it,
/// otherwise the key's own.
fn scope<'a>(ctx: &'a Ctx, asked: &'a str) -> &'a str {
    if !asked.is_empty() && ctx.manages(asked) {
        asked
    } else {
        ctx.tenant()
    }
}

/// Operators: every tenant, each linking to its keys and audit trail.
async fn tenants_table(state: &UiState, ctx: &Ctx, shown: &str) -> Result<Markup, Response> {
    if !ctx.is_operator() {
        return Ok(html! {});
    }
    let tenants = state
        .store
        .tenants_list()
        .await
        .map_err(view::store_error)?;
    Ok(html! {
        h2 { "Tenants" }
        div.scroll tabindex="0" role="region" aria-label="Tenants (scrolls sideways on narrow screens)" {
            table.data.tenants {
                caption.sr-only { "Every tenant" }
                thead { tr { th scope="col" { "Tenant" } th scope="col" { "Created" } th scope="col" { span.sr-only { "Pages" } } } }
                tbody {
                    @for t in &tenants {
                        tr data-tenant=(t.id) {
                            th scope="row" { code { (t.id) } @if t.id == shown { " " span.muted { "(shown)" } } }
                            td { (view::time(Some(t.created_at))) }
                            td {
                                a href={ "/ui/admin/keys?" (query(&[("tenant", &t.id)])) } { "Keys" span.sr-only { " of " (t.id) } }
                                " · "
                                a href={ "/ui/admin/audit?" (query(&[("tenant", &t.id)])) } { "Audit" span.sr-only { " of " (t.id) } }
                            }
                        }
                    }
                }
            }
        }
    })
}

fn keys_table(ctx: &Ctx, keys: &[ApiKey]) -> Markup {
    html! {
        div.scroll tabindex="0" role="region" aria-label="Table (scrolls sideways on narrow screens)" {
            table.data {
                caption.sr-only { "API keys of the tenant" }
                thead { tr {
                    th scope="col" { "Prefix" } th scope="col" { "Role" } th scope="col" { "Name" }
                    th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "State" }
                    th scope="col" { span.sr-only { "Actions" } }
                } }
                tbody {
                    @for k in keys {
                        tr data-key=(k.prefix) {
                            th scope="row" { code { (k.prefix) } @if k.prefix == ctx.session.prefix { " " span.muted { "(this session)" } } }
                            td { (k.role.as_str()) }
                            td { (k.name.as_deref().unwrap_or("")) }
                            td { (view::time(Some(k.created_at))) }
                            td { (view::time(k.expires_at)) }
                            td {
                                @if k.revoked_at.is_some() { (view::labelled_badge("revoked", "revoked")) " " (view::time(k.revoked_at)) }
                                @else if !k.usable_at(kairos_core::time::now_ms()) { (view::labelled_badge("expired", "expired")) }
                                @else { (view::labelled_badge("active", "active")) }
                            }
                            td {
                                @if k.revoked_at.is_none() && ctx.session.role.allows(k.role) {
                                    form method="post" action="/ui/admin/keys/revoke" {
                                        (view::csrf(ctx))
                                        input type="hidden" name="prefix" value=(k.prefix);
                                        input type="hidden" name="tenant" value=(k.tenant);
                                        button.small.danger type="submit" { "Revoke…" span.sr-only { " key " (k.prefix) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

async fn tenant_keys(state: &UiState, tenant: &str) -> Result<Vec<ApiKey>, Response> {
    state
        .store
        .api_keys_list(Some(tenant))
        .await
        .map_err(view::store_error)
}

/// Roles a key may be created with by this session, in the form's order.
fn offered_roles(ctx: &Ctx) -> Vec<&'static str> {
    let mut roles = vec!["read", "write", "admin"];
    if ctx.is_operator() {
        roles.push("operator");
    }
    roles
}

/// The create form, holding `kept` (what was sent, after a refusal) or
/// the defaults (a write key, no name, no expiry).
fn create_form(ctx: &Ctx, tenant: &str, kept: Option<&Fields>) -> Markup {
    let kept_role = kept.map(|f| f.get("role")).unwrap_or("write");
    let value = |name: &str| kept.map_or("", |f| f.get(name));
    html! {
        form.filters method="post" action="/ui/admin/keys" aria-label={ "Create a key for tenant " (tenant) } {
            (view::csrf(ctx))
            input type="hidden" name="tenant" value=(tenant);
            label { "Role "
                select name="role" {
                    @for r in offered_roles(ctx) { option value=(r) selected[r == kept_role] { (r) } }
                }
            }
            label { "Name " input type="text" name="name" maxlength="100" placeholder="e.g. ci" value=(value("name")); }
            label { "Expires (RFC 3339, optional) " input type="text" name="expiresAt" placeholder="2027-01-01T00:00:00Z" value=(value("expiresAt")); }
            button.primary type="submit" { "Create key" }
        }
    }
}

/// The keys page of `tenant`, saying `flash` at the top, with the create
/// form holding `kept`.
async fn keys_page(
    state: &UiState,
    ctx: &Ctx,
    tenant: &str,
    flash: Markup,
    kept: Option<&Fields>,
) -> Response {
    let (keys, tenants) = match (
        tenant_keys(state, tenant).await,
        tenants_table(state, ctx, tenant).await,
    ) {
        (Ok(k), Ok(t)) => (k, t),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    view::page(ctx, "API keys", Nav::Keys, html! {
        (flash)
        p.muted { "Keys of tenant " strong { (tenant) } ". A key's secret is shown once, when it is created; only its prefix is kept in view."
            @if !ctx.is_operator() { " An admin key manages its own tenant only." } }
        (create_form(ctx, tenant, kept))
        (keys_table(ctx, &keys))
        (tenants)
    }).into_response()
}

/// `GET /ui/admin/keys`.
pub(crate) async fn keys(
    State(state): State<UiState>,
    ctx: Ctx,
    Query(q): Query<AdminQuery>,
) -> Response {
    if let Err(r) = ctx.require_admin() {
        return *r;
    }
    let tenant = scope(&ctx, &q.tenant);
    let flash = crate::flash::shown(&ctx, &q.notice, &q.error, &q.sig);
    keys_page(&state, &ctx, tenant, flash, None).await
}

/// `POST /ui/admin/keys`: creates a key of this tenant and shows it once;
/// on refusal, the keys page again with the API's reason and the form as
/// it was sent (its role included: a `read` key asked for must not turn
/// into the default `write` on the next click).
pub(crate) async fn create_key(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_admin()) {
        return *r;
    }
    let tenant = scope(&ctx, form.get("tenant")).to_string();
    let mut body = json!({"tenantId": tenant, "role": form.get("role")});
    if let Some(n) = form.opt("name") {
        body["name"] = json!(n);
    }
    if let Some(e) = form.opt("expiresAt") {
        body["expiresAt"] = json!(e);
    }
    match state
        .api
        .call(ctx.key(), Method::POST, "/openapi/keys", Some(&body))
        .await
    {
        Ok(created) => {
            let token = created["keyToken"].as_str().unwrap_or_default();
            view::page(&ctx, "Key created", Nav::Keys, html! {
                div.notice role="status" {
                    p { "Key " code { (created["prefix"].as_str().unwrap_or("")) } " (" (created["role"].as_str().unwrap_or("")) ") created. Copy it now: " strong { "it is not shown again." } }
                    label for="new-key" { "The new key" }
                    input id="new-key" type="text" readonly value=(token) data-select-on-focus="" size="90";
                }
                p { a href={ "/ui/admin/keys?" (query(&[("tenant", &tenant)])) } { "Back to the keys" } }
            }).into_response()
        }
        Err(e) => {
            let flash = html! { p.error-box role="alert" { (e.message) } };
            let mut res = keys_page(&state, &ctx, &tenant, flash, Some(&form)).await;
            if res.status().is_success() {
                *res.status_mut() = e.status;
            }
            res
        }
    }
}

/// `POST /ui/admin/keys/revoke`: after a confirmation, revokes a key of a
/// tenant the session manages (another tenant's prefix is refused as
/// unknown, a stronger key than the session's is not offered).
pub(crate) async fn revoke_key(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_admin()) {
        return *r;
    }
    let prefix = form.get("prefix");
    let tenant = scope(&ctx, form.get("tenant")).to_string();
    let keys = match tenant_keys(&state, &tenant).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    let Some(key) = keys
        .iter()
        .find(|k| k.prefix == prefix && ctx.session.role.allows(k.role))
    else {
        return Redirect::to(&format!(
            "/ui/admin/keys?{}&{}",
            query(&[("tenant", &tenant)]),
            super::error_query(&ctx, "No such key in this tenant.")
        ))
        .into_response();
    };
    if form.get("confirm") != "yes" {
        return view::page(&ctx, "Revoke this key?", Nav::Keys, html! {
            p { "Revoke key " code { (key.prefix) } " (" (key.role.as_str()) ", " (key.name.as_deref().unwrap_or("no name")) ")? "
                "Every request with it is refused within a second. This cannot be undone."
                @if key.prefix == ctx.session.prefix { " " strong { "It is the key of this session: you will be logged out." } } }
            form.toolbar method="post" action="/ui/admin/keys/revoke" {
                (view::csrf(&ctx))
                input type="hidden" name="prefix" value=(key.prefix);
                input type="hidden" name="tenant" value=(tenant);
                input type="hidden" name="confirm" value="yes";
                button.primary.danger type="submit" { "Yes, revoke it" }
                a href={ "/ui/admin/keys?" (query(&[("tenant", &tenant)])) } { "No, keep it" }
            }
        }).into_response();
    }
    let q = match state
        .api
        .call(
            ctx.key(),
            Method::DELETE,
            &format!("/openapi/keys/{}", crate::api::segment(prefix)),
            None,
        )
        .await
    {
        Ok(_) => query(&[("tenant", &tenant), Notice::KeyRevoked.pair()]),
        Err(e) => format!(
            "{}&{}",
            query(&[("tenant", &tenant)]),
            super::error_query(&ctx, &e.message)
        ),
    };
    Redirect::to(&format!("/ui/admin/keys?{q}")).into_response()
}

/// `GET /ui/admin/audit`: a tenant's audit trail, newest first.
pub(crate) async fn audit(
    State(state): State<UiState>,
    ctx: Ctx,
    Query(q): Query<AdminQuery>,
) -> Response {
    if let Err(r) = ctx.require_admin() {
        return *r;
    }
    let cursor = Some(q.cursor.as_str()).filter(|c| !c.is_empty());
    let tenant = scope(&ctx, &q.tenant);
    let page = match state.store.audit_list(Some(tenant), 50, cursor).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    view::page(&ctx, "Audit trail", Nav::Audit, html! {
        p.muted { "Control actions on tenant " strong { (tenant) } ", newest first. The actor is the acting key's prefix (" code { "cli" } " for the command line)." }
        @if page.items.is_empty() { p.muted { "Nothing recorded yet." } } @else {
            div.scroll tabindex="0" role="region" aria-label="Table (scrolls sideways on narrow screens)" {
                table.data {
                    caption.sr-only { "Audit entries" }
                    thead { tr { th scope="col" { "When (UTC)" } th scope="col" { "Actor" } th scope="col" { "Action" } th scope="col" { "Target" } } }
                    tbody {
                        @for a in &page.items {
                            tr {
                                td { (view::time(Some(a.at))) }
                                td { code { (a.actor) } }
                                td { (a.action) }
                                td {
                                    @if a.action.starts_with("job.") && !a.action.ends_with("_batch") { a href={ "/ui/jobs/" (a.target) } { code { (a.target) } } }
                                    @else if a.action.starts_with("callback.") || a.action.starts_with("execution.") { a href={ "/ui/executions/" (a.target) } { code { (a.target) } } }
                                    @else { code { (a.target) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if cursor.is_some() { a href={ "/ui/admin/audit?" (query(&[("tenant", tenant)])) } { "← Newest" } }
            @if let Some(c) = &page.next_cursor { a href={ "/ui/admin/audit?" (query(&[("tenant", tenant), ("cursor", c)])) } rel="next" { "Older →" } }
        }
    }).into_response()
}
