//! A small blocking HTTP client for tests, on ureq: statuses are answers, not errors.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_global(Some(Duration::from_secs(30)))
                .build(),
        )
    })
}

pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

/// A response: status, headers and body (parsed as JSON when it is JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
    pub json: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Request {
    pub fn new(method: &str, url: &str) -> Request {
        Request {
            method: method.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sends `X-Service-Webhook-Secret: secret`.
    pub fn secret(self, secret: &str) -> Request {
        self.header("X-Service-Webhook-Secret", secret)
    }

    /// Sends `Authorization: Bearer secret`.
    pub fn bearer(self, secret: &str) -> Request {
        self.header("Authorization", &format!("Bearer {secret}"))
    }

    pub fn json(mut self, body: &Value) -> Request {
        self.body = Some(serde_json::to_vec(body).expect("test JSON serialises"));
        self.header("Content-Type", "application/json")
    }

    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Request {
        self.body = Some(bytes.into());
        self
    }

    pub fn send(self) -> Reply {
        let mut builder = ureq::http::Request::builder()
            .method(self.method.as_str())
            .uri(&self.url);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let request = builder
            .body(self.body.unwrap_or_default())
            .expect("test request builds");
        let mut response = agent()
            .run(request)
            .unwrap_or_else(|e| panic!("{} {} failed: {e}", self.method, self.url));
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let text = response
            .body_mut()
            .read_to_string()
            .expect("response body reads");
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            text,
            json,
        }
    }
}

/// `bytes` gzip-compressed, for `Content-Encoding: gzip` request bodies.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder
        .write_all(bytes)
        .expect("writing to a Vec cannot fail");
    encoder.finish().expect("finishing into a Vec cannot fail")
}

/// A gzip body of a few kilobytes that decompresses to more than `size` bytes of JSON: the
/// server reads all of it before refusing it with 413, so the client is never cut off
/// mid-upload (a plain oversized body would race the early answer).
pub fn gzip_bomb(size: usize) -> Vec<u8> {
    let mut json = b"{\"firstName\": \"Ada\"".to_vec();
    json.extend(std::iter::repeat_n(b' ', size));
    json.push(b'}');
    gzip(&json)
}
