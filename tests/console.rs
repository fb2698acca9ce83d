//! The operator console (DESIGN.md section 15) over real HTTP: operator tokens from the CLI,
//! the login form and its session cookie, the logout's `Origin` check, the limit on failed
//! logins, the security headers, and every page's content, with a lead whose fields and a
//! buyer's answer carry HTML that must show as text.

use serde_json::{Value, json};

use crate::util;
use crate::util::receiver::{Answer, Receiver};
use crate::util::*;

/// Every page of the console, with a lead id that does not exist.
const PAGES: &[&str] = &[
    "/",
    "/leads",
    "/leads?q=x",
    "/leads/lead_nope",
    "/buyers",
    "/sources",
    "/outbox",
    "/reports",
    "/reports.csv",
];

pub(crate) fn start() -> TestServer {
    TestServer::start_with_console(
        TempDb::new(),
        fast_options(),
        leadrelay::console::ConsoleConfig::default(),
    )
}

/// A new operator's token.
pub(crate) fn operator(server: &TestServer, name: &str) -> Value {
    lr(server, "operator create --name").arg(name).json()
}

pub(crate) fn form_post(server: &TestServer, path: &str, body: &str) -> Request {
    Request::new("POST", &server.console_url(path))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.as_bytes().to_vec())
}

pub(crate) fn login_with(server: &TestServer, token: &str) -> Reply {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .finish();
    form_post(server, "/login", &body).send()
}

/// Signs in with a new operator's token; the `Cookie` header value of the session.
pub(crate) fn login(server: &TestServer) -> String {
    let token = operator(server, "ana")["token"]
        .as_str()
        .unwrap()
        .to_string();
    let reply = login_with(server, &token);
    assert_eq!(reply.status, 303, "{}", reply.text);
    cookie_of(&reply)
}

pub(crate) fn cookie_of(reply: &Reply) -> String {
    let set = reply.header("set-cookie").expect("a session cookie is set");
    set.split(';').next().unwrap().to_string()
}

pub(crate) fn get(server: &TestServer, path: &str, cookie: &str) -> Reply {
    Request::new("GET", &server.console_url(path))
        .header("Cookie", cookie)
        .send()
}

#[test]
fn every_page_needs_a_session_and_every_answer_has_the_security_headers() {
    let server = start();
    for path in PAGES.iter().chain(&["/nope", "/leads/a/b"]) {
        let reply = Request::new("GET", &server.console_url(path)).send();
        assert_eq!(reply.status, 303, "{path}");
        assert_eq!(reply.header("location"), Some("/login"), "{path}");
        let stale = get(&server, path, "leadrelay_console=not-a-session");
        assert_eq!(stale.status, 303, "{path} with an unknown session");
    }
    let form = Request::new("GET", &server.console_url("/login")).send();
    assert_eq!(form.status, 200);
    assert!(
        form.text
            .contains(r#"<form method="post" action="/login">"#)
    );
    assert!(form.text.contains(r#"name="token""#));
    assert!(
        form.text
            .contains(r#"<link rel="stylesheet" href="/style.css">"#)
    );
    for reply in [&form, &Request::new("GET", &server.console_url("/")).send()] {
        let csp = reply.header("content-security-policy").unwrap();
        assert!(csp.starts_with("default-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("referrer-policy"), Some("same-origin"));
    }
    let css = Request::new("GET", &server.console_url("/style.css")).send();
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    assert!(css.text.contains("@media"), "responsive rules");
    // The API's listener knows nothing of the console.
    assert_eq!(server.get("/login").status, 404);
}

#[test]
fn a_token_signs_in_with_a_strict_http_only_cookie_and_a_wrong_one_is_401() {
    let server = start();
    let wrong = login_with(&server, "lro_wrong");
    assert_eq!(wrong.status, 401);
    assert!(wrong.text.contains("not valid"), "{}", wrong.text);
    assert!(wrong.text.contains(r#"name="token""#), "the form again");
    assert!(wrong.header("set-cookie").is_none());
    assert_eq!(login_with(&server, "").status, 401);

    let token = operator(&server, "ana")["token"]
        .as_str()
        .unwrap()
        .to_string();
    let reply = login_with(&server, &token);
    assert_eq!(reply.status, 303);
    assert_eq!(reply.header("location"), Some("/"));
    let set = reply.header("set-cookie").unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.split("; ").any(|part| part == flag), "{flag} in {set}");
    }
    assert!(!set.contains("Secure"), "{set}");
    let cookie = cookie_of(&reply);
    let session_id = cookie.split_once('=').unwrap().1;
    assert!(session_id.len() >= 43, "256 random bits: {session_id}");
    let page = get(&server, "/", &cookie);
    assert_eq!(page.status, 200);
    assert!(page.text.contains("<h1>Overview</h1>"));
    assert!(page.text.contains("ana"), "the signed-in operator is named");

    // Only hashes are stored: neither the token nor the session id is in the file.
    let conn = rusqlite::Connection::open(&server.db.path).unwrap();
    let stored: String = conn
        .query_row(
            "SELECT group_concat(token_hash) || (SELECT group_concat(id_hash) FROM operator_sessions) FROM operators",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!stored.contains(&token) && !stored.contains(session_id));

    // A form posted as JSON is refused.
    let json_login = Request::new("POST", &server.console_url("/login"))
        .header("Content-Type", "application/json")
        .body(format!("{{\"token\": \"{token}\"}}"))
        .send();
    assert_eq!(json_login.status, 415);
}

#[test]
fn the_cookie_is_secure_when_asked() {
    let server = TestServer::start_with_console(
        TempDb::new(),
        fast_options(),
        leadrelay::console::ConsoleConfig {
            secure_cookie: true,
        },
    );
    let token = operator(&server, "ana")["token"]
        .as_str()
        .unwrap()
        .to_string();
    let reply = login_with(&server, &token);
    assert!(
        reply
            .header("set-cookie")
            .unwrap()
            .split("; ")
            .any(|p| p == "Secure")
    );
}

#[test]
fn revoking_a_token_ends_its_sessions_at_once() {
    let server = start();
    let created = operator(&server, "ana");
    let token = created["token"].as_str().unwrap();
    let cookie = cookie_of(&login_with(&server, token));
    let other = login(&server);
    assert_eq!(get(&server, "/", &cookie).status, 200);

    let revoked = lr(&server, "operator revoke")
        .arg(created["id"].as_str().unwrap())
        .json();
    assert!(revoked["revokedAt"].is_string());
    assert_eq!(get(&server, "/", &cookie).status, 303, "the session ended");
    assert_eq!(get(&server, "/buyers", &cookie).status, 303);
    assert_eq!(login_with(&server, token).status, 401, "the token is dead");
    assert_eq!(
        get(&server, "/", &other).status,
        200,
        "other operators stay"
    );
}

#[test]
fn logout_needs_the_consoles_own_origin() {
    let server = start();
    let cookie = login(&server);
    let origin = server.console_url("");
    let logout = |origin: Option<&str>| {
        let mut request = form_post(&server, "/logout", "").header("Cookie", &cookie);
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        request.send()
    };
    for refused in [
        None,
        Some("http://evil.example"),
        Some("null"),
        Some(&*origin.replace("http://", "https://")),
    ] {
        let reply = logout(refused);
        assert_eq!(reply.status, 403, "{refused:?}");
        assert_eq!(get(&server, "/", &cookie).status, 200, "still signed in");
    }
    let reply = logout(Some(&origin));
    assert_eq!(reply.status, 303);
    assert_eq!(reply.header("location"), Some("/login"));
    let cleared = reply.header("set-cookie").unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert_eq!(get(&server, "/", &cookie).status, 303, "the session ended");
    // A login form sent from another site's page is refused as well.
    let token = operator(&server, "bo")["token"]
        .as_str()
        .unwrap()
        .to_string();
    let foreign = form_post(&server, "/login", &format!("token={token}"))
        .header("Origin", "http://evil.example")
        .send();
    assert_eq!(foreign.status, 403);
}

#[test]
fn failed_logins_are_limited_per_client() {
    let server = start();
    let token = operator(&server, "ana")["token"]
        .as_str()
        .unwrap()
        .to_string();
    for attempt in 0..10 {
        assert_eq!(login_with(&server, "lro_guess").status, 401, "{attempt}");
    }
    let limited = login_with(&server, "lro_guess");
    assert_eq!(limited.status, 429);
    assert!(
        limited.text.contains("Too many failed sign-ins"),
        "{}",
        limited.text
    );
    assert!(limited.header("retry-after").is_some());
    assert_eq!(
        login_with(&server, &token).status,
        429,
        "not even the right token gets through while limited"
    );
}

#[test]
fn operator_commands_print_the_token_once() {
    let db = TempDb::new();
    lr(&db, "init").json();
    let created = lr(&db, "operator create --name 'Ana (ops)'").json();
    let keys: Vec<&str> = created
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in ["id", "name", "token"] {
        assert!(keys.contains(&key), "{key} in {keys:?}");
    }
    assert_eq!(created["name"], "Ana (ops)");
    assert!(created["token"].as_str().unwrap().starts_with("lro_"));
    let listed = lr(&db, "operator list").json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["id"], created["id"]);
    assert!(listed[0].get("token").is_none(), "{listed}");
    assert!(
        !listed
            .to_string()
            .contains(created["token"].as_str().unwrap())
    );
    lr(&db, "operator revoke opr_nope")
        .fails(1)
        .stderr_contains("unknown operator 'opr_nope'");
    lr(&db, "operator create --name ''").fails(1);
}

/// What the hostile lead carries, and how each must show.
pub(crate) const SCRIPT: &str = "<script>alert(1)</script>";
const SCRIPT_SHOWN: &str = "&lt;script&gt;alert(1)&lt;/script&gt;";
pub(crate) const IMG: &str = "\"><img src=x onerror=alert(1)>";
const IMG_SHOWN: &str = "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;";
const EXCERPT: &str = "<b>refused</b><img src=y onerror=alert(2)>";
const EXCERPT_SHOWN: &str = "&lt;b&gt;refused&lt;/b&gt;&lt;img src=y onerror=alert(2)&gt;";

/// Asserts that `page` shows every hostile string in `shown` escaped and none raw.
fn assert_escaped(path: &str, page: &Reply, shown: &[&str]) {
    assert_eq!(page.status, 200, "{path}: {}", page.text);
    for raw in [SCRIPT, IMG, EXCERPT, "<script", "<img", "onerror=alert(1)>"] {
        assert!(!page.text.contains(raw), "{path} has the raw {raw}");
    }
    for escaped in shown {
        assert!(page.text.contains(escaped), "{path} lacks {escaped}");
    }
}

/// A complete lead (the default weights score it 99) with automated delivery.
fn hostile_lead() -> Value {
    json!({
        "externalId": "partner-77",
        "firstName": SCRIPT,
        "lastName": "Lee",
        "email": "Ann.Lee@Example.com",
        "phone": "+49 30 1234567",
        "street": "Hauptstr.",
        "houseNumber": "1",
        "postalCode": "10115",
        "city": "Berlin",
        "country": "DE",
        "consentStatus": "granted",
        "consentCapturedAt": "2025-01-06T10:00:00Z",
        "note": IMG,
        IMG: "as a key too",
        "productSlug": "solar",
        "triggerAutoDelivery": true,
    })
}

/// What [`populate`] made.
pub(crate) struct Business {
    /// Kept so the buyers' endpoint stays up while the test runs.
    pub _receiver: Receiver,
    /// The hostile lead, sold to `good` by auto-delivery.
    pub lead_id: String,
    /// A plain lead delivered by hand to `refuses`, whose endpoint answered 400 with HTML.
    pub other_lead: String,
    pub other_request: String,
}

/// Buyers `good` (solar at 30, daily cap 5), `picky` (a filter that excludes the lead) and
/// `refuses` (answers 400 with HTML), the hostile lead auto-delivered to `good`, and a
/// second lead delivered to `refuses`, whose event has failed.
pub(crate) fn populate(server: &TestServer) -> Business {
    let receiver = Receiver::start();
    receiver.answer("/refuses", Answer::status(400).body(EXCERPT));
    let db = &server.db.path;
    setup(db);
    buyer(db, "good", &receiver.url("/good"), None, "");
    lr(
        db,
        "buyer subscribe good --product solar --price 30 --daily-cap 5",
    )
    .ok();
    buyer(db, "picky", &receiver.url("/picky"), None, "");
    lr(
        db,
        "buyer subscribe picky --product solar --price 50 --filter country=FR",
    )
    .ok();
    buyer(db, "refuses", &receiver.url("/refuses"), None, "");

    // The hostile lead is routed automatically: `good` takes it, `picky` is a candidate that
    // the filter excludes.
    let (lead_id, _) = lead_request(server, &hostile_lead());
    receiver.wait_for(1, WAIT);
    // A second lead, delivered by hand to a buyer whose endpoint refuses it with HTML.
    let (other_lead, other_request) = lead_request(server, &simple_lead(2));
    deliver(db, &other_request, "refuses", Some("12"));
    wait_until(WAIT, "the refused event fails", || {
        lr(db, "outbox list --status failed")
            .json()
            .as_array()
            .unwrap()
            .len()
            == 1
    });
    Business {
        _receiver: receiver,
        lead_id,
        other_lead,
        other_request,
    }
}

#[test]
fn the_pages_show_the_business_and_every_partner_or_buyer_string_as_text() {
    let server = start();
    let Business {
        lead_id,
        other_lead,
        other_request,
        ..
    } = populate(&server);
    let db = &server.db.path;
    let cookie = login(&server);

    let overview = get(&server, "/", &cookie);
    assert_escaped("/", &overview, &[]);
    let today = overview
        .text
        .split("<th scope=\"row\">Today</th>")
        .nth(1)
        .unwrap();
    let cells: Vec<&str> = today
        .split("</tr>")
        .next()
        .unwrap()
        .split("<td>")
        .skip(1)
        .map(|cell| cell.trim_end_matches("</td>"))
        .collect();
    assert_eq!(cells, ["2", "2", "42.00", "34.00", "0.0%"], "{today}");
    assert_eq!(
        overview.text.matches("<rect class=\"bar\"").count(),
        48 + 30,
        "a bar per hour and per day"
    );
    assert!(overview.text.contains("id=\"leads-per-hour\""));
    assert!(
        overview.text.contains("data-value=\"42\""),
        "today's revenue bar"
    );
    assert!(
        overview.text.contains(">1</span> failed"),
        "{}",
        overview.text
    );
    assert!(
        overview.text.contains("refuses"),
        "the failing buyer is named"
    );

    let leads = get(&server, "/leads", &cookie);
    assert_escaped("/leads", &leads, &[SCRIPT_SHOWN]);
    assert!(leads.text.contains(&format!("href=\"/leads/{lead_id}\"")));
    assert!(leads.text.contains(&other_lead));
    // Search: email and phone normalised as duplicates are, the external id, the lead id,
    // and the ids of its request and transaction.
    let transaction = lr(db, "transaction list").json()[0].clone();
    let found_by = |q: &str| -> Vec<String> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("q", q)
            .finish();
        let page = get(&server, &format!("/leads?{query}"), &cookie);
        assert_escaped("/leads?q=", &page, &[]);
        page.text
            .split("href=\"/leads/")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap().to_string())
            .collect()
    };
    let good_txn = lr(db, "transaction list")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["buyerAccountId"] == "good")
        .unwrap()["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    for q in [
        "  ann.lee@EXAMPLE.com ",
        "+49 (30) 123-4567",
        "partner-77",
        &lead_id,
        &good_txn,
    ] {
        assert_eq!(found_by(q), std::slice::from_ref(&lead_id), "{q}");
    }
    assert_eq!(found_by(&other_request), std::slice::from_ref(&other_lead));
    assert!(found_by("nobody@example.com").is_empty());
    assert!(transaction.is_object());

    let lead = get(&server, &format!("/leads/{lead_id}"), &cookie);
    assert_escaped("/leads/{id}", &lead, &[SCRIPT_SHOWN, IMG_SHOWN]);
    for shown in [
        "class=\"list candidates\"",
        "<td>good</td>",
        "<td>picky</td>",
        "filter_mismatch",
        "class=\"score\"",
        "Evaluation factors",
        "validEmail",
        "auto-delivery",
        "lead.delivered",
        // Labels people read, amounts with two decimals, each factor's weight.
        "<th>Weight</th>",
        "<dt>Buyer price</dt><dd>30.00</dd>",
        "<dt>Quality status</dt>",
        "<td>30.00</td>",
    ] {
        assert!(lead.text.contains(shown), "the lead page shows {shown}");
    }
    for raw in ["<dt>buyerPrice</dt>", "<dt>qualityStatus</dt>", ">30.0<"] {
        assert!(!lead.text.contains(raw), "the lead page shows {raw}");
    }
    let refused = get(&server, &format!("/leads/{other_lead}"), &cookie);
    assert_escaped("/leads/{other}", &refused, &[EXCERPT_SHOWN]);
    assert!(
        refused.text.contains("<td>400</td>"),
        "the attempt's status"
    );
    assert_eq!(get(&server, "/leads/lead_nope", &cookie).status, 404);

    let buyers = get(&server, "/buyers", &cookie);
    assert_escaped("/buyers", &buyers, &[]);
    assert!(
        buyers.text.contains("solar at 30.00: 1 / 5"),
        "caps used today"
    );
    assert!(
        buyers.text.contains("0 pending · 1 failed"),
        "the refusing endpoint"
    );
    let good_row = buyers.text.split("id=\"buyer-good\"").nth(1).unwrap();
    let good_row = good_row.split("</tr>").next().unwrap();
    assert!(
        good_row.contains("<td>1</td>"),
        "sold in 30 days: {good_row}"
    );

    let sources = get(&server, "/sources", &cookie);
    assert_escaped("/sources", &sources, &[]);
    let src_row = sources.text.split("id=\"source-src\"").nth(1).unwrap();
    let src_row = src_row.split("</tr>").next().unwrap();
    assert!(src_row.contains("<td>2</td>"), "2 leads today: {src_row}");
    assert!(src_row.contains("2 · 0 · 0"), "quality mix: {src_row}");

    let outbox = get(&server, "/outbox", &cookie);
    assert_escaped("/outbox", &outbox, &[]);
    assert!(
        outbox.text.contains("0 pending, 1 failed"),
        "{}",
        outbox.text
    );
    assert!(
        outbox
            .text
            .contains(&format!("href=\"/leads/{other_lead}\""))
    );
}

/// The cells of the table row that follows `marker` in `page`.
fn row_cells<'a>(page: &'a str, marker: &str) -> Vec<&'a str> {
    let row = page
        .split(marker)
        .nth(1)
        .unwrap_or_else(|| panic!("{marker}"));
    cells_of(row)
}

/// The cells of the table row `row` starts with.
fn cells_of(row: &str) -> Vec<&str> {
    row.split("</tr>")
        .next()
        .unwrap()
        .split("<td")
        .skip(1)
        .map(|cell| {
            let cell = cell.split_once('>').unwrap().1;
            cell.split("</td>").next().unwrap()
        })
        .collect()
}

/// The lifecycle secret of buyer `b` of [`start_with_b`].
const B_SECRET: &str = "buyer-secret-of-b-0123456789";

/// A console server with [`setup`]'s source and a buyer `b` of solar at 30 posting to the
/// receiver returned (kept while the test runs), whose lifecycle secret is [`B_SECRET`].
fn start_with_b() -> (TestServer, Receiver) {
    let server = start();
    let receiver = Receiver::start();
    setup(&server.db.path);
    buyer(
        &server.db.path,
        "b",
        &receiver.url("/b"),
        Some("30"),
        ["--secret", B_SECRET],
    );
    (server, receiver)
}

/// Delivers each request to buyer `b` (whose lifecycle secret is `secret`) at its price,
/// and has `b` answer with its status.
fn sell_to_b(server: &TestServer, secret: &str, sales: &[(&String, &str, &str)]) {
    for (request, price, status) in sales {
        let sold = deliver(&server.db.path, request, "b", Some(price));
        let txn = sold["transactionId"].as_str().unwrap();
        let reply = server
            .post("/api/webhooks/partner-confirmation")
            .secret(secret)
            .json(&json!({"transactionId": txn, "status": status}))
            .send();
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
}

/// Each figure counts every status, duplicate verdict and quality apart: three sales (two
/// acknowledged, one rejected by the buyer), a duplicate, a suspect and an invalid lead.
#[test]
fn the_figures_count_each_status_duplicate_and_quality() {
    let (server, _receiver) = start_with_b();
    let db = &server.db.path;
    let secret = B_SECRET;
    let (_, first) = lead_request(&server, &simple_lead(1));
    let (_, second) = lead_request(&server, &simple_lead(2));
    let (duplicate, third) = lead_request(&server, &simple_lead(1));
    let suspect = json!({"firstName": "Bo", "lastName": "Li", "email": "bo@mailinator.com",
        "productSlug": "solar"});
    lead_request(&server, &suspect);
    let invalid = json!({"firstName": "Cy", "lastName": "Wu", "email": "not an address",
        "productSlug": "solar"});
    lead_request(&server, &invalid);
    assert_eq!(
        lr(db, format!("lead show {duplicate}")).json()["duplicateStatus"],
        "review"
    );
    // Prices differ, so that a rejected sale counted as live (or the reverse) shows.
    let sales = [
        (&first, "30", "acknowledged"),
        (&second, "20", "rejected"),
        (&third, "30", "acknowledged"),
    ];
    sell_to_b(&server, secret, &sales);
    let cookie = login(&server);

    let overview = get(&server, "/", &cookie).text;
    // Received, sold, revenue (the rejected sale counts for none) and margin: the
    // report's money, so the rejected sale's lead keeps its supplier cost (no confirmed
    // cancellation took it back), returns.
    assert_eq!(
        row_cells(&overview, "<th scope=\"row\">Today</th>"),
        ["5", "3", "60.00", "48.00", "33.3%"]
    );
    // Every lead is in one of the 48 hours (summed: the test may cross an hour).
    let hours = overview.split("id=\"leads-per-hour\"").nth(1).unwrap();
    let hours = hours.split("id=\"revenue-per-day\"").next().unwrap();
    let per_hour: Vec<u64> = hours
        .split("data-value=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        (per_hour.len(), per_hour.iter().sum()),
        (48, 5),
        "{per_hour:?}"
    );

    let buyers = get(&server, "/buyers", &cookie).text;
    let cells = row_cells(&buyers, "id=\"buyer-b\"");
    // Sold, accepted and returned over 30 days.
    assert_eq!(cells[6..9], ["3", "66.7%", "33.3%"], "{cells:?}");

    let sources = get(&server, "/sources", &cookie).text;
    let cells = row_cells(&sources, "id=\"source-src\"");
    // Today, 30 days, duplicates, refused by validation, quality mix.
    assert_eq!(
        cells[4..9],
        ["5", "5", "1 (20.0%)", "0 (0.0%)", "3 · 1 · 1 (60.0% ok)"],
        "{cells:?}"
    );
}

/// The buyers page shows each endpoint's health as `buyer health` has it: the state, the
/// failures in a row and the last error of a failing endpoint, sends in flight and latency
/// of one that answers; the overview names the unhealthy buyer only.
#[test]
fn the_buyers_page_shows_each_endpoints_health() {
    let mut options = fast_options();
    // Unhealthy at the first failure, and no probe while the test runs.
    options.delivery.breaker = leadrelay::outbox::BreakerConfig {
        failures: 1,
        window_ms: 60_000,
        first_probe_ms: 60_000,
        max_probe_ms: 60_000,
    };
    let server = TestServer::start_with_console(
        TempDb::new(),
        options,
        leadrelay::console::ConsoleConfig::default(),
    );
    let receiver = Receiver::start();
    receiver.answer("/down", Answer::status(503).body(EXCERPT));
    let db = &server.db.path;
    setup(db);
    buyer(db, "down", &receiver.url("/down"), None, "");
    buyer(db, "up", &receiver.url("/up"), None, "");
    for (n, to) in [(1, "down"), (2, "up")] {
        let (_, request) = lead_request(&server, &simple_lead(n));
        deliver(db, &request, to, Some("10"));
    }
    let health = |buyer: &str| lr(db, format!("buyer health {buyer}")).json();
    wait_until(WAIT, "down to be unhealthy", || {
        health("down")["state"] == "unhealthy"
    });
    wait_until(WAIT, "up's latency to be reported", || {
        health("up")["latencyMs"]["p50"].is_number()
    });
    let cookie = login(&server);

    let buyers = get(&server, "/buyers", &cookie);
    assert_escaped("/buyers", &buyers, &[]);
    let down = row_cells(&buyers.text, "id=\"buyer-down\"")[4];
    for shown in [
        "tag unhealthy",
        "failures in a row",
        "next probe",
        "last error",
        "503",
    ] {
        assert!(down.contains(shown), "{shown} in {down}");
    }
    let up = row_cells(&buyers.text, "id=\"buyer-up\"")[4];
    for shown in [">healthy<", "0 in flight", "p50 ", "p99 "] {
        assert!(up.contains(shown), "{shown} in {up}");
    }
    assert!(!up.contains("last error"), "{up}");

    let overview = get(&server, "/", &cookie).text;
    let card = overview.split("id=\"unhealthy-buyers\"").nth(1).unwrap();
    let card = card.split("id=\"failing-buyers\"").next().unwrap();
    assert!(card.contains("/buyers#buyer-down"), "{card}");
    assert!(!card.contains("buyer-up"), "{card}");
}

#[test]
fn serve_starts_the_console_on_its_own_listener_unless_it_is_off() {
    let db = TempDb::new();
    let served = util::process::ServeProcess::start(&db.path, &["--console-listen", "127.0.0.1:0"]);
    let console = served
        .console
        .clone()
        .expect("the console's address is printed");
    assert_ne!(console, served.base);
    let form = Request::new("GET", &format!("{console}/login")).send();
    assert_eq!(form.status, 200);
    assert!(form.text.contains("Operator token"));
    let page = Request::new("GET", &format!("{console}/")).send();
    assert_eq!(page.status, 303);
    assert_eq!(
        served.terminate().code(),
        Some(0),
        "both listeners stop cleanly"
    );

    let help = lr(&db, "serve --help").ok();
    assert!(help.contains("[default: 127.0.0.1:8081]"), "{help}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    lr(
        &db,
        "serve --listen 127.0.0.1:0 --portal-listen off --console-listen",
    )
    .arg(&port)
    .fails(1)
    .stderr_contains("for the console (--console-listen off turns it off)");
}

/// The figures of a report row as `/reports` shows them (its cells after the `by` keys),
/// from the row of `report --json`: counts, money with two decimals, the return rate as a
/// percentage.
fn shown_figures(row: &Value) -> Vec<String> {
    let count = |key: &str| row[key].as_i64().unwrap_or_else(|| panic!("{key}: {row}"));
    let money = |key: &str| format!("{:.2}", row[key].as_f64().unwrap());
    let mut cells: Vec<String> = [
        "received",
        "accepted",
        "duplicates",
        "rejected",
        "sold",
        "acknowledged",
        "returned",
        "paid",
    ]
    .iter()
    .map(|key| count(key).to_string())
    .collect();
    cells.extend(["revenue", "supplierCost", "margin"].map(money));
    cells.push(match row["returnRate"].as_f64() {
        Some(rate) => format!("{:.1}%", rate * 100.0),
        None => "–".into(),
    });
    cells
}

/// The cells of every `tr.row` of the report table, and of its totals row.
fn report_table(page: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let table = page
        .split("id=\"report\"")
        .nth(1)
        .unwrap_or_else(|| panic!("a report table: {page}"));
    let table = table.split("</table>").next().unwrap();
    let cells =
        |row: &str| -> Vec<String> { cells_of(row).into_iter().map(String::from).collect() };
    let rows = table
        .split("<tr class=\"row\">")
        .skip(1)
        .map(cells)
        .collect();
    let totals = cells(
        table
            .split("<tr class=\"total\">")
            .nth(1)
            .expect("a totals row"),
    );
    (rows, totals)
}

/// A source and a buyer named `<script>…`, two sales (one returned), a duplicate and a
/// lead refused by validation: `/reports` shows what `report --json` says for the same
/// query, with the names as text, and `/reports.csv` is `report --csv` byte for byte; the
/// sources page counts the refused lead as received and refused, as the report does.
#[test]
fn the_reports_page_and_csv_are_the_cli_report() {
    let (server, _receiver) = start_with_b();
    let db = &server.db.path;
    let secret = B_SECRET;
    lr(db, "source update src --name").arg(SCRIPT).json();
    lr(db, "buyer update b --name").arg(SCRIPT).json();
    let (_, first) = lead_request(&server, &simple_lead(1));
    let (_, second) = lead_request(&server, &simple_lead(2));
    lead_request(&server, &simple_lead(1));
    let refused = server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &json!({"firstName": "Ann"}),
    );
    assert_eq!(refused.status, 400, "{}", refused.text);
    sell_to_b(
        &server,
        secret,
        &[(&first, "30", "acknowledged"), (&second, "20", "rejected")],
    );
    let cookie = login(&server);

    // The default: the last 7 days by day, as the CLI's default.
    let cli = lr(db, "report").json();
    let page = get(&server, "/reports", &cookie);
    assert_escaped("/reports", &page, &[]);
    let (rows, totals) = report_table(&page.text);
    let cli_rows = cli["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 7);
    for (row, cli_row) in rows.iter().zip(cli_rows) {
        assert_eq!(row[0], cli_row["day"].as_str().unwrap());
        assert_eq!(row[1..], shown_figures(cli_row), "{cli_row}");
    }
    assert_eq!(totals, shown_figures(&cli["totals"]));
    assert_eq!(
        totals,
        [
            "4", "2", "1", "1", "2", "1", "1", "0", "30.00", "8.00", "22.00", "50.0%"
        ],
        "the figures of what the test did"
    );
    let csv_link = format!(
        "href=\"/reports.csv?workspace=ws&amp;from={}&amp;to={}&amp;by=day\"",
        cli["from"].as_str().unwrap(),
        cli["to"].as_str().unwrap()
    );
    assert!(page.text.contains(&csv_link), "{}", page.text);

    // The sources page counts the lead validation refused as received and as refused
    // (from the report aggregate); its quality mix is of the stored leads. The overview
    // counts stored leads; its money is the report's: today's margin is the report's
    // (everything happened today), the rejected sale's supplier cost included.
    let overview = get(&server, "/", &cookie).text;
    let today = row_cells(&overview, "<th scope=\"row\">Today</th>");
    assert_eq!(today, ["3", "2", "30.00", "22.00", "50.0%"]);
    assert_eq!(
        (today[2], today[3]),
        (totals[8].as_str(), totals[10].as_str())
    );
    let sources = get(&server, "/sources", &cookie);
    assert_escaped("/sources", &sources, &[SCRIPT_SHOWN]);
    let cells = row_cells(&sources.text, "id=\"source-src\"");
    assert_eq!(
        cells[4..9],
        ["4", "4", "1 (25.0%)", "1 (25.0%)", "3 · 0 · 0 (100.0% ok)"],
        "{cells:?}"
    );

    // By source and buyer: the names shown as text beside the ids.
    let query = "workspace=ws&from=2020-01-01&to=2030-12-31&by=source&by=buyer&by=";
    let cli = lr(
        db,
        "report --workspace ws --from 2020-01-01 --to 2030-12-31 --by source --by buyer",
    )
    .json();
    let page = get(&server, &format!("/reports?{query}"), &cookie);
    assert_escaped("/reports?by=source", &page, &[SCRIPT_SHOWN]);
    let (rows, totals) = report_table(&page.text);
    let cli_rows = cli["rows"].as_array().unwrap();
    assert_eq!(rows.len(), cli_rows.len(), "{cli}");
    assert_eq!(rows.len(), 2, "leads (no buyer) and b's sales: {cli}");
    for (row, cli_row) in rows.iter().zip(cli_rows) {
        assert_eq!(row[2..], shown_figures(cli_row), "{cli_row}");
        assert_eq!(
            row[0],
            format!("{SCRIPT_SHOWN} <span class=\"id\">src</span>")
        );
    }
    assert_eq!(rows[0][1], "<span class=\"none\">–</span>");
    assert_eq!(
        rows[1][1],
        format!("{SCRIPT_SHOWN} <span class=\"id\">b</span>")
    );
    assert_eq!(totals, shown_figures(&cli["totals"]));

    // The CSV is the CLI's, as a download named by its dates.
    let csv = get(&server, &format!("/reports.csv?{query}"), &cookie);
    assert_eq!(csv.status, 200, "{}", csv.text);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(
        csv.header("content-disposition"),
        Some("attachment; filename=\"leadrelay-report-ws-2020-01-01-2030-12-31.csv\"")
    );
    let cli_csv = lr(
        db,
        "report --workspace ws --from 2020-01-01 --to 2030-12-31 --by source --by buyer --csv",
    )
    .ok();
    assert_eq!(csv.text, cli_csv);
    assert!(
        csv.text.starts_with("source,buyer,received,"),
        "{}",
        csv.text
    );
    assert!(
        csv.text
            .contains("\r\nsrc,b,0,0,0,0,2,1,1,0,30.00,8.00,22.00,0.5000\r\n")
    );
}

/// The reports page's returns section: the return rate per source, supplier and buyer
/// (approved returns: a pending one is no return yet) and the returns per reason code.
#[test]
fn the_reports_page_shows_return_rates_and_returns_per_reason() {
    let (server, _receiver) = start_with_b();
    let db = &server.db.path;
    lr(db, "buyer update b --return-review manual").json();
    let sold: Vec<String> = (1..=4)
        .map(|n| {
            let (_, request) = lead_request(&server, &simple_lead(n));
            deliver(db, &request, "b", Some("30"))["transactionId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for (txn, code) in [
        (&sold[0], "fake"),
        (&sold[1], "fake"),
        (&sold[2], "duplicate"),
    ] {
        let reply = server
            .post("/api/webhooks/partner-cancellation")
            .secret(B_SECRET)
            .json(&json!({"transactionId": txn, "reason": "x", "reasonCode": code}))
            .send();
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    lr(db, format!("transaction return approve {}", sold[0])).json();
    lr(db, format!("transaction return deny {} --note no", sold[1])).json();
    let cookie = login(&server);
    let page = get(&server, "/reports", &cookie).text;
    // The cells of each row of the table with `id`.
    let rows = |id: &str| -> Vec<Vec<String>> {
        let table = page
            .split(&format!("id=\"{id}\""))
            .nth(1)
            .unwrap_or_else(|| panic!("table {id}"));
        let table = table.split("</table>").next().unwrap();
        table
            .split("<tr class=\"row\">")
            .skip(1)
            .map(|row| cells_of(row).into_iter().map(String::from).collect())
            .collect()
    };
    assert_eq!(
        rows("return-rates"),
        [
            vec!["source", "src", "4", "1", "25.0%"],
            vec![
                "supplier",
                "<span class=\"none\">–</span>",
                "4",
                "1",
                "25.0%"
            ],
            vec!["buyer", "b", "4", "1", "25.0%"],
        ],
        "src has no supplier"
    );
    assert_eq!(
        rows("return-reasons"),
        [
            vec![
                "Duplicate lead <span class=\"id\">duplicate</span>",
                "1",
                "1",
                "0",
                "0"
            ],
            vec![
                "Fake or test lead <span class=\"id\">fake</span>",
                "2",
                "0",
                "1",
                "1"
            ],
        ]
    );
}

/// A bad date, dimension, period or workspace gets the form again with the problem
/// (400), on the page and on the CSV's address; nothing is a 500.
#[test]
fn bad_report_input_gets_the_form_again() {
    let server = start();
    setup(&server.db.path);
    let cookie = login(&server);
    let cases = [
        (
            "from=2026-13-01",
            "from: expected a date like 2026-11-23, not '2026-13-01'",
        ),
        (
            "to=yesterday",
            "to: expected a date like 2026-11-23, not 'yesterday'",
        ),
        ("by=hour", "by: unknown dimension 'hour'"),
        ("by=day&by=day", "by: day is chosen twice"),
        (
            "from=2026-11-02&to=2026-11-01",
            "the report starts (2026-11-02) after it ends (2026-11-01)",
        ),
        (
            "from=0026-11-01&to=2026-11-01",
            "by day is more than 3660 rows",
        ),
        ("workspace=nope", "unknown workspace 'nope'"),
        ("from=%3Cscript%3E", "not '&lt;script&gt;'"),
    ];
    for (query, message) in cases {
        for path in ["/reports", "/reports.csv"] {
            let reply = get(&server, &format!("{path}?{query}"), &cookie);
            assert_eq!(reply.status, 400, "{path}?{query}: {}", reply.text);
            assert_eq!(
                reply.header("content-type"),
                Some("text/html; charset=utf-8")
            );
            let problems = reply
                .text
                .split("id=\"report-problems\"")
                .nth(1)
                .unwrap_or_else(|| panic!("{path}?{query}: {}", reply.text));
            assert!(problems.contains(message), "{path}?{query}: {problems}");
            assert!(reply.text.contains("id=\"report-form\""), "the form again");
            assert!(!reply.text.contains("<script>"));
        }
    }
    // Empty fields are the defaults.
    let reply = get(&server, "/reports?from=&to=&by=", &cookie);
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// An erased lead is shown as erased, with the date, in the list and on its page: never
/// as a blank row with status `active`, which looks like data loss.
#[test]
fn an_erased_lead_shows_as_erased_with_its_date() {
    let server = start();
    setup(&server);
    let (kept, _) = lead_request(&server, &simple_lead(1));
    let (erased, _) = lead_request(&server, &simple_lead(2));
    lr(&server, format!("lead erase --lead {erased} --yes")).json();
    let erased_at = lr(&server, format!("lead show {erased}")).json()["erasedAt"]
        .as_str()
        .unwrap()
        .to_string();
    // The console shows times in the workspace's zone (UTC here) to the second.
    let date = erased_at[..19].replace('T', " ");
    let cookie = login(&server);

    let list = get(&server, "/leads", &cookie);
    assert_eq!(list.status, 200);
    let cells = row_cells(&list.text, &format!("href=\"/leads/{erased}\""));
    assert!(
        cells.iter().any(|c| *c == format!("Erased {date}")),
        "{cells:?}"
    );
    assert_eq!(cells.last(), Some(&"erased"), "{cells:?}");
    let cells = row_cells(&list.text, &format!("href=\"/leads/{kept}\""));
    assert!(cells.contains(&"Ada Lovelace 1"), "{cells:?}");
    assert!(!cells.iter().any(|c| c.contains("Erased")), "{cells:?}");

    let page = get(&server, &format!("/leads/{erased}"), &cookie);
    assert_eq!(page.status, 200);
    assert!(
        page.text
            .contains(&format!("Erased {date}: the person's data was removed")),
        "{}",
        page.text
    );
    let summary = page.text.split("id=\"lead-summary\"").nth(1).unwrap();
    let status = summary.split("<dt>Status</dt>").nth(1).unwrap();
    assert!(status.starts_with("<dd>erased</dd>"), "{status}");
    let page = get(&server, &format!("/leads/{kept}"), &cookie);
    assert!(!page.text.contains("Erased"), "{}", page.text);
}
