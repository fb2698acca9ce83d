//! Accountability (DESIGN.md section 23): operator roles, the console's actions with their
//! origin, CSRF and role checks, and the audit log. One change through each path (the CLI,
//! a console form, a partner's lifecycle call, a portal form; the server's own retention is in
//! `privacy::serve_purges_leads_past_their_workspace_retention_at_start`) makes exactly one
//! entry with its actor and old and new values; an entry edited in the file breaks the
//! chain `leadrelay check` walks.

use serde_json::{Value, json};

use crate::console::{cookie_of, form_post, get, login_with, operator};
use crate::lifecycle::{CANCELLATION, CONFIRMATION, Fixture, secret_of};
use crate::util::{TestServer, lr};

/// The entries `audit list` prints for `flags`.
fn entries(server: &TestServer, flags: &str) -> Vec<Value> {
    lr(server, format!("audit list {flags}"))
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// The one entry of `action` on `object`; panics unless there is exactly one.
fn one(server: &TestServer, action: &str, object: &str) -> Value {
    let found = entries(server, &format!("--action {action} --object {object}"));
    assert_eq!(found.len(), 1, "{action} on {object}: {found:#?}");
    let entry = found[0].clone();
    let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
    for key in ["at", "actor", "action", "objectId", "changes"] {
        assert!(keys.iter().any(|k| *k == key), "{key} in {entry}");
    }
    entry
}

/// A session of a new operator named `name` with `role`: its cookie.
fn session(server: &TestServer, name: &str, role: &str) -> String {
    let created = lr(
        server,
        format!("operator create --name {name} --role {role}"),
    )
    .json();
    assert_eq!(created["role"], role);
    let reply = login_with(server, created["token"].as_str().unwrap());
    assert_eq!(reply.status, 303, "{}", reply.text);
    cookie_of(&reply)
}

/// The CSRF token in the forms of page `path`.
fn csrf(server: &TestServer, cookie: &str, path: &str) -> String {
    let page = get(server, path, cookie);
    assert_eq!(page.status, 200, "{}", page.text);
    let at = page
        .text
        .find("name=\"csrf\" value=\"")
        .expect("a form with a token")
        + 19;
    page.text[at..at + 64].to_string()
}

/// POSTs the console form `path` with `fields`, from the console's own origin.
fn action(
    server: &TestServer,
    cookie: &str,
    path: &str,
    fields: &[(&str, &str)],
) -> crate::util::Reply {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    form_post(server, path, &body)
        .header("Cookie", cookie)
        .header("Origin", &server.console_url(""))
        .send()
}

#[test]
fn each_path_records_one_entry_with_its_actor_and_old_and_new_values() {
    let f = Fixture::on(crate::console::start());
    let server = &f.server;
    f.buyer("m", &["--plan", "prepaid", "--return-review", "manual"]);

    // The CLI: a price, money, a secret.
    let terms = lr(server, "buyer terms set m --product solar --price 27.50").json();
    let entry = one(server, "subscription.terms_set", "m");
    let actor = entry["actor"].as_str().unwrap();
    assert!(actor.starts_with("cli:") && actor.len() > 4, "{actor}");
    assert_eq!(entry["changes"]["price"]["new"], terms["price"]);
    assert_ne!(entry["changes"]["price"]["old"], terms["price"]);
    let funded = lr(server, "buyer fund m --amount 100").json();
    let entry = one(server, "ledger.fund", "m");
    assert_eq!(entry["changes"]["balance"]["new"], funded["balance"]);
    let rotated = lr(server, "source rotate-secret src2").json();
    let entry = one(server, "source.rotate_secret", "src2");
    assert_eq!(
        entry["changes"],
        json!({"secret": {"old": null, "new": "rotated"}})
    );
    let secret = rotated["secret"].as_str().unwrap();
    assert!(
        !lr(server, "audit list").ok().contains(secret),
        "never the secret"
    );

    // A partner's lifecycle calls.
    let txn = f.delivered("m");
    let body = json!({"transactionId": txn, "status": "acknowledged"});
    assert_eq!(f.call(CONFIRMATION, &secret_of("m"), &body).status, 200);
    let entry = one(server, "transaction.acknowledge", &txn);
    assert_eq!(entry["actor"], "api:buyer:m");
    assert_eq!(
        entry["changes"]["status"],
        json!({"old": "delivered", "new": "acknowledged"})
    );
    let body = json!({"transactionId": txn, "reason": "fake"});
    assert_eq!(f.call(CANCELLATION, &secret_of("m"), &body).status, 200);
    one(server, "transaction.cancel", &txn);

    // The console: a finance operator approves the return.
    let cookie = session(server, "fin", "finance");
    let token = csrf(server, &cookie, "/returns");
    let reply = action(
        server,
        &cookie,
        &format!("/returns/{txn}/approve"),
        &[("csrf", &token)],
    );
    assert_eq!(reply.status, 303, "{}", reply.text);
    assert_eq!(reply.header("location"), Some("/returns"));
    let entry = one(server, "transaction.return_approve", &txn);
    assert_eq!(entry["actor"], "operator:fin");
    assert_eq!(
        entry["changes"]["returnStatus"],
        json!({"old": "pending", "new": "approved"})
    );
    assert_eq!(entry["changes"]["status"]["new"], "cancelled");
    assert_eq!(f.status_of(&txn), "cancelled");

    // Filters: by actor kind, by action prefix.
    assert_eq!(entries(server, "--actor operator:").len(), 1);
    assert!(entries(server, "--actor api:buyer:m").len() >= 2);
    let buyers = entries(server, "--action buyer.");
    assert!(
        buyers
            .iter()
            .all(|e| e["action"].as_str().unwrap().starts_with("buyer."))
    );

    // The admin's /audit page shows it; the chain is whole, until an entry is edited (the
    // edit needs the table's trigger dropped, which `check` reports by itself, so it is put
    // back as it was).
    let admin = session(server, "boss", "admin");
    let page = get(server, "/audit", &admin);
    assert_eq!(page.status, 200);
    assert!(
        page.text.contains("transaction.return_approve"),
        "{}",
        page.text
    );
    lr(server, "check").json();
    let seq = entries(server, "--action ledger.fund")[0]["seq"]
        .as_i64()
        .unwrap();
    let edit = format!(
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         c.execute('DROP TRIGGER audit_log_no_update')\n\
         c.execute(\"UPDATE audit_log SET changes = replace(changes, '100', '900') WHERE seq = {seq}\")\n\
         c.execute(\"CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log \
                    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END\")\n\
         c.commit()\n"
    );
    let edited = std::process::Command::new("python3")
        .arg("-c")
        .arg(edit)
        .arg(&server.db.path)
        .status()
        .expect("python3 runs");
    assert!(edited.success());
    let failed = lr(server, "check").fails_json(1);
    assert!(
        failed
            .stdout
            .contains(&format!("audit log entry {seq} is broken")),
        "{}",
        failed.stdout
    );
}

#[test]
fn portal_actions_portal_users_and_shared_docs_are_recorded_with_their_actor() {
    let f = Fixture::on(crate::util::TestServer::start_with_console_and_portal(
        crate::util::TempDb::new(),
        crate::util::fast_options(),
        leadrelay::console::ConsoleConfig::default(),
        leadrelay::portal::PortalConfig {
            api_url: "http://api.example".into(),
            ..Default::default()
        },
    ));
    let server = &f.server;
    f.buyer("p", &[]);
    let txn = f.delivered("p");

    // The CLI creates a portal user: its name and party, never its token.
    let created = lr(server, "buyer user create p --name Pat").json();
    let (user, token) = (
        created["id"].as_str().unwrap(),
        created["token"].as_str().unwrap(),
    );
    let entry = one(server, "portal_user.create", user);
    assert!(entry["actor"].as_str().unwrap().starts_with("cli:"));
    assert_eq!(entry["changes"]["name"]["new"], "Pat");
    assert_eq!(entry["changes"]["party"]["new"], "buyer:p");

    // The portal: a return (its replay records nothing more) and a pause, as the user.
    let buyer = crate::portal::Session::login(server, token);
    let path = format!("/leads/{txn}/return");
    let fields = [
        ("csrf", buyer.csrf(&format!("/leads/{txn}"))),
        ("reasonCode", "wrong_contact".to_string()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for _ in 0..2 {
        let filed = buyer.post(&path, &fields, None);
        assert_eq!(filed.status, 200, "{}", filed.text);
    }
    let by_user = format!("buyer-user:{user}");
    let entry = one(server, "transaction.return_request", &txn);
    assert_eq!(entry["actor"], by_user.as_str());
    assert_eq!(entry["changes"]["reasonCode"]["new"], "wrong_contact");
    let delivery_token = buyer.csrf("/delivery");
    let paused = buyer.post("/delivery/pause", &[("csrf", &delivery_token)], None);
    assert_eq!(paused.status, 303, "{}", paused.text);
    let entry = one(server, "buyer.pause", "p");
    assert_eq!(entry["actor"], by_user.as_str());
    assert_eq!(
        entry["changes"]["status"],
        json!({"old": "active", "new": "paused"})
    );

    // Sharing a source's docs: the link's token never appears.
    let link = lr(server, "source docs src --share").ok();
    let shared = link.trim().rsplit('/').next().unwrap().to_string();
    lr(server, "source docs src --unshare").ok();
    let entry = one(server, "source.docs_share", "src");
    assert_eq!(
        entry["changes"],
        json!({"sharedLink": {"old": null, "new": "rotated"}})
    );
    let entry = one(server, "source.docs_unshare", "src");
    assert_eq!(
        entry["changes"],
        json!({"sharedLink": {"old": "rotated", "new": null}})
    );
    let all = lr(server, "audit list").ok();
    assert!(!all.contains(&shared) && !all.contains(token), "no token");

    // The console: support and viewers may not revoke a portal user; an admin may, and the
    // user's session ends.
    let revoke = format!("/portal-users/{user}/revoke");
    for (name, role) in [("sam", "support"), ("vera", "viewer")] {
        let cookie = session(server, name, role);
        let token = csrf(server, &cookie, "/buyers");
        let reply = action(server, &cookie, &revoke, &[("csrf", &token)]);
        assert_eq!(reply.status, 403, "{role}");
        assert!(
            reply.text.contains("Only admin operators"),
            "{}",
            reply.text
        );
    }
    let admin = session(server, "boss", "admin");
    let page = get(server, "/buyers", &admin);
    assert!(page.text.contains(&revoke), "{}", page.text);
    let token = csrf(server, &admin, "/buyers");
    let reply = action(server, &admin, &revoke, &[("csrf", &token)]);
    assert_eq!(reply.status, 303, "{}", reply.text);
    assert_eq!(reply.header("location"), Some("/buyers"));
    let entry = one(server, "portal_user.revoke", user);
    assert_eq!(entry["actor"], "operator:boss");
    assert_eq!(entry["changes"]["revokedAt"]["old"], Value::Null);
    assert!(entry["changes"]["revokedAt"]["new"].is_string(), "{entry}");
    let gone = buyer.get("/");
    assert_eq!(gone.status, 303);
    assert_eq!(gone.header("location"), Some("/login"));
    assert!(!get(server, "/buyers", &admin).text.contains(&revoke));

    // The CLI revokes a supplier's user: one more entry, as the CLI.
    let tom = lr(server, "supplier user create sup --name Tom").json();
    let tom = tom["id"].as_str().unwrap();
    lr(server, format!("supplier user revoke {tom}")).json();
    let entry = one(server, "portal_user.revoke", tom);
    assert!(entry["actor"].as_str().unwrap().starts_with("cli:"));
    assert_eq!(entry["changes"]["party"]["new"], "supplier:sup");
}

#[test]
fn console_actions_need_the_origin_the_token_and_a_role_that_may() {
    let server = crate::console::start();
    let viewer = session(&server, "vera", "viewer");
    let token = csrf(&server, &viewer, "/outbox");
    let actions = [
        ("/returns/tx_x/approve", "admin and finance"),
        ("/returns/tx_x/deny", "admin and finance"),
        ("/buyers/b/pause", "admin and support"),
        ("/buyers/b/resume", "admin and support"),
        ("/outbox/evt_x/retry", "admin and support"),
    ];
    for (path, roles) in actions {
        let reply = action(&server, &viewer, path, &[("csrf", &token), ("note", "n")]);
        assert_eq!(reply.status, 403, "{path}");
        assert!(
            reply.text.contains(&format!("Only {roles} operators")),
            "{path}: {}",
            reply.text
        );
    }
    let page = get(&server, "/audit", &viewer);
    assert_eq!(page.status, 403);
    assert!(page.text.contains("Only admin operators"), "{}", page.text);

    // A role that may passes the checks and reaches the owner, which refuses an unknown id.
    let support = session(&server, "sam", "support");
    let token = csrf(&server, &support, "/buyers");
    let reply = action(
        &server,
        &support,
        "/buyers/nobody/pause",
        &[("csrf", &token)],
    );
    assert_eq!(reply.status, 409, "{}", reply.text);
    let reply = action(
        &server,
        &support,
        "/returns/tx_x/approve",
        &[("csrf", &token)],
    );
    assert_eq!(reply.status, 403, "support may not decide returns");

    // Without the token, with another session's token, or from another site: 403.
    let other = csrf(&server, &viewer, "/buyers");
    for fields in [vec![], vec![("csrf", "")], vec![("csrf", other.as_str())]] {
        let reply = action(&server, &support, "/buyers/nobody/pause", &fields);
        assert_eq!(reply.status, 403, "{fields:?}");
        assert!(reply.text.contains("token"), "{}", reply.text);
    }
    let body = format!("csrf={token}");
    for origin in [Some("http://evil.example"), None] {
        let mut request =
            form_post(&server, "/buyers/nobody/pause", &body).header("Cookie", &support);
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        assert_eq!(request.send().status, 403, "{origin:?}");
    }
    // None of the refused requests was recorded.
    assert_eq!(entries(&server, "--actor operator:").len(), 0);
}

#[test]
fn operators_have_roles_that_update_changes_and_list_shows() {
    let server = crate::console::start();
    let plain = operator(&server, "ana");
    assert_eq!(
        plain["role"], "admin",
        "admin by default, as operators from before roles"
    );
    let id = plain["id"].as_str().unwrap();
    let updated = lr(&server, format!("operator update {id} --role viewer")).json();
    assert_eq!(updated["role"], "viewer");
    let listed = lr(&server, "operator list").json();
    assert_eq!(listed[0]["role"], "viewer");
    assert!(lr(&server, "operator list").ok().contains("viewer"));
    let entry = one(&server, "operator.update", id);
    assert_eq!(
        entry["changes"],
        json!({"role": {"old": "admin", "new": "viewer"}})
    );
    let created = one(&server, "operator.create", id);
    assert_eq!(created["changes"]["token"]["new"], "rotated");
    lr(&server, format!("operator update {id} --role boss")).fails(2);
}
