//! The buyer and supplier portal (DESIGN.md section 20) over real HTTP: one server with two
//! buyers and two suppliers, a lead from each supplier sold to each buyer, and a hostile
//! lead whose every field a partner can send carries `<script>` or `=HYPERLINK(…)`.
//! Isolation (another party's ids answer exactly as unknown ones), the return form's CSRF
//! and `Origin` checks, a revoked user's session, escaping and inert CSV cells.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::receiver::Receiver;
use crate::util::*;

pub(crate) const SCRIPT: &str = "<script>alert(1)</script>";
const FORMULA: &str = "=HYPERLINK(\"http://evil.example\",\"x\")";

/// The shared scenario: buyers `buya`, `buyb`; suppliers `supc` (source `src`), `supd`
/// (source `srcd`); a hostile lead from `src` sold to `buya`, a plain lead from `srcd` sold
/// to `buyb`.
pub(crate) struct Scenario {
    pub server: TestServer,
    pub receiver: Receiver,
    pub txn_a: String,
    pub txn_b: String,
    pub lead_c: String,
    pub lead_d: String,
    pub buyer_token: String,
    pub buyer_user: String,
    pub supplier_token: String,
}

pub(crate) fn scenario() -> Scenario {
    let db = TempDb::new();
    basic_setup(&db);
    supplier(&db, "supc", "supc-key-0123456789");
    supplier(&db, "supd", "supd-key-0123456789");
    source(
        &db,
        "web",
        "src",
        "--no-secret --supplier supc --supplier-cost 4",
    );
    source(
        &db,
        "web",
        "srcd",
        "--no-secret --supplier supd --supplier-cost 3",
    );
    let receiver = Receiver::start();
    buyer(&db, "buya", &receiver.url("/a"), Some("30"), "");
    buyer(&db, "buyb", &receiver.url("/b"), Some("20"), "");
    let server = TestServer::start_with_portal(
        db,
        fast_options(),
        leadrelay::portal::PortalConfig {
            api_url: "http://api.example".into(),
            ..Default::default()
        },
    );
    let hostile = json!({
        "externalId": FORMULA,
        "firstName": SCRIPT,
        "lastName": FORMULA,
        "email": "hostile@example.org",
        "phone": "+49 30 1234567",
        "street": SCRIPT,
        "houseNumber": FORMULA,
        "postalCode": "10115",
        "city": SCRIPT,
        "country": "DE",
        "productSlug": "solar",
        "additionalProperties": {"note": SCRIPT, "formula": FORMULA},
    });
    let (lead_c, request_c) = lead_request_in(&server, "web", "src", &hostile);
    let (lead_d, request_d) = lead_request_in(&server, "web", "srcd", &simple_lead(1));
    let txn_a = deliver(&server, &request_c, "buya", None)["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    let txn_b = deliver(&server, &request_d, "buyb", None)["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    receiver.wait_for(2, WAIT);
    let user = lr(&server, "buyer user create buya --name")
        .arg(SCRIPT)
        .json();
    let supplier_token = lr(&server, "supplier user create supc --name Tom").json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    Scenario {
        txn_a,
        txn_b,
        lead_c,
        lead_d,
        buyer_token: user["token"].as_str().unwrap().to_string(),
        buyer_user: user["id"].as_str().unwrap().to_string(),
        supplier_token,
        server,
        receiver,
    }
}

/// A signed-in browser of the portal: its cookie and the session's CSRF token.
pub(crate) struct Session<'a> {
    server: &'a TestServer,
    cookie: String,
}

impl<'a> Session<'a> {
    pub(crate) fn login(server: &'a TestServer, token: &str) -> Session<'a> {
        let reply = form(server, "/login", &[("token", token)], None, None).send();
        assert_eq!(reply.status, 303, "{}", reply.text);
        assert_eq!(reply.header("location"), Some("/"));
        let set = reply.header("set-cookie").expect("a session cookie");
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        Session {
            server,
            cookie: set.split(';').next().unwrap().to_string(),
        }
    }

    pub(crate) fn get(&self, path: &str) -> Reply {
        Request::new("GET", &self.server.portal_url(path))
            .header("Cookie", &self.cookie)
            .send()
    }

    /// The CSRF token the page at `path` carries in its forms.
    pub(crate) fn csrf(&self, path: &str) -> String {
        let page = self.get(path).text;
        let at = page
            .find(r#"name="csrf" value=""#)
            .expect("a form with its token")
            + 19;
        page[at..at + page[at..].find('"').unwrap()].to_string()
    }

    pub(crate) fn post(&self, path: &str, fields: &[(&str, &str)], origin: Option<&str>) -> Reply {
        form(self.server, path, fields, Some(&self.cookie), origin).send()
    }
}

fn form(
    server: &TestServer,
    path: &str,
    fields: &[(&str, &str)],
    cookie: Option<&str>,
    origin: Option<&str>,
) -> Request {
    let mut body = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        body.append_pair(name, value);
    }
    let own = server.portal_url("");
    let mut request = Request::new("POST", &server.portal_url(path))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Origin", origin.unwrap_or(&own))
        .body(body.finish().into_bytes());
    if let Some(cookie) = cookie {
        request = request.header("Cookie", cookie);
    }
    request
}

#[test]
fn portal_isolation_escaping_csrf_origin_and_revocation() {
    let s = scenario();
    let server = &s.server;

    // Without a session every page is 303 to the login; the answers carry the CSP.
    for path in ["/", "/leads", "/leads/x", "/account", "/payouts", "/nope"] {
        let reply = Request::new("GET", &server.portal_url(path)).send();
        assert_eq!(reply.status, 303, "{path}");
        assert_eq!(reply.header("location"), Some("/login"));
        assert!(
            reply
                .header("content-security-policy")
                .unwrap()
                .starts_with("default-src 'self'")
        );
    }
    let wrong = form(server, "/login", &[("token", "lrp_wrong")], None, None).send();
    assert_eq!(wrong.status, 401);

    let buyer = Session::login(server, &s.buyer_token);
    // Buyer A's own pages, with the hostile lead shown as text.
    for path in [
        "/",
        "/leads",
        "/account",
        "/delivery",
        &format!("/leads/{}", s.txn_a),
    ] {
        let page = buyer.get(path);
        assert_eq!(page.status, 200, "{path}: {}", page.text);
        assert!(
            !page.text.contains("<script>"),
            "{path} escapes: {}",
            page.text
        );
    }
    let lead_page = buyer.get(&format!("/leads/{}", s.txn_a)).text;
    assert!(
        lead_page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{lead_page}"
    );
    assert!(
        lead_page.contains("HYPERLINK"),
        "the delivered lead is shown"
    );
    assert!(
        lead_page.contains(r#"action="/leads/"#),
        "the return form is offered"
    );
    let leads = buyer.get("/leads").text;
    assert!(
        leads.contains(&s.txn_a) && !leads.contains(&s.txn_b),
        "{leads}"
    );
    let csv = buyer.get("/leads.csv").text;
    assert!(
        csv.contains("'=HYPERLINK"),
        "formula cells are inert: {csv}"
    );
    assert!(!csv.contains(",=HYPERLINK"), "{csv}");

    // Another buyer's transaction and a supplier's lead id answer exactly as unknown ids.
    let unknown = buyer.get("/leads/txn_does_not_exist");
    assert_eq!(unknown.status, 404);
    for foreign in [&s.txn_b, &s.lead_c, &s.lead_d] {
        let reply = buyer.get(&format!("/leads/{foreign}"));
        assert_eq!(reply.status, 404, "{foreign}");
        assert_eq!(reply.text, unknown.text, "{foreign}");
        let q = buyer.get(&format!("/leads?q={foreign}")).text;
        assert!(
            !q.contains(&format!(">{foreign}<")),
            "{foreign} is not listed"
        );
    }
    let csrf = buyer.csrf(&format!("/leads/{}", s.txn_a));
    let foreign_return = buyer.post(
        &format!("/leads/{}/return", s.txn_b),
        &[("csrf", &csrf), ("reasonCode", "wrong_contact")],
        None,
    );
    assert_eq!(foreign_return.status, 404);
    assert_eq!(foreign_return.text, unknown.text);

    // The supplier sees its own leads and never another's, nor a buyer or its price.
    let supplier = Session::login(server, &s.supplier_token);
    let unknown_lead = supplier.get("/leads/lead_does_not_exist");
    assert_eq!(unknown_lead.status, 404);
    for foreign in [&s.lead_d, &s.txn_a, &s.txn_b] {
        let reply = supplier.get(&format!("/leads/{foreign}"));
        assert_eq!(reply.status, 404, "{foreign}");
        assert_eq!(reply.text, unknown_lead.text, "{foreign}");
    }
    let unknown_docs = supplier.get("/sources/nope/docs");
    let foreign_docs = supplier.get("/sources/srcd/docs");
    assert_eq!(foreign_docs.status, 404);
    assert_eq!(foreign_docs.text, unknown_docs.text);
    assert_eq!(supplier.get("/sources/src/docs").status, 200);
    for path in [
        "/".to_string(),
        "/leads".into(),
        format!("/leads/{}", s.lead_c),
        "/payouts".into(),
        "/sources".into(),
        "/statement.csv".into(),
    ] {
        let page = supplier.get(&path);
        assert_eq!(page.status, 200, "{path}");
        assert!(!page.text.contains("<script>"), "{path}");
        for secret in ["buya", "buyb", "30.00", "score"] {
            assert!(
                !page.text.contains(secret),
                "{path} shows {secret}: {}",
                page.text
            );
        }
    }
    let supplier_leads = supplier.get("/leads").text;
    assert!(supplier_leads.contains(&s.lead_c) && !supplier_leads.contains(&s.lead_d));
    let payouts = supplier.get("/payouts").text;
    assert!(
        payouts.contains("supplier_cost") && payouts.contains("4.00"),
        "{payouts}"
    );

    // A return needs the session's CSRF token and the portal's own Origin.
    let path = format!("/leads/{}/return", s.txn_a);
    let fields = [("reasonCode", "wrong_contact"), ("note", SCRIPT)];
    assert_eq!(buyer.post(&path, &fields, None).status, 403, "no token");
    let with_token = [fields[0], fields[1], ("csrf", csrf.as_str())];
    let wrong_token = [fields[0], fields[1], ("csrf", "0000")];
    assert_eq!(buyer.post(&path, &wrong_token, None).status, 403);
    let evil = buyer.post(&path, &with_token, Some("http://evil.example"));
    assert_eq!(evil.status, 403);
    let filed = buyer.post(&path, &with_token, None);
    assert_eq!(filed.status, 200, "{}", filed.text);
    assert!(filed.text.contains("return was"), "{}", filed.text);
    assert!(!filed.text.contains("<script>"));
    let again = buyer.post(&path, &with_token, None);
    assert!(again.text.contains("returned already"), "{}", again.text);
    let supplier_lead = supplier.get(&format!("/leads/{}", s.lead_c)).text;
    assert!(
        supplier_lead.contains(r#"id="returned">yes"#),
        "{supplier_lead}"
    );

    // Pause and resume deliveries; the signed test event reaches the webhook.
    let csrf = buyer.csrf("/delivery");
    assert_eq!(
        buyer
            .post("/delivery/pause", &[("csrf", &csrf)], None)
            .status,
        303
    );
    assert!(
        buyer
            .get("/delivery")
            .text
            .contains(r#"id="paused">paused"#)
    );
    assert_eq!(
        buyer
            .post("/delivery/resume", &[("csrf", &csrf)], None)
            .status,
        303
    );
    let tested = buyer.post("/delivery/test", &[("csrf", &csrf)], None);
    assert!(tested.text.contains("answered HTTP 200"), "{}", tested.text);
    let test_event = s
        .receiver
        .requests_to("/a")
        .into_iter()
        .map(|r| r.json())
        .find(|body: &Value| body["event"] == "lead.test");
    assert!(test_event.is_some(), "a lead.test event arrived");
    assert!(
        s.receiver
            .requests_to("/a")
            .iter()
            .all(|r| r.is_signed_with(SIGNING_SECRET))
    );

    // An erased lead shows as erased with its date on both sides, never as a blank row.
    lr(server, "lead erase --yes --lead").arg(&s.lead_c).json();
    for page in [
        buyer.get("/leads").text,
        buyer.get(&format!("/leads/{}", s.txn_a)).text,
        supplier.get("/leads").text,
        supplier.get(&format!("/leads/{}", s.lead_c)).text,
    ] {
        assert!(page.contains("Erased 20"), "{page}");
        assert!(!page.contains("hostile@example.org"), "{page}");
    }
    assert!(
        buyer.get("/leads.csv").text.contains(",20"),
        "erasedAt is written"
    );

    // A revoked user's session ends: its next form goes to the login.
    lr(server, "buyer user revoke").arg(&s.buyer_user).json();
    let revoked = buyer.post(&path, &with_token, None);
    assert_eq!(revoked.status, 303);
    assert_eq!(revoked.header("location"), Some("/login"));
    assert_eq!(buyer.get("/").status, 303);
    let listed = lr(server, "buyer user list buya").json();
    assert!(listed[0]["revokedAt"].is_string(), "{listed}");
    let _ = Duration::ZERO;
}
