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

use leadrelay_core::to_value;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::container::{self, ContainerKind};
use crate::config::product::Product;
use crate::config::source::Source;
use crate::config::{ConfigError, product, source};
use crate::ids::SourceId;
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
    source_id: &SourceId,
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
    source_id: &SourceId,
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
    source_id: &SourceId,
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
    let batch_example = to_value(BatchExample {
        leads: [
            lead.clone(),
            example_lead(
                &products,
                ("example-1002", "John", "Roe", "+49 170 5550102"),
            ),
        ],
    });
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

/// A batch body: `{"leads": [...]}`.
#[derive(Serialize)]
struct BatchExample {
    leads: [Map<String, Value>; 2],
}

/// A native Lead that validates against the products: the first product's interest with a
/// value for each field (its first allowed value, or `example`).
fn example_lead(
    products: &[Product],
    (external_id, first, last, phone): (&str, &str, &str, &str),
) -> Map<String, Value> {
    let product = products.first();
    let field_values = product
        .map(|product| {
            product
                .fields
                .iter()
                .map(|field| {
                    let value = field
                        .allowed_values
                        .as_ref()
                        .and_then(|allowed| allowed.first().cloned())
                        .unwrap_or_else(|| "example".into());
                    (field.name.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default();
    let lead = ExampleLead {
        external_id,
        first_name: first,
        last_name: last,
        email: format!(
            "{}.{}@example.com",
            first.to_lowercase(),
            last.to_lowercase()
        ),
        phone,
        postal_code: "10115",
        city: "Berlin",
        country: "DE",
        consent_status: "granted",
        product_slug: product.map(|product| product.slug.as_str()),
        field_values,
    };
    match to_value(lead) {
        Value::Object(lead) => lead,
        _ => unreachable!("a struct serialises as an object"),
    }
}

/// The example Lead's keys, in the order the interface lists them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExampleLead<'a> {
    external_id: &'a str,
    first_name: &'a str,
    last_name: &'a str,
    email: String,
    phone: &'a str,
    postal_code: &'static str,
    city: &'static str,
    country: &'static str,
    consent_status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    product_slug: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "as_object")]
    field_values: Vec<(String, String)>,
}

/// Pairs as a JSON object, in their order.
fn as_object<S: serde::Serializer>(pairs: &[(String, String)], to: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = to.serialize_map(Some(pairs.len()))?;
    for (key, value) in pairs {
        map.serialize_entry(key, value)?;
    }
    map.end()
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
        Value::String(leadrelay_rules::secrets::hash(email)),
    );
    Value::Object(ping)
}

/// The answer item of an accepted lead, as the source's default disclosure shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AnswerItem<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<usize>,
    status: &'static str,
    lead_id: &'static str,
    /// `channelId` or `tableId`, as the container is.
    #[serde(flatten)]
    container: Map<String, Value>,
    source_id: &'a SourceId,
    external_id: &'a Value,
    idempotent_replay: bool,
    request_ids: Vec<&'static str>,
    ingest: ExampleIngest,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExampleIngest {
    quality_status: &'static str,
    quality_reasons: [&'static str; 0],
    duplicate_status: &'static str,
}

fn answer_item<'a>(
    source: &'a Source,
    lead: &'a Map<String, Value>,
    index: Option<usize>,
) -> AnswerItem<'a> {
    let mut container = Map::new();
    container.insert(
        source.container_kind.id_key().into(),
        Value::String(source.container_id.clone()),
    );
    AnswerItem {
        index,
        status: "accepted",
        lead_id: "lead_01JD7Q4N9V3X8K2M5P6R7S8T9W",
        container,
        source_id: &source.id,
        external_id: &lead["externalId"],
        idempotent_replay: false,
        request_ids: if lead.contains_key("productSlug") {
            vec!["lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9"]
        } else {
            Vec::new()
        },
        ingest: ExampleIngest {
            quality_status: "ok",
            quality_reasons: [],
            duplicate_status: "unique",
        },
    }
}

#[derive(Serialize)]
struct SingleAnswer<'a> {
    item: AnswerItem<'a>,
}

fn single_answer(source: &Source, lead: &Map<String, Value>) -> Value {
    to_value(SingleAnswer {
        item: answer_item(source, lead, None),
    })
}

#[derive(Serialize)]
struct BatchAnswer<'a> {
    summary: ExampleSummary,
    items: [AnswerItem<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExampleSummary {
    received: u32,
    accepted: u32,
    duplicate: u32,
    idempotent_replay: u32,
    rejected: u32,
}

fn batch_answer(source: &Source, lead: &Map<String, Value>) -> Value {
    to_value(BatchAnswer {
        summary: ExampleSummary {
            received: 1,
            accepted: 1,
            duplicate: 0,
            idempotent_replay: 0,
            rejected: 0,
        },
        items: [answer_item(source, lead, Some(0))],
    })
}
