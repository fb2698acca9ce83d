//! Exports and list filters (DESIGN.md section 11): `lead export` and `transaction export`
//! print every matching record with all its fields (what `lead show` / `transaction show`
//! print) as NDJSON or RFC 4180 CSV; `lead list`, `transaction list` and `ledger list`
//! narrow by source, buyer, state and dates, and page with `--after`. Data is made through
//! the real interfaces: leads over HTTP, deliveries and reads with the CLI.

use serde_json::{Value, json};

use crate::lifecycle::{CONFIRMATION, Fixture};
use crate::util::{WAIT, lr, wait_until};

/// Today and tomorrow in UTC (the fixture's workspace zone), as `--from`/`--to` take them.
fn today_and_tomorrow() -> (String, String) {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    (today.to_string(), today.tomorrow().unwrap().to_string())
}

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect()
}

fn ids(listed: &Value, key: &str) -> Vec<String> {
    listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|item| item[key].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn exports_print_every_record_with_all_its_fields() {
    let f = Fixture::new();
    let a = f.buyer("a", &["--capabilities", "confirm"]);
    let t1 = f.delivered("a");
    let reply = f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": t1, "status": "acknowledged", "buyerPrice": 30}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    // The outbox sends t1's event meanwhile: the comparisons below would race its status.
    wait_until(WAIT, "t1's event sent", || {
        f.transaction(&t1)["deliveryStatus"] == "sent"
    });
    f.lead_on("plain", &["solar"]);
    // A name with a comma, a quote and a line break: quoted in CSV.
    let reply = f.server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &json!({"firstName": "Ann \"Nan\"", "lastName": "Lee, Jr.\nII",
                "email": "ann@example.org"}),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let odd = reply.json["item"]["leadId"].as_str().unwrap().to_string();

    // NDJSON: one line per lead, oldest first, each exactly what `lead show` prints.
    let exported = lines(&lr(&f.server, "lead export").ok());
    assert_eq!(exported.len(), 3);
    for lead in &exported {
        let shown = lr(
            &f.server,
            format!("lead show {}", lead["id"].as_str().unwrap()),
        )
        .json();
        assert_eq!(lead, &shown);
    }
    assert_eq!(exported[2]["id"], odd.as_str());
    let of_src = lines(&lr(&f.server, "lead export --source src --format ndjson").ok());
    assert_eq!(of_src.len(), 2);
    let (today, tomorrow) = today_and_tomorrow();
    assert_eq!(
        lr(&f.server, format!("lead export --from {tomorrow}")).ok(),
        ""
    );
    assert_eq!(
        lines(
            &lr(
                &f.server,
                format!("lead export --from {today} --to {today}")
            )
            .ok()
        )
        .len(),
        3
    );
    lr(&f.server, "lead export --source nope")
        .fails(1)
        .stderr_contains("unknown source 'nope'");

    // CSV: a header, then one record per lead request and sale, flat; the lead's own
    // columns on each; a lead without requests has one record.
    let text = lr(&f.server, "lead export --format csv").ok();
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[0], "id");
    assert!(header.contains(&"person.email".to_string()), "{header:?}");
    assert!(!header.contains(&"requests".to_string()), "{header:?}");
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), 3);
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let sold = &records[0];
    assert_eq!(&sold[column("productSlug")], "solar");
    assert_eq!(&sold[column("requestStatus")], "delivered");
    assert_eq!(&sold[column("transactionId")], t1.as_str());
    assert_eq!(&sold[column("transactionStatus")], "acknowledged");
    assert_eq!(&sold[column("buyerId")], "a");
    assert_eq!(&sold[column("buyerPrice")], "30.00");
    assert!(sold[column("deliveredAt")].starts_with("20"), "{sold:?}");
    assert_eq!(&sold[column("returned")], "false");
    let unsold = &records[1];
    assert_eq!(&unsold[column("productSlug")], "solar");
    assert_eq!(&unsold[column("transactionId")], "");
    assert_eq!(&unsold[column("buyerPrice")], "");
    let last = &records[2];
    assert_eq!(&last[column("id")], odd.as_str());
    assert_eq!(&last[column("person.lastName")], "Lee, Jr.\nII");
    assert_eq!(&last[column("person.firstName")], "Ann \"Nan\"");
    assert_eq!(&last[column("requestId")], "");
    assert!(text.contains("\"Lee, Jr.\nII\""), "{text}");

    // Transactions: every field of `transaction show` but its history, events and ledger,
    // with its workspace, its lead's source and what a prepaid balance was charged.
    let exported = lines(&lr(&f.server, "transaction export").ok());
    assert_eq!(exported.len(), 1);
    let mut shown = f.transaction(&t1);
    for key in ["history", "events", "ledger"] {
        shown.as_object_mut().unwrap().remove(key);
    }
    let mut line = exported[0].clone();
    assert_eq!(line["sourceId"], "src");
    assert_eq!(line["workspaceId"], "ws");
    assert_eq!(line["chargedAmount"], 0.0);
    for key in ["sourceId", "workspaceId", "chargedAmount"] {
        line.as_object_mut().unwrap().remove(key);
    }
    assert_eq!(line, shown);
    let text = lr(&f.server, "transaction export --format csv --source src").ok();
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), 1);
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(&records[0][column("transactionId")], t1.as_str());
    assert_eq!(&records[0][column("buyerPrice")], "30.0");
    assert_eq!(&records[0][column("status")], "acknowledged");
    assert_eq!(
        lr(&f.server, "transaction export --source plain --format csv")
            .ok()
            .lines()
            .count(),
        1,
        "the header only"
    );
}

#[test]
fn lists_narrow_and_page_with_after() {
    let f = Fixture::new();
    f.buyer("a", &[]);
    f.buyer("b", &[]);
    let mut sold_to_a = Vec::new();
    for n in 0..5 {
        let (lead, requests) = f.lead_on("src", &["solar"]);
        if n % 2 == 0 {
            f.deliver(&requests[0], "a");
            sold_to_a.push(lead);
        } else {
            f.deliver(&requests[0], "b");
        }
    }
    f.lead_on("plain", &["solar"]);

    // Pages of two, newest first, until an empty page: every lead of src once.
    let all = ids(&lr(&f.server, "lead list --source src").json(), "id");
    assert_eq!(all.len(), 5);
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut line = "lead list --source src --limit 2".to_string();
        if let Some(id) = &after {
            line.push_str(&format!(" --after {id}"));
        }
        let page = ids(&lr(&f.server, line).json(), "id");
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        after = page.last().cloned();
        paged.extend(page);
        assert!(paged.len() <= 100, "paging ends: {paged:?}");
    }
    assert_eq!(paged, all);
    let mut to_a = ids(&lr(&f.server, "lead list --buyer a").json(), "id");
    to_a.reverse();
    assert_eq!(to_a, sold_to_a);
    assert_eq!(
        lr(&f.server, "lead list").json().as_array().unwrap().len(),
        6
    );
    lr(&f.server, format!("lead cancel {} --reason fake", all[0])).json();
    assert_eq!(
        ids(
            &lr(&f.server, "lead list --status cancellation_pending").json(),
            "id"
        ),
        [all[0].clone()]
    );
    let (today, tomorrow) = today_and_tomorrow();
    assert_eq!(
        lr(&f.server, format!("lead list --from {tomorrow}")).json(),
        json!([])
    );
    assert_eq!(
        lr(&f.server, format!("lead list --to {today} --source plain"))
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    lr(&f.server, "lead list --status sold").fails(2);
    lr(&f.server, "lead list --after lead_nope")
        .fails(1)
        .stderr_contains("unknown lead 'lead_nope'");

    // Transactions: the same paging, and by source and dates.
    let all = ids(
        &lr(&f.server, "transaction list --source src").json(),
        "transactionId",
    );
    assert_eq!(all.len(), 5);
    let first = ids(
        &lr(&f.server, "transaction list --limit 3").json(),
        "transactionId",
    );
    let rest = ids(
        &lr(
            &f.server,
            format!("transaction list --limit 3 --after {}", first[2]),
        )
        .json(),
        "transactionId",
    );
    assert_eq!([first, rest].concat(), all);
    assert_eq!(
        lr(&f.server, "transaction list --source plain").json(),
        json!([])
    );
    assert_eq!(
        lr(&f.server, format!("transaction list --from {tomorrow}")).json(),
        json!([])
    );
    assert_eq!(
        ids(
            &lr(
                &f.server,
                format!("transaction list --buyer a --to {today}")
            )
            .json(),
            "transactionId"
        )
        .len(),
        3
    );
    lr(&f.server, "transaction list --source nope")
        .fails(1)
        .stderr_contains("unknown source 'nope'");

    // The ledger by date: the supplier's costs are today's.
    let db = f.server.db.path.clone();
    assert_eq!(
        lr(&db, format!("ledger list --supplier sup --from {today}"))
            .json()
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        lr(&db, format!("ledger list --supplier sup --from {tomorrow}")).json(),
        json!([])
    );
    lr(&db, "ledger list --from 2026-02-30").fails(2);
}

/// Pages of `limit` of `line` (a list command printing `key`), newest first, until an
/// empty page.
fn paged(f: &Fixture, line: &str, key: &str, limit: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut command = format!("{line} --limit {limit}");
        if let Some(id) = &after {
            command.push_str(&format!(" --after {id}"));
        }
        let page = ids(&lr(&f.server, command).json(), key);
        if page.is_empty() {
            return all;
        }
        assert!(page.len() <= limit, "{page:?}");
        after = page.last().cloned();
        all.extend(page);
        assert!(all.len() <= 100, "paging ends: {all:?}");
    }
}

#[test]
fn filters_refuse_what_users_get_wrong_and_exports_hold_no_erased_data() {
    let f = Fixture::new();
    f.buyer("a", &[]);
    // A batch is stored in one writer job: its leads can share their millisecond, and
    // paging must still hand out each of them once (the rowid breaks the tie).
    let batch: Vec<Value> = (0..4)
        .map(|n| {
            json!({"firstName": "Bo", "lastName": format!("Batch{n}"),
                        "email": format!("bo{n}@example.com"),
                        "requests": [{"productSlug": "solar"}]})
        })
        .collect();
    let reply = f.server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &json!({ "leads": batch }),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let first = reply.json["items"][0]["leadId"]
        .as_str()
        .unwrap()
        .to_string();
    let (sold, requests) = f.lead_on("src", &["solar"]);
    let txn = f.deliver(&requests[0], "a");
    f.lead_on("plain", &["solar"]);

    for line in ["lead list --source src", "lead list"] {
        let all = ids(&lr(&f.server, line).json(), "id");
        assert_eq!(all.len(), if line.contains("src") { 5 } else { 6 });
        assert_eq!(paged(&f, line, "id", 1), all, "{line}");
        assert_eq!(paged(&f, line, "id", 4), all, "{line}");
    }
    assert_eq!(
        paged(&f, "transaction list", "transactionId", 1),
        std::slice::from_ref(&txn)
    );
    lr(&f.server, "transaction list --after txn_nope")
        .fails(1)
        .stderr_contains("unknown transaction 'txn_nope'");

    // Narrowing by two things at once: each must hold.
    assert_eq!(
        ids(
            &lr(&f.server, "lead list --buyer a --source src").json(),
            "id"
        ),
        std::slice::from_ref(&sold)
    );
    assert_eq!(
        lr(&f.server, "lead list --buyer a --source plain").json(),
        json!([])
    );
    lr(&f.server, format!("lead cancel {first} --reason fake")).json();
    assert_eq!(
        ids(
            &lr(
                &f.server,
                "lead list --status cancellation_pending --source src"
            )
            .json(),
            "id"
        ),
        std::slice::from_ref(&first)
    );
    assert_eq!(
        lr(
            &f.server,
            "lead list --status cancellation_pending --source plain"
        )
        .json(),
        json!([])
    );
    assert_eq!(
        lr(&f.server, "lead list --status cancelled").json(),
        json!([])
    );
    let active = ids(&lr(&f.server, "lead list --status active").json(), "id");
    assert_eq!(active.len(), 5);
    assert!(!active.contains(&first));

    // Unknown states name the ones there are (bad usage: exit 2).
    lr(&f.server, "lead list --status sold")
        .fails(2)
        .stderr_contains("unknown lead status 'sold': use active, cancellation_pending, cancelled");
    lr(&f.server, "transaction list --status sold")
        .fails(2)
        .stderr_contains("payout_pending");

    // A period that ends before it starts is refused, not answered with nothing.
    let (today, tomorrow) = today_and_tomorrow();
    let swapped = format!("--from {tomorrow} --to {today}");
    let db = f.server.db.path.clone();
    for line in [
        "lead list",
        "transaction list",
        "lead export",
        "transaction export",
        "ledger list",
    ] {
        lr(&db, format!("{line} {swapped}"))
            .fails(1)
            .stderr_contains(&format!(
                "--from must be before --to: the period from {tomorrow} to {today} is empty"
            ));
    }
    lr(&db, format!("lead list --from {today} --to {today}")).json();

    // An empty result in CSV is the header alone.
    let text = lr(
        &f.server,
        format!("lead export --format csv --from {tomorrow}"),
    )
    .ok();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("id,"), "{text}");

    // An erased lead is exported as the tombstone it is: erased, without the person.
    let before = lr(&f.server, format!("lead show {sold}")).json();
    let (name, email) = (
        before["person"]["lastName"].as_str().unwrap().to_string(),
        before["person"]["email"].as_str().unwrap().to_string(),
    );
    lr(&db, format!("lead erase --lead {sold} --yes")).json();
    let ndjson = lr(&f.server, "lead export --source src").ok();
    let erased: Vec<Value> = lines(&ndjson)
        .into_iter()
        .filter(|lead| lead["id"] == sold.as_str())
        .collect();
    assert_eq!(erased.len(), 1);
    assert_eq!(erased[0]["erased"], true, "{}", erased[0]);
    assert_eq!(erased[0], lr(&f.server, format!("lead show {sold}")).json());
    let csv = lr(&f.server, "lead export --source src --format csv").ok();
    for text in [&ndjson, &csv] {
        assert!(!text.contains(&name), "the erased name is gone: {text}");
        assert!(!text.contains(&email), "the erased email is gone: {text}");
        assert!(text.contains("Batch3"), "the others stay");
    }
}

/// A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (and one after a tab or
/// a carriage return) as a formula: what a partner sent is made inert with a leading `'`
/// in every CSV; numbers leadrelay writes stay numbers.
#[test]
fn csv_cells_a_spreadsheet_would_run_are_inert() {
    let f = Fixture::new();
    let reply = f.server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &json!({"firstName": "=HYPERLINK(\"http://evil.example\",\"x\")",
                "lastName": "+49 30 1234", "city": "-1", "street": "@SUM(A1)",
                "postalCode": "\t10115", "country": "\rDE", "email": "ok=fine@example.org"}),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let text = lr(&f.server, "lead export --format csv").ok();
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let record = &records[0];
    for (name, written) in [
        (
            "person.firstName",
            "'=HYPERLINK(\"http://evil.example\",\"x\")",
        ),
        ("person.lastName", "'+49 30 1234"),
        ("person.city", "'-1"),
        ("person.street", "'@SUM(A1)"),
        ("person.postalCode", "'\t10115"),
        ("person.country", "'\rDE"),
        ("person.email", "ok=fine@example.org"),
    ] {
        assert_eq!(&record[column(name)], written, "{name}");
    }

    // A negative amount leadrelay computed stays a number (a report's margin).
    let a = f.buyer("a", &[]);
    let t = f.delivered("a");
    let reply = f.call(
        crate::lifecycle::CANCELLATION,
        &a,
        &json!({"transactionId": t, "reason": "no answer"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let report = lr(&f.server, "report --csv --by source").ok();
    assert!(!report.contains('\''), "{report}");
}
