//! Admin pages (admin keys): the tenant's API keys — create (the token is
//! shown once), list by prefix, revoke — and its audit trail.

use super::query;
use crate::UiState;
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
    cursor: String,
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
                                @if k.revoked_at.is_some() { (view::badge("cancelled")) " revoked " (view::time(k.revoked_at)) }
                                @else if !k.usable_at(kairos_core::time::now_ms()) { (view::badge("lost")) " expired" }
                                @else { (view::badge("online")) " active" }
                            }
                            td {
                                @if k.revoked_at.is_none() {
                                    form method="post" action="/ui/admin/keys/revoke" {
                                        (view::csrf(ctx))
                                        input type="hidden" name="prefix" value=(k.prefix);
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

async fn tenant_keys(state: &UiState, ctx: &Ctx) -> Result<Vec<ApiKey>, Response> {
    state
        .store
        .api_keys_list(Some(ctx.tenant()))
        .await
        .map_err(view::store_error)
}

fn create_form(ctx: &Ctx) -> Markup {
    html! {
        form.filters method="post" action="/ui/admin/keys" aria-label="Create a key" {
            (view::csrf(ctx))
            label { "Role "
                select name="role" { option value="read" { "read" } option value="write" selected { "write" } option value="admin" { "admin" } }
            }
            label { "Name " input type="text" name="name" maxlength="100" placeholder="e.g. ci"; }
            label { "Expires (RFC 3339, optional) " input type="text" name="expiresAt" placeholder="2027-01-01T00:00:00Z"; }
            button.primary type="submit" { "Create key" }
        }
    }
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
    let keys = match tenant_keys(&state, &ctx).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    view::page(&ctx, "API keys", Nav::Keys, html! {
        (view::flash(Some(q.notice.as_str()).filter(|s| !s.is_empty()), Some(q.error.as_str()).filter(|s| !s.is_empty())))
        p.muted { "Keys of tenant " strong { (ctx.tenant()) } ". A key's secret is shown once, when it is created; only its prefix is kept in view." }
        (create_form(&ctx))
        (keys_table(&ctx, &keys))
    }).into_response()
}

/// `POST /ui/admin/keys`: creates a key of this tenant and shows it once.
pub(crate) async fn create_key(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_admin()) {
        return *r;
    }
    let mut body = json!({"tenantId": ctx.tenant(), "role": form.get("role")});
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
                p { a href="/ui/admin/keys" { "Back to the keys" } }
            }).into_response()
        }
        Err(e) => Redirect::to(&format!(
            "/ui/admin/keys?{}",
            query(&[("error", &e.message)])
        ))
        .into_response(),
    }
}

/// `POST /ui/admin/keys/revoke`: after a confirmation, revokes one of this
/// tenant's keys (another tenant's prefix is refused as unknown).
pub(crate) async fn revoke_key(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_admin()) {
        return *r;
    }
    let prefix = form.get("prefix");
    let keys = match tenant_keys(&state, &ctx).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    let Some(key) = keys.iter().find(|k| k.prefix == prefix) else {
        return Redirect::to(&format!(
            "/ui/admin/keys?{}",
            query(&[("error", "No such key in this tenant.")])
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
                input type="hidden" name="confirm" value="yes";
                button.primary.danger type="submit" { "Yes, revoke it" }
                a href="/ui/admin/keys" { "No, keep it" }
            }
        }).into_response();
    }
    let q = match state
        .api
        .call(
            ctx.key(),
            Method::DELETE,
            &format!("/openapi/keys/{prefix}"),
            None,
        )
        .await
    {
        Ok(_) => query(&[("notice", &format!("Key {prefix} revoked."))]),
        Err(e) => query(&[("error", &e.message)]),
    };
    Redirect::to(&format!("/ui/admin/keys?{q}")).into_response()
}

/// `GET /ui/admin/audit`: the tenant's audit trail, newest first.
pub(crate) async fn audit(
    State(state): State<UiState>,
    ctx: Ctx,
    Query(q): Query<AdminQuery>,
) -> Response {
    if let Err(r) = ctx.require_admin() {
        return *r;
    }
    let cursor = Some(q.cursor.as_str()).filter(|c| !c.is_empty());
    let page = match state.store.audit_list(Some(ctx.tenant()), 50, cursor).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    view::page(&ctx, "Audit trail", Nav::Audit, html! {
        p.muted { "Operator actions on tenant " strong { (ctx.tenant()) } ", newest first. The actor is the acting key's prefix (" code { "cli" } " for the command line)." }
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
                                    @if a.action.starts_with("job.") { a href={ "/ui/jobs/" (a.target) } { code { (a.target) } } }
                                    @else { code { (a.target) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if cursor.is_some() { a href="/ui/admin/audit" { "← Newest" } }
            @if let Some(c) = &page.next_cursor { a href={ "/ui/admin/audit?" (query(&[("cursor", c)])) } rel="next" { "Older →" } }
        }
    }).into_response()
}
