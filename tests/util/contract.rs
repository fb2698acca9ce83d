//! openapi.json as a contract: real answers (and request bodies) checked against the
//! document's JSON Schemas with the `jsonschema` crate.
//!
//! A schema is checked in the context of the whole document, so its `$ref`s into
//! `#/components/...` resolve: the validator's root is the document with a `$ref` to the
//! schema's location added (OpenAPI 3.1 schemas are JSON Schema 2020-12, where `$ref` may
//! stand beside other keywords; the document's own keys are unknown keywords and ignored).

use serde_json::Value;

use super::Reply;

pub struct Contract {
    doc: Value,
}

/// A JSON pointer's escaping of one path segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

impl Contract {
    pub fn new() -> Contract {
        Contract {
            doc: serde_json::from_str(leadrelay::openapi::DOCUMENT)
                .expect("openapi.json is valid JSON"),
        }
    }

    pub fn doc(&self) -> &Value {
        &self.doc
    }

    /// The problems of `instance` against the schema at `pointer` (`#/components/...`).
    fn problems(&self, pointer: &str, instance: &Value) -> Vec<String> {
        assert!(
            self.doc.pointer(&pointer[1..]).is_some(),
            "no schema at {pointer}"
        );
        let mut root = self.doc.clone();
        root["$schema"] = "https://json-schema.org/draft/2020-12/schema".into();
        // As a URI fragment, the pointer's braces (path templates) are percent-encoded.
        root["$ref"] = pointer.replace('{', "%7B").replace('}', "%7D").into();
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&root)
            .unwrap_or_else(|e| panic!("the schema at {pointer} compiles: {e}"));
        validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// The pointer of the response object documented for `status` of `method` `path`,
    /// following a `$ref` to `#/components/responses/…`.
    fn response(&self, method: &str, path: &str, status: u16) -> String {
        let operation = format!("#/paths/{}/{method}", escape(path));
        let responses = &self.doc["paths"][path][method]["responses"];
        assert!(
            responses.is_object(),
            "{} {path} is not documented",
            method.to_uppercase()
        );
        let response = responses.get(status.to_string()).unwrap_or_else(|| {
            panic!(
                "{} {path} does not document status {status}",
                method.to_uppercase()
            )
        });
        match response.get("$ref").and_then(Value::as_str) {
            Some(reference) => reference.to_string(),
            None => format!("{operation}/responses/{status}"),
        }
    }

    /// Checks a real answer of `method` `path` (the path as the document writes it): its
    /// status is documented, its body matches the documented schema, and the headers the
    /// document promises for it are there.
    pub fn check(&self, method: &str, path: &str, reply: &Reply) {
        let method = method.to_lowercase();
        let response = self.response(&method, path, reply.status);
        let object = self
            .doc
            .pointer(&response[1..])
            .unwrap_or_else(|| panic!("{response} resolves"));
        for header in object["headers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(n, _)| n)
        {
            assert!(
                reply.header(header).is_some(),
                "{method} {path} {}: documented header {header} missing",
                reply.status
            );
        }
        let content = object["content"]
            .as_object()
            .unwrap_or_else(|| panic!("{response} documents no content"));
        let (media_type, body) = match (content.get("application/json"), content.get("text/plain"))
        {
            (Some(_), _) => ("application~1json", reply.json.clone()),
            (None, Some(_)) => ("text~1plain", Value::String(reply.text.clone())),
            _ => panic!("{response}: unexpected media types"),
        };
        let problems = self.problems(&format!("{response}/content/{media_type}/schema"), &body);
        assert!(
            problems.is_empty(),
            "{} {path} {}: the answer does not match openapi.json:\n{}\n{}",
            method.to_uppercase(),
            reply.status,
            problems.join("\n"),
            reply.text
        );
    }

    /// Whether `body` is valid for the request body of `method` `path` per the document.
    pub fn request_valid(&self, method: &str, path: &str, body: &Value) -> bool {
        let pointer = format!(
            "#/paths/{}/{}/requestBody/content/application~1json/schema",
            escape(path),
            method.to_lowercase()
        );
        self.problems(&pointer, body).is_empty()
    }

    /// Whether `value` is valid for the component schema `name`.
    pub fn schema_valid(&self, name: &str, value: &Value) -> bool {
        self.problems(&format!("#/components/schemas/{name}"), value)
            .is_empty()
    }
}
