//! The setup most tests start from, made through the real interfaces: configuration with
//! the CLI, leads over HTTP, deliveries with `leadrelay deliver`.
//!
//! The fixed ids: workspace `ws`, channel `web`, lead table `list`, product `solar`; with
//! [`setup`] also a channel source `src` without a secret and with supplier cost 4. Buyers
//! made by [`buyer`] sign with [`SIGNING_SECRET`].

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{TestServer, lr};

/// The signing secret of the Standard Webhooks test vector, used for the test buyers so
/// that a signature can be checked against a value computed by hand.
pub const SIGNING_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// How long a test waits for something the server does in the background.
pub const WAIT: Duration = Duration::from_secs(15);

/// Options for a server whose retries come quickly.
pub fn fast_options() -> leadrelay::service::ServiceOptions {
    leadrelay::service::ServiceOptions {
        delivery: leadrelay::outbox::WorkerConfig {
            retry_schedule: leadrelay::outbox::RetrySchedule::parse("200ms,200ms,200ms")
                .expect("a valid schedule"),
            request_timeout: Duration::from_secs(2),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Extra words for a fixture's command: a line split as a shell splits it (`"--plan
/// prepaid"`) or words taken as given (`&["--schedule", &window]`).
pub trait Words {
    fn words(&self) -> Vec<String>;
}

impl Words for str {
    fn words(&self) -> Vec<String> {
        shlex::split(self).unwrap_or_else(|| panic!("unbalanced quotes in {self:?}"))
    }
}

impl Words for String {
    fn words(&self) -> Vec<String> {
        self.as_str().words()
    }
}

impl Words for [&str] {
    fn words(&self) -> Vec<String> {
        self.iter().map(|w| w.to_string()).collect()
    }
}

impl<const N: usize> Words for [&str; N] {
    fn words(&self) -> Vec<String> {
        self.iter().map(|w| w.to_string()).collect()
    }
}

impl<T: Words + ?Sized> Words for &T {
    fn words(&self) -> Vec<String> {
        (**self).words()
    }
}

/// Workspace `ws`, channel `web`, lead table `list` and product `solar` (in a new database
/// when there is none yet).
pub fn basic_setup(db: impl AsRef<Path>) {
    let db = db.as_ref();
    if !db.exists() {
        lr(db, "init").json();
    }
    lr(db, "workspace create --name Acme --id ws").json();
    lr(db, "channel create --workspace ws --name Web --id web").json();
    lr(db, "table create --workspace ws --name List --id list").json();
    lr(
        db,
        "product create --workspace ws --slug solar --name Solar --id solar",
    )
    .json();
}

/// [`basic_setup`] plus a source `src` in channel `web`, without a secret, with supplier
/// cost 4.
pub fn setup(db: impl AsRef<Path>) {
    basic_setup(&db);
    source(db, "web", "src", "--no-secret --supplier-cost 4");
}

/// Channel `id` (named `id`) in workspace `ws`; `extra` adds flags to `channel create`.
pub fn channel(db: impl AsRef<Path>, id: &str, extra: impl Words) -> Value {
    lr(
        db,
        format!("channel create --workspace ws --name {id} --id {id}"),
    )
    .args(extra.words())
    .json()
}

/// Product `slug` (its id and name too) in workspace `ws`; `extra` adds flags.
pub fn product(db: impl AsRef<Path>, slug: &str, extra: impl Words) -> Value {
    lr(
        db,
        format!("product create --workspace ws --slug {slug} --name {slug} --id {slug}"),
    )
    .args(extra.words())
    .json()
}

/// Source `id` (named `id`) in channel `channel`; `extra` adds flags to `source create`
/// (`--no-secret`, `--secret S`, `--supplier …`). Returns what it printed (with the secret).
pub fn source(db: impl AsRef<Path>, channel: &str, id: &str, extra: impl Words) -> Value {
    lr(
        db,
        format!("source create --channel {channel} --name {id} --id {id}"),
    )
    .args(extra.words())
    .json()
}

/// [`source`] in lead table `table`.
pub fn table_source(db: impl AsRef<Path>, table: &str, id: &str, extra: impl Words) -> Value {
    lr(
        db,
        format!("source create --table {table} --name {id} --id {id}"),
    )
    .args(extra.words())
    .json()
}

/// Supplier `id` (named `id`) in workspace `ws` with the API key `key`.
pub fn supplier(db: impl AsRef<Path>, id: &str, key: &str) -> Value {
    lr(
        db,
        format!("supplier create --workspace ws --name {id} --id {id}"),
    )
    .arg("--key")
    .arg(key)
    .json()
}

/// A buyer in workspace `ws` posting to `url`, subscribed to `solar` at `price` (when
/// given), with the test vector's signing secret. `extra` adds flags to `buyer create`.
pub fn buyer(
    db: impl AsRef<Path>,
    id: &str,
    url: &str,
    price: Option<&str>,
    extra: impl Words,
) -> Value {
    let db = db.as_ref();
    let created = lr(
        db,
        format!("buyer create --workspace ws --name {id} --id {id} --webhook-url {url}"),
    )
    .args(["--signing-secret", SIGNING_SECRET])
    .args(extra.words())
    .json();
    if let Some(price) = price {
        lr(
            db,
            format!("buyer subscribe {id} --product solar --price {price}"),
        )
        .json();
    }
    created
}

/// A bid-priced buyer `id` of `solar` (its webhook `/{id}`, its bid URL `/bid/{id}` on
/// `receiver`), subscribed with `terms`.
pub fn bidder(db: impl AsRef<Path>, receiver: &super::receiver::Receiver, id: &str, terms: &str) {
    let db = db.as_ref();
    buyer(db, id, &receiver.url(&format!("/{id}")), None, "");
    lr(
        db,
        format!(
            "buyer subscribe {id} --product solar --pricing bid --bid-url {} {terms}",
            receiver.url(&format!("/bid/{id}"))
        ),
    )
    .json();
}

/// Posts `lead` (a native Lead with one interest) to source `src` of channel `web` through
/// the real ingest endpoint; returns (lead id, lead request id).
pub fn lead_request(server: &TestServer, lead: &Value) -> (String, String) {
    lead_request_in(server, "web", "src", lead)
}

/// [`lead_request`] on source `source` of channel `channel`.
pub fn lead_request_in(
    server: &TestServer,
    channel: &str,
    source: &str,
    lead: &Value,
) -> (String, String) {
    let reply = server.post_json(
        &format!("/api/webhooks/channels/{channel}/sources/{source}/leads"),
        lead,
    );
    assert_eq!(reply.status, 201, "ingest: {}", reply.text);
    let item = &reply.json["item"];
    (
        item["leadId"].as_str().unwrap().to_string(),
        item["requestIds"][0].as_str().unwrap().to_string(),
    )
}

/// A complete lead (score 99 with the default weights: valid email and phone, names, full
/// address, consent with its time) interested in `solar` with automated delivery.
pub fn complete_lead(external_id: &str, email: &str, phone: &str) -> Value {
    json!({
        "externalId": external_id,
        "firstName": "Ann",
        "lastName": "Lee",
        "email": email,
        "phone": phone,
        "street": "Hauptstr.",
        "houseNumber": "1",
        "postalCode": "10115",
        "city": "Berlin",
        "country": "DE",
        "consentStatus": "granted",
        "consentCapturedAt": "2026-01-06T10:00:00Z",
        "productSlug": "solar",
        "triggerAutoDelivery": true,
    })
}

/// A minimal lead.
pub fn simple_lead(n: usize) -> Value {
    json!({"firstName": "Ada", "lastName": format!("Lovelace {n}"), "email": format!("ada{n}@example.org"), "productSlug": "solar"})
}

/// `leadrelay deliver` of `request` to `buyer` (at `price`, when given), not yet run.
pub fn deliver_command(
    db: impl AsRef<Path>,
    request: &str,
    buyer: &str,
    price: Option<&str>,
) -> super::TestCommand {
    let command = lr(db, format!("deliver --request {request} --buyer {buyer}"));
    match price {
        Some(price) => command.args(["--price", price]),
        None => command,
    }
}

/// Runs `leadrelay deliver`; returns its JSON.
pub fn deliver(db: impl AsRef<Path>, request: &str, buyer: &str, price: Option<&str>) -> Value {
    deliver_command(db, request, buyer, price).json()
}
