//! `leadrelay lead show` and `lead list`: what ingest stored, as the operator reads it.

use serde_json::json;

use crate::ingest::{CHANNEL_PATH, TABLE_PATH, jane, person, server, with};
use crate::util::{lr, strings};

#[test]
fn lead_list_is_newest_first_and_filters_by_source() {
    let server = server();
    let mut ids = Vec::new();
    for n in 0..3 {
        let reply = server.post_json(
            CHANNEL_PATH,
            &with(person(n), json!({"productSlug": "solar"})),
        );
        ids.push(reply.json["item"]["leadId"].as_str().unwrap().to_string());
    }
    let table = server.post_json(TABLE_PATH, &jane());
    let table_id = table.json["item"]["leadId"].as_str().unwrap().to_string();

    let all = lr(&server, "lead list").json();
    assert_eq!(
        strings(&all, "id"),
        [table_id.as_str(), &ids[2], &ids[1], &ids[0]]
    );

    let landing = lr(&server, "lead list --source landing").json();
    assert_eq!(strings(&landing, "id"), [&ids[2], &ids[1], &ids[0]]);
    let first = &landing[0];
    assert_eq!(first["sourceId"], "landing");
    assert_eq!(first["channelId"], "web");
    assert_eq!(first["externalId"], "p-2");
    assert_eq!(first["firstName"], "Max");
    assert_eq!(first["lastName"], "Person2");
    assert_eq!(first["email"], "max2@example.com");
    assert_eq!(first["qualityStatus"], "ok");
    assert_eq!(first["duplicateStatus"], "unique");
    assert_eq!(first["status"], "active");
    assert_eq!(first["products"], json!(["solar"]));
    assert_eq!(first["requestIds"].as_array().unwrap().len(), 1);
    assert!(first["createdAt"].as_str().unwrap().ends_with('Z'));

    let limited = lr(&server, "lead list --limit 2").json();
    assert_eq!(limited.as_array().unwrap().len(), 2);
    let table_leads = lr(&server, "lead list --source import").json();
    assert_eq!(table_leads[0]["tableId"], "list");
}

#[test]
fn lead_commands_print_text_and_clear_errors() {
    let server = server();
    let reply = server.post_json(CHANNEL_PATH, &with(jane(), json!({"productSlug": "solar"})));
    let lead_id = reply.json["item"]["leadId"].as_str().unwrap();

    let text = lr(&server, format!("lead show {lead_id}")).ok();
    for expected in [
        &format!("id: {lead_id}") as &str,
        "person:",
        "  firstName: Jane",
        "consent:",
        "  status: granted",
        "qualityStatus: ok",
        "duplicateStatus: unique",
        "requests:",
        "    productSlug: solar",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
    assert!(lr(&server, "lead list").ok().contains(lead_id));

    for (line, message) in [
        ("lead show lead_nope", "unknown lead 'lead_nope'"),
        ("lead list --source nope", "unknown source 'nope'"),
    ] {
        lr(&server, line).fails(1).stderr_contains(message);
    }
    lr(&server, "lead list --limit 0").fails(2);
}
