//! The one place where errors become HTTP responses: [`error_to_http_response`].
//!
//! Domain modules return their own error types and know nothing of status codes or
//! headers; handlers return [`Error`], which wraps each of them (and [`HttpError`], the
//! errors of HTTP itself), and the router hands any error to [`error_to_http_response`].
//! Bodies follow DESIGN.md section 7: `{"error": {"code", "message", "details"?}}`; the
//! lifecycle endpoints answer in the partner form of SPEC.md section 7 ([`Form::Partner`]).

use hyper::header::{
    ACCEPT_ENCODING, ALLOW, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use hyper::{Method, StatusCode};
use leadrelay_core::to_value;
use leadrelay_rules::problem::ErrorBody;
use serde::Serialize;
use serde_json::Value;

use super::Response;
use crate::db::{DbError, StorageFault};
use crate::health::Unhealthy;
use crate::ingest::IngestError;
use crate::lifecycle::LifecycleError;
use crate::logging::Repeated;
use crate::mapping::MappingError;
use crate::operators::OperatorError;
use crate::partners::PartnerUserError;

/// Errors of HTTP itself, found before any domain code runs: routing, the body, the rate
/// limit.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("no such path: {path}")]
    NoSuchPath { path: String },
    /// The path exists for other methods, listed in `allow`.
    #[error("{method} is not allowed on {path}; allowed: {allow}")]
    MethodNotAllowed {
        method: Method,
        path: String,
        allow: String,
    },
    #[error("content type must be application/json, not '{media_type}'")]
    UnsupportedMediaType { media_type: String },
    /// A `Content-Encoding` other than `gzip` or `identity`.
    #[error("content encoding '{encoding}' is not supported; send gzip or no encoding")]
    UnsupportedEncoding { encoding: String },
    /// A gzip body that is not valid gzip.
    #[error("request body is not valid gzip: {0}")]
    BadGzip(String),
    /// A console form was sent as something other than a form.
    #[error("content type must be application/x-www-form-urlencoded, not '{media_type}'")]
    NotAForm { media_type: String },
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("request body was not received in time")]
    BodyTimeout,
    #[error("request body could not be read: {0}")]
    BodyUnreadable(String),
    /// serde_json's message names the line and column itself.
    #[error("request body is not valid JSON: {json}")]
    InvalidJson { json: serde_json::Error },
    #[error("too many requests from this address; retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
}

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    #[error(transparent)]
    Unhealthy(#[from] Unhealthy),
    #[error(transparent)]
    Operator(#[from] OperatorError),
    #[error(transparent)]
    Partner(#[from] PartnerUserError),
    #[error(transparent)]
    Ping(#[from] crate::ping::PingError),
}

/// The body form of an endpoint's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `{"error": {"code", "message", "details"?}}`.
    Plain,
    /// The lifecycle endpoints' form (SPEC.md section 7): `accepted: false` with the
    /// `code` and `message` of the `error` object also at the top level.
    Partner,
    /// An HTML page with the status and the message, for the operator console's browser.
    Html,
}

/// How long a client should wait before retrying after a 503 for a full, read-only or
/// failing disk: an operator has to act, so a second would only add load.
const RETRY_AFTER_STORAGE_SECS: u64 = 30;

/// The error code of an answer, kept in the response's extensions so that the request log
/// line can name it (`401 unauthorized`).
#[derive(Debug, Clone)]
pub(crate) struct ErrorCode(pub String);

/// The response to `error` on an endpoint whose errors have `form`: status, JSON body and
/// headers. Errors that mean a fault on our side are logged here, once (or, for storage
/// faults that every request meets, once per interval).
pub(crate) fn error_to_http_response(error: Error, form: Form) -> Response {
    let reply = reply(error);
    match form {
        Form::Plain => reply.into_response(),
        Form::Partner => reply.partner_form().into_response(),
        Form::Html => reply.into_html_response(),
    }
}

/// The status and plain-form body `error` answers, for documents that show real answers
/// (the posting instructions). Errors that mean a fault on our side are logged, as when
/// they are answered.
pub(crate) fn example_answer(error: Error) -> (u16, Value) {
    let reply = reply(error);
    (reply.status.as_u16(), reply.body)
}

/// What `error` answers, before the endpoint's form is applied.
fn reply(error: Error) -> Reply {
    use crate::ping::PingError;
    match error {
        Error::Ping(PingError::Ingest(e)) => reply(Error::Ingest(e)),
        Error::Ping(PingError::Db(db)) => db_reply(db),
        Error::Ping(PingError::PersonalData(problems)) => Reply::new(
            StatusCode::BAD_REQUEST,
            "personal_data_in_ping",
            crate::ping::personal_data_message(&problems),
        )
        .details(crate::ingest::problem::details(&problems)),
        Error::Ping(PingError::Internal(why)) => {
            log::error!("ping: {why}");
            Reply::internal()
        }
        Error::Http(e) => {
            let status = match &e {
                HttpError::NoSuchPath { .. } => StatusCode::NOT_FOUND,
                HttpError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
                HttpError::UnsupportedMediaType { .. }
                | HttpError::UnsupportedEncoding { .. }
                | HttpError::NotAForm { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                HttpError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                HttpError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
                HttpError::BodyUnreadable(_)
                | HttpError::BadGzip(_)
                | HttpError::InvalidJson { .. } => StatusCode::BAD_REQUEST,
                HttpError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            };
            let code = match &e {
                HttpError::NoSuchPath { .. } => "not_found",
                HttpError::MethodNotAllowed { .. } => "method_not_allowed",
                HttpError::UnsupportedMediaType { .. } | HttpError::NotAForm { .. } => {
                    "unsupported_media_type"
                }
                HttpError::UnsupportedEncoding { .. } => "unsupported_content_encoding",
                HttpError::BadGzip(_) => "invalid_gzip",
                HttpError::PayloadTooLarge { .. } => "payload_too_large",
                HttpError::BodyTimeout => "body_timeout",
                HttpError::BodyUnreadable(_) => "body_unreadable",
                HttpError::InvalidJson { .. } => "invalid_json",
                HttpError::RateLimited { .. } => "rate_limited",
            };
            let reply = Reply::new(status, code, e.to_string());
            match e {
                HttpError::MethodNotAllowed { allow, .. } => reply.header(
                    ALLOW,
                    HeaderValue::from_str(&allow).expect("method names are valid header values"),
                ),
                HttpError::RateLimited { retry_after_secs } => {
                    reply.header(RETRY_AFTER, HeaderValue::from(retry_after_secs))
                }
                // RFC 9110 section 15.5.16: a 415 says which encodings would do.
                HttpError::UnsupportedEncoding { .. } | HttpError::UnsupportedMediaType { .. } => {
                    reply.header(ACCEPT_ENCODING, HeaderValue::from_static("gzip, identity"))
                }
                _ => reply,
            }
        }
        Error::Db(e) => db_reply(e),
        Error::Ingest(e) => match e {
            IngestError::SourceNotFound => {
                Reply::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            IngestError::SecretMissing | IngestError::SecretInvalid => {
                Reply::new(StatusCode::UNAUTHORIZED, "unauthorized", e.to_string())
            }
            IngestError::Invalid { message, problems } => {
                Reply::new(StatusCode::BAD_REQUEST, "validation_failed", message)
                    .details(crate::ingest::problem::details(&problems))
            }
            IngestError::Ping { code, message } => {
                let details =
                    crate::ingest::problem::details(&[crate::ingest::problem::Problem::new(
                        "/pingId",
                        code,
                        message.clone(),
                    )]);
                Reply::new(StatusCode::BAD_REQUEST, code, message).details(details)
            }
            IngestError::Mapping(e @ MappingError::Transform { .. }) => {
                Reply::with_body(StatusCode::BAD_REQUEST, e.to_json())
            }
            IngestError::Mapping(MappingError::Db(db)) | IngestError::Db(db) => db_reply(db),
            IngestError::Mapping(MappingError::SourceNotFound(id)) => Reply::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("unknown source '{id}'"),
            ),
            // A mapping is checked before it is stored, so the other mapping errors mean a
            // broken database or an operator's hand edit: the partner cannot fix it, the
            // operator must.
            IngestError::Mapping(other) => internal(&other),
            // The handler runs a stale request again on a fresh admission, which is never
            // stale: only a change of the handler's own order would reach this.
            IngestError::Stale => Reply::unavailable("unavailable", "the source changed; retry", 1),
            IngestError::Internal(why) => {
                log::error!("ingest: {why}");
                Reply::internal()
            }
        },
        Error::Lifecycle(LifecycleError::Db(db)) => db_reply(db),
        Error::Lifecycle(e) => {
            let status = match &e {
                LifecycleError::MissingCredential | LifecycleError::InvalidCredential => {
                    StatusCode::UNAUTHORIZED
                }
                LifecycleError::TransactionNotFound => StatusCode::NOT_FOUND,
                LifecycleError::AmbiguousExternalId { .. } => StatusCode::CONFLICT,
                LifecycleError::BuyerSecretNotConfigured
                | LifecycleError::CapabilityDenied { .. } => StatusCode::FORBIDDEN,
                // `lead cancel` errors never reach HTTP; 400 keeps the mapping total.
                _ => StatusCode::BAD_REQUEST,
            };
            let current_state = match &e {
                LifecycleError::TransitionNotAllowed { current, .. } => Some(current.as_str()),
                _ => None,
            };
            let reply = Reply::with_body(
                status,
                to_value(LifecycleBody {
                    accepted: false,
                    code: e.code(),
                    message: e.to_string(),
                    error: lifecycle_error_object(&e),
                    current_state,
                }),
            );
            if status == StatusCode::UNAUTHORIZED {
                reply.header(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
            } else {
                reply
            }
        }
        Error::Operator(OperatorError::Db(db)) => db_reply(db),
        Error::Operator(e @ OperatorError::NotFound(_)) => {
            Reply::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
        }
        Error::Operator(e @ OperatorError::Invalid(_)) => {
            Reply::new(StatusCode::BAD_REQUEST, "invalid", e.to_string())
        }
        Error::Partner(PartnerUserError::Db(db)) => db_reply(db),
        Error::Partner(
            e @ (PartnerUserError::NotFound(_)
            | PartnerUserError::BuyerNotFound(_)
            | PartnerUserError::SupplierNotFound(_)),
        ) => Reply::new(StatusCode::NOT_FOUND, "not_found", e.to_string()),
        Error::Partner(e @ PartnerUserError::Invalid(_)) => {
            Reply::new(StatusCode::BAD_REQUEST, "invalid", e.to_string())
        }
        Error::Unhealthy(e) => {
            let retry_after = match e.storage_fault() {
                Some(StorageFault::Full | StorageFault::ReadOnly | StorageFault::Io) => {
                    RETRY_AFTER_STORAGE_SECS
                }
                _ => 1,
            };
            let mut reply = Reply::with_body(
                StatusCode::SERVICE_UNAVAILABLE,
                to_value(UnavailableBody {
                    status: "unavailable",
                    reason: e.to_string(),
                }),
            )
            .header(RETRY_AFTER, HeaderValue::from(retry_after));
            reply.code = match e.storage_fault() {
                Some(fault) => fault.as_str().to_string(),
                None => "unavailable".to_string(),
            };
            reply
        }
    }
}

/// A database error: 503 with `Retry-After` when retrying can help (a busy, full,
/// read-only or failing disk, a full writer queue, shutdown), else 500.
fn db_reply(e: DbError) -> Reply {
    static BUSY: Repeated = Repeated::new();
    static STORAGE: Repeated = Repeated::new();
    static NOT_COMMITTED: Repeated = Repeated::new();
    static POOL: Repeated = Repeated::new();
    match e.storage_fault() {
        // The file is locked by another process for longer than the busy timeout:
        // temporary, the caller retries.
        Some(StorageFault::Busy) => {
            if let Some(repeats) = BUSY.admit() {
                log::warn!("{e}{repeats}");
            }
            return Reply::unavailable("unavailable", "database is busy; retry", 1);
        }
        Some(fault) => {
            if let Some(repeats) = STORAGE.admit() {
                log::error!("the database cannot be written: {e}{repeats}");
            }
            return storage_reply(fault);
        }
        None => {}
    }
    match &e {
        DbError::Overloaded => Reply::unavailable(
            "overloaded",
            "too many requests are waiting for the database; retry",
            1,
        ),
        DbError::WriterGone => {
            Reply::unavailable("unavailable", "service is shutting down; retry", 1)
        }
        DbError::GroupFailed { .. } => {
            if let Some(repeats) = NOT_COMMITTED.admit() {
                log::error!("{e}{repeats}");
            }
            Reply::unavailable("unavailable", "write not committed; retry", 1)
        }
        // No read connection within the pool's timeout: every one is busy, which is load.
        DbError::Pool(_) => {
            if let Some(repeats) = POOL.admit() {
                log::warn!("{e}{repeats}");
            }
            Reply::unavailable("overloaded", "no database connection is free; retry", 1)
        }
        _ => internal(&e),
    }
}

/// The answer to a storage fault other than a busy database.
fn storage_reply(fault: StorageFault) -> Reply {
    let message = match fault {
        StorageFault::Full => "the disk holding the database is full; retry later",
        StorageFault::ReadOnly => "the database cannot be written (read-only); retry later",
        _ => "the database cannot be written (I/O error); retry later",
    };
    Reply::unavailable(fault.as_str(), message, RETRY_AFTER_STORAGE_SECS)
}

/// The answers whose errors are logged where they happen (the storage faults and the
/// internal error), as status and plain-form body, made without logging anything: for
/// documents that list every answer.
pub(crate) fn unlogged_examples() -> Vec<(u16, Value)> {
    [StorageFault::Full, StorageFault::ReadOnly, StorageFault::Io]
        .into_iter()
        .map(storage_reply)
        .chain([Reply::internal()])
        .map(|reply| (reply.status.as_u16(), reply.body))
        .collect()
}

/// A fault on our side: logged, and answered without its details.
fn internal(e: &dyn std::error::Error) -> Reply {
    log::error!("{e}");
    Reply::internal()
}

/// The `error` object of a lifecycle error body: code and message, plus what the caller
/// needs to act.
#[derive(Serialize)]
struct LifecycleErrorView<'a> {
    code: &'a str,
    message: String,
    #[serde(flatten)]
    more: Option<LifecycleMore<'a>>,
}

/// What a lifecycle error's object adds to its code and message, by kind of error.
#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum LifecycleMore<'a> {
    Details {
        details: &'a [crate::ingest::problem::Problem],
    },
    Transition {
        current_state: &'static str,
        requested_state: &'static str,
    },
    WindowElapsed {
        class: &'static str,
        delivered_at: String,
        window_seconds: i64,
        window_ended_at: String,
    },
    Capability {
        capability: &'static str,
    },
    Balance {
        required: f64,
        available: f64,
    },
    Resolved {
        status: &'a str,
    },
    Reasons {
        valid_reason_codes: &'a [String],
    },
    ReturnCap {
        return_cap: f64,
        returned: i64,
        delivered: i64,
    },
}

fn lifecycle_error_object(e: &LifecycleError) -> LifecycleErrorView<'_> {
    use crate::money::as_f64;
    let more = match e {
        LifecycleError::Validation(problems) => Some(LifecycleMore::Details { details: problems }),
        LifecycleError::TransitionNotAllowed { current, requested } => {
            Some(LifecycleMore::Transition {
                current_state: current.as_str(),
                requested_state: requested.target().as_str(),
            })
        }
        LifecycleError::CancellationWindowElapsed {
            delivered_at,
            window_secs,
        } => Some(LifecycleMore::WindowElapsed {
            class: "PartnerCancellationWindowError",
            delivered_at: crate::clock::iso(*delivered_at),
            window_seconds: *window_secs,
            window_ended_at: crate::clock::iso(
                delivered_at.saturating_add(window_secs.saturating_mul(1000)),
            ),
        }),
        LifecycleError::CapabilityDenied { capability } => {
            Some(LifecycleMore::Capability { capability })
        }
        LifecycleError::InsufficientBalance {
            required_cents,
            available_cents,
        } => Some(LifecycleMore::Balance {
            required: as_f64(*required_cents),
            available: as_f64(*available_cents),
        }),
        LifecycleError::CancellationAlreadyResolved { status } => {
            Some(LifecycleMore::Resolved { status })
        }
        LifecycleError::UnknownReasonCode { valid, .. } => Some(LifecycleMore::Reasons {
            valid_reason_codes: valid,
        }),
        LifecycleError::ReturnCapReached {
            cap_bp,
            returned,
            delivered,
        } => Some(LifecycleMore::ReturnCap {
            return_cap: as_f64(*cap_bp),
            returned: *returned,
            delivered: *delivered,
        }),
        _ => None,
    };
    LifecycleErrorView {
        code: e.code(),
        message: e.to_string(),
        more,
    }
}

/// A lifecycle endpoint's error body: the partner form's top-level keys, then the error
/// object, then the transaction's state when a move was refused.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LifecycleBody<'a> {
    accepted: bool,
    code: &'a str,
    message: String,
    error: LifecycleErrorView<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_state: Option<&'static str>,
}

/// `{"status": "unavailable", "reason": …}`, the body of a 503 from the health of the
/// service.
#[derive(Serialize)]
struct UnavailableBody {
    status: &'static str,
    reason: String,
}

/// An error answer before it becomes a [`Response`]: status, JSON body, extra headers, and
/// the error code for the request log line.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    pub body: Value,
    headers: Vec<(HeaderName, HeaderValue)>,
    code: String,
}

impl Reply {
    /// `{"error": {"code": code, "message": message}}` with `status`.
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Reply {
        Reply::with_body(
            status,
            to_value(ErrorBody::<()>::new(code, message.into(), None)),
        )
    }

    fn with_body(status: StatusCode, body: Value) -> Reply {
        let code = body
            .pointer("/error/code")
            .or_else(|| body.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string();
        Reply {
            status,
            body,
            headers: Vec::new(),
            code,
        }
    }

    fn internal() -> Reply {
        Reply::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; the request was not applied",
        )
    }

    /// 503 with `Retry-After: retry_after_secs`.
    fn unavailable(code: &str, message: &str, retry_after_secs: u64) -> Reply {
        Reply::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
            .header(RETRY_AFTER, HeaderValue::from(retry_after_secs))
    }

    /// Adds `details` (a list of `{path, code, message}`) to the error object.
    fn details(mut self, details: Value) -> Reply {
        if let Some(error) = self.body.get_mut("error").and_then(Value::as_object_mut) {
            error.insert("details".into(), details);
        }
        self
    }

    fn header(mut self, name: HeaderName, value: HeaderValue) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// The partner form of a body that has only the `error` object: `accepted: false` with
    /// its `code` and `message` at the top level too. A lifecycle body has them already.
    fn partner_form(mut self) -> Reply {
        let code = self.body["error"]["code"].clone();
        let message = self.body["error"]["message"].clone();
        if let Some(body) = self.body.as_object_mut()
            && !body.contains_key("accepted")
        {
            body.insert("accepted".into(), Value::Bool(false));
            body.insert("code".into(), code);
            body.insert("message".into(), message);
        }
        self
    }

    fn into_response(self) -> Response {
        let mut response = super::response::json(self.status, &self.body);
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response.extensions_mut().insert(ErrorCode(self.code));
        response
    }

    /// The same answer as a small HTML page: the status and the error's message, escaped
    /// (a message can quote what the client sent).
    fn into_html_response(self) -> Response {
        let message = self.body["error"]["message"]
            .as_str()
            .or_else(|| self.body["reason"].as_str())
            .unwrap_or("error")
            .to_string();
        let title = format!(
            "{} {}",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or("")
        );
        let page = maud::html! {
            (maud::DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · leadrelay" }
                    link rel="stylesheet" href="/style.css";
                }
                body {
                    main class="error" {
                        h1 { (title) }
                        p { (message) }
                        p { a href="/" { "Back to the overview" } }
                    }
                }
            }
        };
        let mut response = super::response::html(self.status, page.into_string());
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response.extensions_mut().insert(ErrorCode(self.code));
        response
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use serde_json::json;

    use super::*;
    use crate::lifecycle::state::{Move, Status};

    /// The status, headers and JSON body of the response to `error`.
    async fn answer(error: impl Into<Error>, form: Form) -> (StatusCode, Response, Value) {
        let response = error_to_http_response(error.into(), form);
        let status = response.status();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.expect("a full body").to_bytes();
        let body = serde_json::from_slice(&bytes).expect("every error body is JSON");
        (
            status,
            Response::from_parts(parts, Default::default()),
            body,
        )
    }

    #[tokio::test]
    async fn lifecycle_bodies_have_the_partner_form_and_the_error_object() {
        let error = LifecycleError::TransitionNotAllowed {
            current: Status::Paid,
            requested: Move::Cancel,
        };
        let (status, _, body) = answer(error, Form::Partner).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["accepted"], false);
        assert_eq!(body["code"], "transition_not_allowed");
        assert_eq!(body["currentState"], "paid");
        assert_eq!(body["error"]["currentState"], "paid");
        assert_eq!(body["error"]["requestedState"], "cancelled");

        let error = LifecycleError::CancellationWindowElapsed {
            delivered_at: 0,
            window_secs: 60,
        };
        let (_, _, body) = answer(error, Form::Partner).await;
        assert_eq!(body["error"]["class"], "PartnerCancellationWindowError");
        assert_eq!(body["error"]["windowEndedAt"], "1970-01-01T00:01:00.000Z");
        // The whole body, keys in their order, as partners' parsers have read it.
        assert_eq!(
            body.to_string(),
            "{\"accepted\":false,\"code\":\"cancellation_window_elapsed\",\"message\":\"the cancellation window of 60 seconds after delivery at 1970-01-01T00:00:00.000Z has elapsed\",\"error\":{\"code\":\"cancellation_window_elapsed\",\"message\":\"the cancellation window of 60 seconds after delivery at 1970-01-01T00:00:00.000Z has elapsed\",\"class\":\"PartnerCancellationWindowError\",\"deliveredAt\":\"1970-01-01T00:00:00.000Z\",\"windowSeconds\":60,\"windowEndedAt\":\"1970-01-01T00:01:00.000Z\"}}"
        );
        let error = LifecycleError::ReturnCapReached {
            cap_bp: 1_000,
            returned: 3,
            delivered: 20,
        };
        let (_, _, body) = answer(error, Form::Partner).await;
        assert_eq!(
            body["error"].to_string(),
            format!(
                "{{\"code\":\"return_cap_reached\",\"message\":{},\"returnCap\":10.0,\"returned\":3,\"delivered\":20}}",
                body["message"]
            )
        );

        let (status, response, _) = answer(LifecycleError::MissingCredential, Form::Partner).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[WWW_AUTHENTICATE], "Bearer");
    }

    #[tokio::test]
    async fn http_errors_get_the_partner_form_on_lifecycle_endpoints_only() {
        let invalid = || HttpError::BodyUnreadable("reset".into());
        let (status, _, body) = answer(invalid(), Form::Partner).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["accepted"], false);
        assert_eq!(body["code"], "body_unreadable");
        assert_eq!(body["message"], "request body could not be read: reset");
        assert_eq!(body["error"]["message"], body["message"]);
        let (_, _, body) = answer(invalid(), Form::Plain).await;
        assert_eq!(
            body,
            json!({"error": {
                "code": "body_unreadable",
                "message": "request body could not be read: reset",
            }})
        );
    }

    #[tokio::test]
    async fn headers_go_with_their_errors() {
        let error = HttpError::MethodNotAllowed {
            method: Method::DELETE,
            path: "/api/health".into(),
            allow: "GET".into(),
        };
        let (status, response, body) = answer(error, Form::Plain).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.headers()[ALLOW], "GET");
        assert_eq!(
            body["error"]["message"],
            "DELETE is not allowed on /api/health; allowed: GET"
        );
        let error = HttpError::RateLimited {
            retry_after_secs: 3,
        };
        let (status, response, _) = answer(error, Form::Plain).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "3");
        let (status, response, _) = answer(DbError::WriterGone, Form::Plain).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        let (status, response, body) = answer(Unhealthy::ShuttingDown, Form::Plain).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        assert_eq!(
            body,
            json!({"status": "unavailable", "reason": "shutting down"})
        );
    }

    /// A real SQLite error of each storage fault, from a connection that cannot write.
    fn storage_error(code: rusqlite::ErrorCode) -> DbError {
        let conn = rusqlite::Connection::open_in_memory().expect("an in-memory database");
        if code == rusqlite::ErrorCode::ReadOnly {
            conn.pragma_update(None, "query_only", true)
                .expect("query_only can be set");
            let e = conn
                .execute_batch("CREATE TABLE t (x)")
                .expect_err("a query-only connection refuses writes");
            return DbError::Sqlite(e);
        }
        DbError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error {
                code,
                extended_code: 0,
            },
            None,
        ))
    }

    #[tokio::test]
    async fn storage_faults_are_503_with_retry_after_never_500() {
        use rusqlite::ErrorCode as C;
        let cases: [(&dyn Fn() -> DbError, &str, &str); 7] = [
            (&|| storage_error(C::DiskFull), "disk_full", "30"),
            (&|| storage_error(C::ReadOnly), "read_only", "30"),
            (&|| storage_error(C::SystemIoFailure), "io_error", "30"),
            (&|| storage_error(C::CannotOpen), "io_error", "30"),
            (&|| storage_error(C::DatabaseBusy), "unavailable", "1"),
            (
                &|| DbError::GroupFailed {
                    why: "commit failed: database or disk is full".into(),
                    fault: Some(StorageFault::Full),
                },
                "disk_full",
                "30",
            ),
            (&|| DbError::Overloaded, "overloaded", "1"),
        ];
        for (error, code, retry_after) in cases {
            let described = format!("{:?}", error());
            // Whichever domain error carries it, on either endpoint form.
            for (wrapped, form) in [
                (Error::from(IngestError::Db(error())), Form::Plain),
                (Error::from(LifecycleError::Db(error())), Form::Partner),
                (Error::from(error()), Form::Plain),
            ] {
                let response = error_to_http_response(wrapped, form);
                assert_eq!(
                    response.status(),
                    StatusCode::SERVICE_UNAVAILABLE,
                    "{described}"
                );
                assert_eq!(response.headers()[RETRY_AFTER], retry_after, "{described}");
                assert_eq!(
                    response.extensions().get::<ErrorCode>().unwrap().0,
                    code,
                    "{described}"
                );
            }
        }
        // Anything else from the database is our fault: 500.
        let (status, _, _) = answer(storage_error(C::DatabaseCorrupt), Form::Plain).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn refusals_carry_their_code_for_the_log_line() {
        let response = error_to_http_response(IngestError::SecretInvalid.into(), Form::Plain);
        assert_eq!(
            response.extensions().get::<ErrorCode>().unwrap().0,
            "unauthorized"
        );
        let response =
            error_to_http_response(LifecycleError::TransactionNotFound.into(), Form::Partner);
        assert_eq!(
            response.extensions().get::<ErrorCode>().unwrap().0,
            LifecycleError::TransactionNotFound.code()
        );
        let response = error_to_http_response(Unhealthy::ShuttingDown.into(), Form::Plain);
        assert_eq!(
            response.extensions().get::<ErrorCode>().unwrap().0,
            "unavailable"
        );
    }
}
