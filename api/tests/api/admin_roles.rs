//! Every admin route, called by each kind of key: the operator (the app's
//! own key, of `default`), an admin of the tenant concerned (`acme`), an
//! admin of another tenant (`bravo`), and write and read keys of `acme`.
//! Operator-only routes (tenants, workers) are 403 for everyone else;
//! another tenant's keys, secret and audit trail are 404, as an unknown
//! tenant or key is, and nothing changes.

use super::support::{App, Resp};
use kairos_core::tenant::Role;
use serde_json::{Value, json};

/// The callers, all made through the store.
struct Keys {
    op: App,
    admin: App,
    other_admin: App,
    writer: App,
    reader: App,
}

async fn keys(app: &App) -> Keys {
    Keys {
        op: app.clone(),
        admin: app.as_new_key("acme", Role::Admin).await,
        other_admin: app.as_new_key("bravo", Role::Admin).await,
        writer: app.as_new_key("acme", Role::Write).await,
        reader: app.as_new_key("acme", Role::Read).await,
    }
}

/// The prefix of a caller's key.
fn prefix(app: &App) -> String {
    app.token.as_ref().expect("a key")[4..16].to_string()
}

fn forbidden(resp: &Resp, who: &str) {
    assert_eq!(resp.status, 403, "{who}: {:?}", resp.body);
    resp.error(403, "forbidden");
}

fn not_found(resp: &Resp, who: &str) {
    assert_eq!(resp.status, 404, "{who}: {:?}", resp.body);
    resp.error(404, "not_found");
}

fn prefixes(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|k| k["prefix"].as_str().expect("prefix").to_string())
        .collect()
}

fn tenants_of(list: &Value) -> Vec<String> {
    let mut t: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|k| k["tenantId"].as_str().expect("tenantId").to_string())
        .collect();
    t.sort();
    t.dedup();
    t
}

pub async fn operator_only_routes(app: App) {
    let k = keys(&app).await;
    k.op.get("/openapi/workers").await.ok(200);
    let tenants = k.op.get("/openapi/tenants").await.ok(200);
    assert_eq!(tenants_of(&tenants), ["acme", "bravo", "default"]);
    k.op.post_json("/openapi/tenants", &json!({"tenantId": "made"}))
        .await
        .ok(201);
    for (who, caller) in [
        ("admin", &k.admin),
        ("other admin", &k.other_admin),
        ("writer", &k.writer),
        ("reader", &k.reader),
    ] {
        forbidden(&caller.get("/openapi/workers").await, who);
        forbidden(&caller.get("/openapi/tenants").await, who);
        let resp = caller
            .post_json("/openapi/tenants", &json!({"tenantId": "evil"}))
            .await;
        forbidden(&resp, who);
        // Limits are a tenant's bill: its own admin may not raise them.
        let resp = caller
            .put_json("/openapi/tenants/acme/limits", &json!({"createBurst": 1}))
            .await;
        forbidden(&resp, who);
        // So is how long its history is kept (issue 45).
        let resp = caller
            .put_json("/openapi/tenants/acme/retention", &json!({"audit": "1m"}))
            .await;
        forbidden(&resp, who);
        forbidden(&caller.get("/openapi/tenants/acme/retention").await, who);
    }
    k.op.put_json("/openapi/tenants/acme/retention", &json!({"audit": "30d"}))
        .await
        .ok(200);
    k.op.put_json("/openapi/tenants/acme/limits", &json!({"createBurst": 7}))
        .await
        .ok(200);
    let tenants = k.op.get("/openapi/tenants").await.ok(200);
    assert_eq!(
        tenants_of(&tenants),
        ["acme", "bravo", "default", "made"],
        "no tenant made by a refused call"
    );
}

pub async fn callback_secret_by_role(app: App) {
    let k = keys(&app).await;
    let rotate = |caller: &App, tenant: &str| {
        let (caller, path) = (
            caller.clone(),
            format!("/openapi/tenants/{tenant}/callback-secret"),
        );
        async move { caller.post_json(&path, &json!({"graceSeconds": 5})).await }
    };
    let by_admin = rotate(&k.admin, "acme").await.ok(200);
    assert_eq!(by_admin["tenantId"], "acme");
    let by_op = rotate(&k.op, "acme").await.ok(200);
    assert_ne!(by_op["callbackSecret"], by_admin["callbackSecret"]);
    rotate(&k.op, "bravo").await.ok(200);
    // Another tenant answers as an unknown one does.
    not_found(&rotate(&k.other_admin, "acme").await, "other admin");
    not_found(&rotate(&k.admin, "bravo").await, "admin of acme on bravo");
    not_found(
        &rotate(&k.admin, "nope").await,
        "admin on an unknown tenant",
    );
    forbidden(&rotate(&k.writer, "acme").await, "writer");
    forbidden(&rotate(&k.reader, "acme").await, "reader");
    // Only the three allowed rotations happened.
    let audit = k.op.get("/openapi/audit?limit=100").await.ok(200);
    let rotations = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "tenant.rotate_secret")
        .count();
    assert_eq!(rotations, 3);
}

pub async fn key_creation_by_role(app: App) {
    let k = keys(&app).await;
    let create = |caller: &App, tenant: &str, role: &str| {
        let caller = caller.clone();
        let body = json!({"tenantId": tenant, "role": role});
        async move { caller.post_json("/openapi/keys", &body).await }
    };
    for role in ["read", "write", "admin"] {
        let made = create(&k.admin, "acme", role).await.ok(201);
        assert_eq!(
            (made["tenantId"].as_str(), made["role"].as_str()),
            (Some("acme"), Some(role))
        );
    }
    // An admin may not mint a key stronger than its own.
    forbidden(
        &create(&k.admin, "acme", "operator").await,
        "admin → operator",
    );
    let made = create(&k.op, "acme", "operator").await.ok(201);
    assert_eq!(made["role"], "operator");
    create(&k.op, "bravo", "admin").await.ok(201);
    // Another tenant answers as an unknown one does.
    not_found(&create(&k.other_admin, "acme", "read").await, "other admin");
    not_found(
        &create(&k.admin, "bravo", "read").await,
        "admin of acme on bravo",
    );
    not_found(&create(&k.admin, "nope", "read").await, "admin on unknown");
    not_found(&create(&k.op, "nope", "read").await, "operator on unknown");
    forbidden(&create(&k.writer, "acme", "read").await, "writer");
    forbidden(&create(&k.reader, "acme", "read").await, "reader");
    // A new operator key governs every tenant; a new admin key of acme works.
    let new_op = app.with_token(made["keyToken"].as_str().map(String::from));
    new_op.get("/openapi/keys?tenant=bravo").await.ok(200);
    // acme: admin, writer, reader, the three by the admin, the operator's.
    let acme = k.op.get("/openapi/keys?tenant=acme").await.ok(200);
    assert_eq!(prefixes(&acme).len(), 7);
}

pub async fn key_listing_by_role(app: App) {
    let k = keys(&app).await;
    let all = k.op.get("/openapi/keys").await.ok(200);
    assert_eq!(tenants_of(&all), ["acme", "bravo", "default"]);
    let acme = k.op.get("/openapi/keys?tenant=acme").await.ok(200);
    assert_eq!(tenants_of(&acme), ["acme"]);
    let mut want = vec![prefix(&k.admin), prefix(&k.writer), prefix(&k.reader)];
    want.sort();
    let mut got = prefixes(&acme);
    got.sort();
    assert_eq!(got, want);
    // An admin sees its own tenant's, with or without asking for it.
    for path in ["/openapi/keys", "/openapi/keys?tenant=acme"] {
        let own = k.admin.get(path).await.ok(200);
        assert_eq!(tenants_of(&own), ["acme"], "{path}");
        assert_eq!(prefixes(&own).len(), 3, "{path}");
    }
    let bravo = k.other_admin.get("/openapi/keys").await.ok(200);
    assert_eq!(prefixes(&bravo), [prefix(&k.other_admin)]);
    // Another tenant's, or an unknown one's: the same 404.
    not_found(&k.admin.get("/openapi/keys?tenant=bravo").await, "admin");
    not_found(&k.admin.get("/openapi/keys?tenant=default").await, "admin");
    not_found(&k.admin.get("/openapi/keys?tenant=nope").await, "admin");
    not_found(
        &k.other_admin.get("/openapi/keys?tenant=acme").await,
        "other admin",
    );
    forbidden(&k.writer.get("/openapi/keys").await, "writer");
    forbidden(&k.reader.get("/openapi/keys").await, "reader");
}

pub async fn key_revocation_by_role(app: App) {
    let k = keys(&app).await;
    let victim = app.as_new_key("acme", Role::Read).await;
    let victim_prefix = prefix(&victim);
    let revoke = |caller: &App, p: &str| {
        let (caller, path) = (caller.clone(), format!("/openapi/keys/{p}"));
        async move { caller.delete(&path).await }
    };
    not_found(&revoke(&k.other_admin, &victim_prefix).await, "other admin");
    forbidden(&revoke(&k.writer, &victim_prefix).await, "writer");
    forbidden(&revoke(&k.reader, &victim_prefix).await, "reader");
    victim.get("/openapi/jobs").await.ok(200);
    let revoked = revoke(&k.admin, &victim_prefix).await.ok(200);
    assert!(revoked["revokedAt"].is_string());
    // An admin cannot reach the operator's key (another tenant's)...
    not_found(&revoke(&k.admin, &prefix(&k.op)).await, "admin on operator");
    not_found(&revoke(&k.admin, "000000000000").await, "admin on unknown");
    // ...nor an operator key of its own tenant.
    let acme_op = app.as_new_key("acme", Role::Operator).await;
    forbidden(
        &revoke(&k.admin, &prefix(&acme_op)).await,
        "admin on acme operator",
    );
    acme_op.get("/openapi/workers").await.ok(200);
    // The operator revokes any tenant's key.
    revoke(&k.op, &prefix(&k.other_admin)).await.ok(200);
    revoke(&k.op, &prefix(&acme_op)).await.ok(200);
    let acme = k.op.get("/openapi/keys?tenant=acme").await.ok(200);
    let revoked: Vec<&str> = acme["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["revokedAt"].is_string())
        .map(|k| k["prefix"].as_str().unwrap())
        .collect();
    assert_eq!(
        revoked.len(),
        2,
        "the victim and acme's operator only: {acme}"
    );
    k.admin.get("/openapi/keys").await.ok(200);
}

pub async fn audit_by_role(app: App) {
    let k = keys(&app).await;
    // One action on each tenant.
    k.admin
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "acme", "role": "read"}),
        )
        .await
        .ok(201);
    k.other_admin
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "bravo", "role": "read"}),
        )
        .await
        .ok(201);
    k.op.post_json("/openapi/tenants", &json!({"tenantId": "made"}))
        .await
        .ok(201);
    let all = k.op.get("/openapi/audit").await.ok(200);
    assert_eq!(tenants_of(&all), ["acme", "bravo", "made"]);
    let only = k.op.get("/openapi/audit?tenant=bravo").await.ok(200);
    assert_eq!(tenants_of(&only), ["bravo"]);
    for path in ["/openapi/audit", "/openapi/audit?tenant=acme&limit=10"] {
        let own = k.admin.get(path).await.ok(200);
        assert_eq!(tenants_of(&own), ["acme"], "{path}");
    }
    not_found(&k.admin.get("/openapi/audit?tenant=bravo").await, "admin");
    not_found(&k.admin.get("/openapi/audit?tenant=nope").await, "admin");
    not_found(
        &k.other_admin.get("/openapi/audit?tenant=acme").await,
        "other admin",
    );
    forbidden(&k.writer.get("/openapi/audit").await, "writer");
    forbidden(&k.reader.get("/openapi/audit").await, "reader");
}
