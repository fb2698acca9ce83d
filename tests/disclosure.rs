//! Disclosure per source (DESIGN.md section 5, amended): a `summary` source's partner is
//! told each request's outcome and reason, never who bought the lead, at what price, the
//! transaction, the score or another lead's id. Checked by searching the raw answers (single,
//! batch, replay, duplicate) for the values the test knows; `lead show` keeps everything,
//! and a `full` source answers with the whole trace.

use serde_json::{Value, json};

use crate::util::receiver::Receiver;
use crate::util::{Reply, TestServer, basic_setup, buyer, complete_lead, lr, source};

/// A buyer id and a price no answer would contain by chance.
const BUYER: &str = "buyer-zq7";
const PRICE: &str = "37.13";

struct Setup {
    server: TestServer,
    _receiver: Receiver,
}

/// Sources `hidden` (default: summary) and `own` (`--result-detail full`) in channel `web`,
/// both with a duplicate rule on email; a buyer of `solar` at [`PRICE`].
fn setup() -> Setup {
    let server = TestServer::start();
    let receiver = Receiver::start();
    basic_setup(&server);
    let hidden = source(&server, "web", "hidden", "--no-secret");
    assert_eq!(hidden["resultDetail"], "summary");
    let own = source(&server, "web", "own", "--no-secret --result-detail full");
    assert_eq!(own["resultDetail"], "full");
    buyer(&server, BUYER, &receiver.url("/hook"), Some(PRICE), "");
    Setup {
        server,
        _receiver: receiver,
    }
}

fn post(server: &TestServer, source: &str, body: &Value) -> Reply {
    server.post_json(
        &format!("/api/webhooks/channels/web/sources/{source}/leads"),
        body,
    )
}

/// Everything `lead show` knows that a summary answer must not contain: the buyer, the
/// price, the transaction ids, and the words of the evaluation and the candidate list.
fn secrets_of(server: &TestServer, lead_id: &str) -> Vec<String> {
    let shown = lr(server, format!("lead show {lead_id}")).json();
    let text = shown.to_string();
    assert!(text.contains(BUYER), "lead show keeps the buyer: {text}");
    let transactions = lr(server, format!("transaction list --lead {lead_id}")).json();
    let mut secrets: Vec<String> = transactions
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["transactionId"].as_str().unwrap().to_string())
        .collect();
    assert!(!secrets.is_empty(), "the lead was delivered: {text}");
    for t in &secrets {
        assert!(text.contains(t.as_str()), "lead show keeps {t}: {text}");
    }
    secrets.extend(
        [
            BUYER,
            PRICE,
            "buyerAccountId",
            "buyerPrice",
            "transactionId",
            "evaluation",
            "score",
            "factors",
            "contribution",
            "candidates",
            "deliveries",
        ]
        .map(String::from),
    );
    secrets
}

fn assert_discloses_nothing(what: &str, body: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !body.contains(secret.as_str()),
            "{what} shows {secret}: {body}"
        );
    }
}

/// The summary of one delivered request, as the design gives it.
fn summary_of(item: &Value) -> Value {
    let request_id = &item["requestIds"][0];
    json!({"version": "1.0", "delivered": 1,
           "requests": [{"requestId": request_id, "outcome": "delivered", "reason": "delivered"}]})
}

#[test]
fn a_summary_source_never_shows_buyers_prices_transactions_or_scores() {
    let s = setup();
    let server = &s.server;

    // Single.
    let reply = post(
        server,
        "hidden",
        &complete_lead("x-1", "ann@example.org", "+4930111"),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let item = &reply.json["item"];
    let lead_id = item["leadId"].as_str().unwrap().to_string();
    let secrets = secrets_of(server, &lead_id);
    assert_discloses_nothing("a single answer", &reply.text, &secrets);
    assert_eq!(item["autoDelivery"], summary_of(item), "{}", reply.text);

    // Replay of the same externalId: the stored answer, cut the same way.
    let replay = post(
        server,
        "hidden",
        &complete_lead("x-1", "ann@example.org", "+4930111"),
    );
    assert_eq!(replay.status, 200, "{}", replay.text);
    assert_eq!(replay.json["item"]["idempotentReplay"], true);
    assert_discloses_nothing("a replay", &replay.text, &secrets);
    assert_eq!(replay.json["item"]["autoDelivery"], summary_of(item));

    // Batch.
    let batch = post(
        server,
        "hidden",
        &json!({"leads": [complete_lead("x-2", "bob@example.org", "+4930222")]}),
    );
    assert_eq!(batch.status, 201, "{}", batch.text);
    let batch_item = &batch.json["items"][0];
    let batch_lead = batch_item["leadId"].as_str().unwrap();
    let mut batch_secrets = secrets_of(server, batch_lead);
    batch_secrets.extend(secrets.iter().cloned());
    assert_discloses_nothing("a batch answer", &batch.text, &batch_secrets);
    assert_eq!(batch_item["autoDelivery"], summary_of(batch_item));

    // Duplicate (same email, new externalId): which field matched, never the other lead.
    let duplicate = post(
        server,
        "hidden",
        &complete_lead("x-3", "ann@example.org", "+4930333"),
    );
    assert_eq!(duplicate.status, 201, "{}", duplicate.text);
    let ingest = &duplicate.json["item"]["ingest"];
    assert_eq!(ingest["duplicateStatus"], "review", "{}", duplicate.text);
    assert_eq!(ingest["duplicateMatch"], json!({"field": "email"}));
    assert!(
        !duplicate.text.contains(&lead_id),
        "the duplicate answer names the original: {}",
        duplicate.text
    );
    // `lead show` has the whole match.
    let dup_id = duplicate.json["item"]["leadId"].as_str().unwrap();
    let shown = lr(server, format!("lead show {dup_id}")).json();
    assert_eq!(
        shown["duplicateMatch"]["leadId"],
        lead_id.as_str(),
        "{shown}"
    );
}

#[test]
fn a_full_source_shows_the_whole_trace_and_the_setting_can_change() {
    let s = setup();
    let server = &s.server;
    let reply = post(
        server,
        "own",
        &complete_lead("o-1", "cy@example.org", "+4930444"),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let auto = &reply.json["item"]["autoDelivery"];
    let request = &auto["requests"][0];
    assert_eq!(request["deliveries"][0]["buyerAccountId"], BUYER, "{auto}");
    assert_eq!(request["deliveries"][0]["buyerPrice"], json!(37.13));
    assert!(request["evaluation"]["score"].is_number(), "{auto}");
    assert!(request["candidates"].is_array(), "{auto}");
    let duplicate = post(
        server,
        "own",
        &complete_lead("o-2", "cy@example.org", "+4930555"),
    );
    let lead_id = reply.json["item"]["leadId"].as_str().unwrap();
    assert_eq!(
        duplicate.json["item"]["ingest"]["duplicateMatch"]["leadId"], lead_id,
        "{}",
        duplicate.text
    );

    // The operator turns the source to summary: a replay of the same lead no longer shows
    // what it showed at first.
    let updated = lr(server, "source update own --result-detail summary").json();
    assert_eq!(updated["resultDetail"], "summary");
    let replay = post(
        server,
        "own",
        &complete_lead("o-1", "cy@example.org", "+4930444"),
    );
    assert_eq!(replay.json["item"]["idempotentReplay"], true);
    let secrets = secrets_of(server, lead_id);
    assert_discloses_nothing("a replay after the change", &replay.text, &secrets);
    let replay = post(
        server,
        "own",
        &complete_lead("o-2", "cy@example.org", "+4930555"),
    );
    assert!(!replay.text.contains(lead_id), "{}", replay.text);

    // And back to full: the stored answer was kept whole.
    lr(server, "source update own --result-detail full").json();
    let replay = post(
        server,
        "own",
        &complete_lead("o-1", "cy@example.org", "+4930444"),
    );
    assert_eq!(
        replay.json["item"]["autoDelivery"]["requests"][0]["deliveries"][0]["buyerAccountId"],
        BUYER
    );
    lr(server, "source update own --result-detail everything").fails(2);
}
