//! A source's posting instructions (DESIGN.md section 21): the document an operator sends a
//! supplier, generated from the source's configuration each time it is asked for, so it is
//! never out of date. [`render`] is the one entry point (`source docs`, the portal's docs
//! page and its shared link); [`gather`] reads the configuration into [`Instructions`],
//! which `content` turns into blocks that `markdown` and `html` write out.
//!
//! The error answers it shows are the real ones (`http::examples`: each made by the one
//! mapping of errors to answers). The document never holds the source's secret, only a
//! placeholder where it goes.

mod content;
mod html;
mod markdown;

use rusqlite::Connection;
use serde_json::{Map, Value, json};

use crate::config::container::{self, ContainerKind};
use crate::config::product::Product;
use crate::config::source::Source;
use crate::config::{ConfigError, product, source};
use crate::mapping::MappingDocument;

/// The base URL the document names when none is given: `serve`'s default listener.
pub(crate) const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080";

/// What stands for the source's secret in the document; the partner puts its secret there.
pub(crate) const SECRET_PLACEHOLDER: &str = "YOUR_SOURCE_SECRET";

/// The document's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Plain text with Markdown headings, tables and code blocks.
    Markdown,
    /// A whole HTML page; every configured string escaped.
    Html,
}

/// Source `source_id`'s posting instructions in `format`, naming `base_url` (no trailing
/// `/`) as the service's address.
pub(crate) fn render(
    conn: &Connection,
    source_id: &str,
    format: Format,
    base_url: &str,
) -> Result<String, ConfigError> {
    let instructions = gather(conn, source_id, base_url)?;
    Ok(match format {
        Format::Markdown => markdown::write(&instructions),
        Format::Html => html::page(&instructions).into_string(),
    })
}

/// The instructions as HTML without the page around them, for a page with its own head
/// and layout (the partner portal's `/sources/{sourceId}/docs`).
pub(crate) fn markup(
    conn: &Connection,
    source_id: &str,
    base_url: &str,
) -> Result<maud::Markup, ConfigError> {
    Ok(html::body(&gather(conn, source_id, base_url)?))
}

/// Everything the document says, read from the configuration.
pub(crate) struct Instructions {
    pub(crate) source: Source,
    /// The full ingest URL.
    pub(crate) endpoint: String,
    /// The ping URL: channel sources only.
    pub(crate) ping: Option<Ping>,
    /// The workspace's live products.
    pub(crate) products: Vec<Product>,
    /// The published mapping's version and an example of the partner's own body.
    pub(crate) mapping: Option<(i64, Value)>,
    /// The body of the example request, and its answer.
    pub(crate) example: Value,
    pub(crate) example_answer: Value,
    /// A native batch of two leads (without a mapping).
    pub(crate) batch_example: Value,
    pub(crate) limits: Limits,
    pub(crate) errors: Vec<crate::http::examples::ErrorExample>,
}

pub(crate) struct Ping {
    pub(crate) url: String,
    pub(crate) ttl_secs: i64,
    pub(crate) example: Value,
}

pub(crate) struct Limits {
    pub(crate) max_batch: usize,
    pub(crate) body_bytes: usize,
    pub(crate) external_id_chars: usize,
}

impl Instructions {
    /// The example request as one `curl` command with its body inline.
    pub(crate) fn curl(&self) -> String {
        let mut command = format!(
            "curl -s -X POST {} \\\n  -H 'Content-Type: application/json' \\\n",
            shell_quote(&self.endpoint)
        );
        if self.source.secret.is_set() {
            command.push_str(&format!(
                "  -H 'X-Service-Webhook-Secret: {SECRET_PLACEHOLDER}' \\\n"
            ));
        }
        let body = serde_json::to_string_pretty(&self.example).expect("a Value serialises");
        command.push_str(&format!("  -d {}", shell_quote(&body)));
        command
    }
}

/// `text` in single quotes for `sh`, a `'` in it closed, escaped and reopened.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Reads source `source_id`'s configuration into the document's parts.
pub(crate) fn gather(
    conn: &Connection,
    source_id: &str,
    base_url: &str,
) -> Result<Instructions, ConfigError> {
    let source = source::get(conn, source_id)?;
    let base_url = base_url.trim_end_matches('/');
    let products = product::list(conn, Some(&source.workspace_id), false)?;
    let lead = example_lead(
        &products,
        ("example-1001", "Jane", "Doe", "+49 170 5550101"),
    );
    let document = match &source.mapping_published {
        Some(text) => Some(MappingDocument::from_stored(text).map_err(|why| {
            ConfigError::Invalid(format!(
                "the published mapping of source '{source_id}' cannot be read: {why}"
            ))
        })?),
        None => None,
    };
    let mapping = document.as_ref().map(|document| {
        (
            source.mapping_version,
            crate::mapping::sample::example_body(document, &lead),
        )
    });
    let (example, example_answer) = match (&mapping, &document) {
        // A mapping with `items` makes every body a batch.
        (Some((_, sample)), Some(document)) if document.items.is_some() => {
            (sample.clone(), batch_answer(&source, &lead))
        }
        (Some((_, sample)), _) => (sample.clone(), single_answer(&source, &lead)),
        (None, _) => (Value::Object(lead.clone()), single_answer(&source, &lead)),
    };
    let batch_example = json!({"leads": [
        Value::Object(lead.clone()),
        Value::Object(example_lead(
            &products,
            ("example-1002", "John", "Roe", "+49 170 5550102"),
        )),
    ]});
    let ping = match source.container_kind {
        ContainerKind::Channel => {
            let channel = container::get(conn, &source.container_id, ContainerKind::Channel)?;
            Some(Ping {
                url: format!(
                    "{base_url}/api/ping/channels/{}/sources/{}",
                    source.container_id, source.id
                ),
                ttl_secs: channel.ping_ttl_ms / 1000,
                example: ping_example(&lead),
            })
        }
        ContainerKind::Table => None,
    };
    Ok(Instructions {
        endpoint: format!("{base_url}{}", source.webhook_path()),
        ping,
        products,
        mapping,
        example,
        example_answer,
        batch_example,
        limits: Limits {
            max_batch: crate::ingest::shape::MAX_BATCH,
            body_bytes: crate::http::ServerConfig::default().body_limit,
            external_id_chars: crate::ingest::validate::EXTERNAL_ID_MAX_CHARS,
        },
        errors: crate::http::examples::ingest_errors(),
        source,
    })
}

/// A native Lead that validates against the products: the first product's interest with a
/// value for each field (its first allowed value, or `example`).
fn example_lead(
    products: &[Product],
    (external_id, first, last, phone): (&str, &str, &str, &str),
) -> Map<String, Value> {
    let mut lead = Map::new();
    lead.insert("externalId".into(), json!(external_id));
    lead.insert("firstName".into(), json!(first));
    lead.insert("lastName".into(), json!(last));
    lead.insert(
        "email".into(),
        json!(format!(
            "{}.{}@example.com",
            first.to_lowercase(),
            last.to_lowercase()
        )),
    );
    lead.insert("phone".into(), json!(phone));
    lead.insert("postalCode".into(), json!("10115"));
    lead.insert("city".into(), json!("Berlin"));
    lead.insert("country".into(), json!("DE"));
    lead.insert("consentStatus".into(), json!("granted"));
    if let Some(product) = products.first() {
        lead.insert("productSlug".into(), json!(product.slug));
        let values: Map<String, Value> = product
            .fields
            .iter()
            .map(|field| {
                let value = field
                    .allowed_values
                    .as_ref()
                    .and_then(|allowed| allowed.first().cloned())
                    .unwrap_or_else(|| "example".into());
                (field.name.clone(), Value::String(value))
            })
            .collect();
        if !values.is_empty() {
            lead.insert("fieldValues".into(), Value::Object(values));
        }
    }
    lead
}

/// A ping for `lead`: its product and address, the email as a hash, no personal data.
fn ping_example(lead: &Map<String, Value>) -> Value {
    let mut ping = Map::new();
    for key in ["productSlug", "fieldValues", "postalCode", "country"] {
        if let Some(value) = lead.get(key) {
            ping.insert(key.into(), value.clone());
        }
    }
    let email = lead
        .get("email")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ping.insert(
        "emailSha256".into(),
        json!(leadrelay_rules::secrets::hash(email)),
    );
    Value::Object(ping)
}

/// The answer item of an accepted lead, as the source's default disclosure shows it.
fn answer_item(source: &Source, lead: &Map<String, Value>) -> Map<String, Value> {
    let mut item = Map::new();
    item.insert("status".into(), json!("accepted"));
    item.insert("leadId".into(), json!("lead_01JD7Q4N9V3X8K2M5P6R7S8T9W"));
    item.insert(
        source.container_kind.id_key().into(),
        json!(source.container_id),
    );
    item.insert("sourceId".into(), json!(source.id));
    item.insert("externalId".into(), lead["externalId"].clone());
    item.insert("idempotentReplay".into(), json!(false));
    let requests = if lead.contains_key("productSlug") {
        json!(["lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9"])
    } else {
        json!([])
    };
    item.insert("requestIds".into(), requests);
    item.insert(
        "ingest".into(),
        json!({"qualityStatus": "ok", "qualityReasons": [], "duplicateStatus": "unique"}),
    );
    item
}

fn single_answer(source: &Source, lead: &Map<String, Value>) -> Value {
    json!({"item": answer_item(source, lead)})
}

fn batch_answer(source: &Source, lead: &Map<String, Value>) -> Value {
    let mut item = Map::new();
    item.insert("index".into(), json!(0));
    item.extend(answer_item(source, lead));
    json!({
        "summary": {"received": 1, "accepted": 1, "duplicate": 0, "idempotentReplay": 0,
                    "rejected": 0},
        "items": [item],
    })
}
