//! Lead ingest over HTTP (SPEC.md 2, 4.2, 4.3, 5, 8; DESIGN.md section 2): shapes,
//! validation, idempotency, duplicates, quality, secrets, and what `lead show` / `lead list`
//! print afterwards.

use serde_json::{Value, json};

use crate::util::{TestServer, basic_setup};

const CHANNEL_PATH: &str = "/api/webhooks/channels/web/sources/landing/leads";

/// A server with `basic_setup`, a product `heat` with a required field `size` (small or
/// large) and an optional `notes`, and a channel source `landing` without a secret.
fn server() -> TestServer {
    let server = TestServer::start();
    basic_setup(&server.db.path);
    server.cli(&[
        "product",
        "create",
        "--workspace",
        "ws",
        "--slug",
        "heat",
        "--name",
        "Heat pump",
        "--id",
        "heat-pump",
        "--field",
        "size:required=small|large",
        "--field",
        "notes",
    ]);
    server.cli(&[
        "source",
        "create",
        "--channel",
        "web",
        "--name",
        "Landing",
        "--id",
        "landing",
        "--no-secret",
    ]);
    server
}

fn jane() -> Value {
    json!({
        "externalId": "jane-1",
        "firstName": "Jane",
        "lastName": "Doe",
        "email": "jane@example.com",
        "phone": "+49 30 1234567",
        "postalCode": "10115",
        "country": "DE",
        "consentStatus": "granted",
    })
}

#[test]
fn a_single_lead_is_stored_with_its_request_and_answered_201() {
    let server = server();
    let mut lead = jane();
    lead["productSlug"] = json!("heat");
    lead["fieldValues"] = json!({"size": "small", "colour": "red"});
    lead["routingReady"] = json!(true);
    lead["utmSource"] = json!("newsletter");
    let reply = server.post_json(CHANNEL_PATH, &lead);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let item = &reply.json["item"];
    assert_eq!(item["status"], "accepted");
    assert_eq!(item["channelId"], "web");
    assert_eq!(item["sourceId"], "landing");
    assert_eq!(item["externalId"], "jane-1");
    assert_eq!(item["idempotentReplay"], false);
    assert_eq!(item["ingest"]["qualityStatus"], "ok");
    assert_eq!(item["ingest"]["qualityReasons"], json!([]));
    assert_eq!(item["ingest"]["duplicateStatus"], "unique");
    assert!(item["ingest"].get("duplicateMatch").is_none());
    let lead_id = item["leadId"].as_str().unwrap();
    assert!(lead_id.starts_with("lead_"));
    let request_ids = item["requestIds"].as_array().unwrap();
    assert_eq!(request_ids.len(), 1);

    // What was stored, read back by another process through the CLI.
    let shown = server.cli(&["lead", "show", lead_id]);
    assert_eq!(shown["id"], lead_id);
    assert_eq!(shown["person"]["firstName"], "Jane");
    assert_eq!(shown["person"]["email"], "jane@example.com");
    assert_eq!(shown["consent"]["status"], "granted");
    assert_eq!(
        shown["additionalProperties"],
        json!({"utmSource": "newsletter"})
    );
    assert_eq!(shown["qualityStatus"], "ok");
    assert_eq!(shown["duplicateStatus"], "unique");
    assert_eq!(shown["status"], "active");
    let requests = shown["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["id"], request_ids[0]);
    assert_eq!(requests[0]["productId"], "heat-pump");
    assert_eq!(requests[0]["productSlug"], "heat");
    assert_eq!(requests[0]["routingReady"], true);
    assert_eq!(requests[0]["triggerAutoDelivery"], false);
    assert_eq!(
        requests[0]["fieldValues"],
        json!({"size": "small", "colour": "red"})
    );
    assert_eq!(requests[0]["status"], "open");
}
