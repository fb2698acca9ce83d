//! Building a mapped integration's request from the `lead.delivered` event object: method,
//! URL, headers (constants and the buyer's named secrets) and the body in the buyer's
//! format, and the same request with its secrets masked, as `preview` prints it and an
//! attempt record keeps it.
//!
//! Pure: no database, no network. The outbox's sender sends what [`build`] returns (and
//! adds the Standard Webhooks headers when the document says `sign`).

use serde::Serialize;
use serde_json::{Map, Value};

use super::document::{Format, HeaderSource, IntegrationDocument};
use crate::mapping::count_text;
use crate::mapping::engine::{map_object, scalar_text};

/// How a secret header is shown wherever a request is printed or recorded.
pub fn masked(name: &str) -> String {
    format!("[secret {name}]")
}

/// A request ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub method: &'static str,
    pub url: String,
    pub content_type: &'static str,
    /// The document's headers with their values; `secret` names the secret a value is.
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: String,
    pub secret: Option<String>,
}

/// Why a request cannot be built (the attempt fails; nothing is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error(
        "the integration sends secret '{0}', which is not set; store it with \
         `buyer integration secret BUYER {0} --value -`"
    )]
    MissingSecret(String),
    #[error("the event does not fit the integration's body: {summary}: {first}")]
    Body { summary: String, first: String },
}

/// The request of `document` for `event` (the `lead.delivered` object), to the document's
/// URL or else `webhook_url`, with `secret(name)` giving each named secret's value.
pub fn build(
    document: &IntegrationDocument,
    event: &Value,
    webhook_url: &str,
    secret: impl Fn(&str) -> Option<String>,
) -> Result<Built, BuildError> {
    let mut headers = Vec::with_capacity(document.headers.len());
    for (name, value) in &document.headers {
        headers.push(match value {
            HeaderSource::Constant(text) => Header {
                name: name.clone(),
                value: text.clone(),
                secret: None,
            },
            HeaderSource::Secret(secret_name) => Header {
                name: name.clone(),
                value: secret(secret_name)
                    .ok_or_else(|| BuildError::MissingSecret(secret_name.clone()))?,
                secret: Some(secret_name.clone()),
            },
        });
    }
    let fields = map_object(&document.body, event).map_err(|problems| {
        let first = problems
            .list
            .first()
            .map(|p| format!("{}: {}", p.path, p.message))
            .unwrap_or_default();
        BuildError::Body {
            summary: count_text(problems.list.len(), problems.total()),
            first,
        }
    })?;
    let body = match document.format {
        Format::Json => serde_json::to_vec(&Value::Object(fields))
            .expect("a JSON object of scalars always serialises"),
        Format::Form => form_body(&fields).into_bytes(),
    };
    Ok(Built {
        method: document.method,
        url: document
            .url
            .clone()
            .unwrap_or_else(|| webhook_url.to_string()),
        content_type: document.format.content_type(),
        headers,
        body,
    })
}

/// `application/x-www-form-urlencoded`: each field's text form, in document order.
fn form_body(fields: &Map<String, Value>) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        let text = scalar_text(value).unwrap_or_else(|| value.to_string());
        form.append_pair(name, &text);
    }
    form.finish()
}

impl Built {
    /// The request as printed and recorded: secrets masked, the body as text (JSON bodies
    /// as JSON).
    pub fn masked_json(&self) -> Value {
        let mut headers = Map::new();
        headers.insert("Content-Type".into(), self.content_type.into());
        for header in &self.headers {
            let shown = match &header.secret {
                Some(name) => masked(name),
                None => header.value.clone(),
            };
            headers.insert(header.name.clone(), shown.into());
        }
        let text = String::from_utf8_lossy(&self.body).into_owned();
        let body = if self.content_type == Format::Json.content_type() {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        } else {
            Value::String(text)
        };
        crate::to_value(MaskedRequest {
            method: self.method,
            url: &self.url,
            headers,
            body,
        })
    }
}

/// A request as printed and recorded (see [`Built::masked_json`]).
#[derive(Serialize)]
struct MaskedRequest<'a> {
    method: &'static str,
    url: &'a str,
    /// The header names are the buyer's document's, so a map in the order sent.
    headers: Map<String, Value>,
    /// The body as sent: the buyer's fields, whatever their document names them.
    body: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document(format: &str) -> IntegrationDocument {
        IntegrationDocument::parse(&json!({
            "format": format,
            "headers": {"X-Api-Key": {"secret": "crm-key"}, "X-Team": "north"},
            "body": {"first_name": {"from": "/lead/firstName"},
                     "phone": {"from": "/lead/phone", "transform": ["digits"]},
                     "price": {"from": "/pricing/buyerPrice"},
                     "missing": {"from": "/lead/street"},
                     "source": {"const": "leadrelay"}}}))
        .unwrap()
    }

    fn event() -> Value {
        json!({"transactionId": "txn_1",
               "lead": {"firstName": "Ada Lovelace", "phone": "+49 (30) 123"},
               "pricing": {"buyerPrice": 25.5}})
    }

    fn key(name: &str) -> Option<String> {
        (name == "crm-key").then(|| "s3cret".to_string())
    }

    #[test]
    fn a_json_body_keeps_numbers_and_leaves_out_what_is_missing() {
        let built = build(&document("json"), &event(), "http://buyer.example/in", key).unwrap();
        assert_eq!(built.method, "POST");
        assert_eq!(built.url, "http://buyer.example/in");
        assert_eq!(
            serde_json::from_slice::<Value>(&built.body).unwrap(),
            json!({"first_name": "Ada Lovelace", "phone": "4930123", "price": 25.5,
                   "source": "leadrelay"})
        );
        assert_eq!(built.headers[0].value, "s3cret");
        let shown = built.masked_json();
        assert_eq!(shown["headers"]["X-Api-Key"], "[secret crm-key]");
        assert_eq!(shown["headers"]["X-Team"], "north");
        assert!(!shown.to_string().contains("s3cret"));
    }

    #[test]
    fn a_form_body_is_url_encoded_in_document_order() {
        let built = build(&document("form"), &event(), "http://b/", key).unwrap();
        assert_eq!(
            String::from_utf8(built.body).unwrap(),
            "first_name=Ada+Lovelace&phone=4930123&price=25.5&source=leadrelay"
        );
        assert_eq!(built.content_type, "application/x-www-form-urlencoded");
    }

    #[test]
    fn a_missing_secret_stops_the_request() {
        assert_eq!(
            build(&document("json"), &event(), "http://b/", |_| None),
            Err(BuildError::MissingSecret("crm-key".into()))
        );
    }
}
