//! The HTTP client side the benchmark programs share (included with `#[path]`): an agent
//! that reports every status instead of failing on 4xx/5xx, and a JSON POST.

use std::time::Duration;

use serde_json::Value;

/// A client with a generous global timeout that hands back 4xx and 5xx answers.
pub fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build(),
    )
}

/// POSTs `body` as JSON (with `secret` in `X-Service-Webhook-Secret`, when given); the
/// status and the JSON answer (`null` when it is not JSON).
pub fn post(agent: &ureq::Agent, url: &str, secret: Option<&str>, body: &Value) -> (u16, Value) {
    let mut request = agent.post(url).header("Content-Type", "application/json");
    if let Some(secret) = secret {
        request = request.header("X-Service-Webhook-Secret", secret);
    }
    let mut response = request.send(body.to_string()).expect("the service answers");
    let status = response.status().as_u16();
    (status, read_json(&mut response))
}

/// The answer's body as JSON; `null` when it is not JSON.
pub fn read_json(response: &mut ureq::http::Response<ureq::Body>) -> Value {
    let text = response.body_mut().read_to_string().unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}
