//! A real webhook receiver for tests: an HTTP server on 127.0.0.1:0 in the test process
//! that records every request (method, path, headers, body, arrival time) and answers as
//! the test says: per path, one answer for every call or a sequence (call 1, call 2, …, the
//! last one repeating), each with a status, headers, body and an optional delay.
//!
//! ```text
//! let receiver = Receiver::start();
//! receiver.answer_sequence("/flaky", vec![Answer::status(503).header("Retry-After", "1"), Answer::ok()]);
//! // … point a buyer at receiver.url("/flaky") …
//! let requests = receiver.wait_for_on("/flaky", 2, Duration::from_secs(10));
//! ```

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the request (head and body) had arrived.
    pub at: Instant,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name`.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Whether the Standard Webhooks signature verifies with `secret` (`whsec_…`), checked
    /// the way a buyer would, with nothing from leadrelay: HMAC-SHA256 keyed with the
    /// decoded secret over `webhook-id.webhook-timestamp.body`.
    pub fn is_signed_with(&self, secret: &str) -> bool {
        use base64::Engine;
        use hmac::Mac;
        let (Some(id), Some(timestamp), Some(header)) = (
            self.header("webhook-id"),
            self.header("webhook-timestamp"),
            self.header("webhook-signature"),
        ) else {
            return false;
        };
        let key = base64::engine::general_purpose::STANDARD
            .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
            .expect("the secret is base64");
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).expect("any key length");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(&self.body);
        let expected =
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        header
            .split(' ')
            .filter_map(|part| part.strip_prefix("v1,"))
            .any(|signature| signature == expected)
    }

    /// The body as JSON; panics when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("request body is not JSON ({e}): {}", self.text()))
    }
}

/// How the receiver answers one call.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait this long before answering (a slow buyer, or a timeout).
    pub delay: Duration,
}

impl Answer {
    /// 200 with an empty body.
    pub fn ok() -> Answer {
        Answer::status(200)
    }

    pub fn status(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Answer {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn body(mut self, body: &str) -> Answer {
        self.body = body.to_string();
        self
    }

    /// A JSON body with `Content-Type: application/json`.
    pub fn json(self, body: &Value) -> Answer {
        self.header("Content-Type", "application/json")
            .body(&body.to_string())
    }

    pub fn delay(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }
}

/// The answers of one path and how many calls it has had.
struct Rule {
    answers: Vec<Answer>,
    calls: usize,
}

#[derive(Default)]
struct State {
    requests: Vec<Recorded>,
    rules: HashMap<String, Rule>,
}

/// The receiver; stops when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Starts a receiver that answers 200 with an empty body on every path until told
    /// otherwise.
    pub fn start() -> Receiver {
        let state = Arc::new(Mutex::new(State::default()));
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel();
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name("test-receiver".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("receiver runtime starts");
                runtime.block_on(serve(served, ready, stop));
                // Dropping the runtime cancels connections still waiting out a delay.
            })
            .expect("receiver thread starts");
        let addr = bound.recv().expect("receiver reports its address");
        Receiver {
            addr,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The receiver's URL for `path` (`/hook` → `http://127.0.0.1:PORT/hook`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("no receiver thread panics holding the lock")
    }

    /// Every call on `path` gets `answer` from now on.
    pub fn answer(&self, path: &str, answer: Answer) {
        self.answer_sequence(path, vec![answer]);
    }

    /// Calls on `path` get the answers in order, counted from now; the last one repeats.
    pub fn answer_sequence(&self, path: &str, answers: Vec<Answer>) {
        assert!(!answers.is_empty(), "a sequence needs at least one answer");
        self.lock()
            .rules
            .insert(path.to_string(), Rule { answers, calls: 0 });
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    pub fn count(&self) -> usize {
        self.lock().requests.len()
    }

    /// Waits until at least `n` requests arrived (on any path) and returns them all.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        super::wait_until(timeout, &format!("{n} webhook requests"), || {
            self.count() >= n
        });
        self.requests()
    }

    /// Waits until at least `n` requests arrived on `path` and returns those.
    pub fn wait_for_on(&self, path: &str, n: usize, timeout: Duration) -> Vec<Recorded> {
        super::wait_until(timeout, &format!("{n} webhook requests on {path}"), || {
            self.requests_to(path).len() >= n
        });
        self.requests_to(path)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    state: Arc<Mutex<State>>,
    ready: std::sync::mpsc::Sender<SocketAddr>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 binds");
    ready
        .send(listener.local_addr().expect("bound address"))
        .expect("the test waits for the address");
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            _ = &mut stop => break,
        }
    }
}

async fn handle(
    state: &Mutex<State>,
    request: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let headers = request
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let answer = {
        let mut state = state
            .lock()
            .expect("no receiver thread panics holding the lock");
        state.requests.push(Recorded {
            method,
            path: path.clone(),
            headers,
            body,
            at: Instant::now(),
        });
        match state.rules.get_mut(&path) {
            Some(rule) => {
                let index = rule.calls.min(rule.answers.len() - 1);
                rule.calls += 1;
                rule.answers[index].clone()
            }
            None => Answer::ok(),
        }
    };
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut response = hyper::Response::builder().status(answer.status);
    for (name, value) in &answer.headers {
        response = response.header(name, value);
    }
    response
        .body(Full::new(Bytes::from(answer.body)))
        .expect("test answers are valid responses")
}
