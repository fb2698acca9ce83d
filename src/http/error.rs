//! The one place where errors become HTTP responses.
//!
//! Every domain error converts into an [`ApiError`] (a status, a JSON body and any extra
//! headers) with a `From` impl beside the domain's error type; [`ApiError::into_response`]
//! turns it into the response. Bodies follow DESIGN.md section 7:
//! `{"error": {"code", "message", "details"?}}`, or a structured partner form where the
//! interface asks for one.

use hyper::StatusCode;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::Response;
use crate::db::DbError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: Value,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    /// `{"error": {"code": code, "message": message}}` with `status`.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: json!({"error": {"code": code, "message": message.into()}}),
            headers: Vec::new(),
        }
    }

    /// A response whose whole body the caller chose (partner forms).
    pub fn with_body(status: StatusCode, body: Value) -> ApiError {
        ApiError {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// Adds `details` (a list of `{path, code, message}`) to the error object.
    pub fn details(mut self, details: Value) -> ApiError {
        if let Some(error) = self.body.get_mut("error").and_then(Value::as_object_mut) {
            error.insert("details".into(), details);
        }
        self
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> ApiError {
        self.headers.push((name, value));
        self
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn internal() -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; the request was not applied",
        )
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
            .header(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"))
    }

    pub fn into_response(self) -> Response {
        let mut response = super::response::json(self.status, &self.body);
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> ApiError {
        match &e {
            // The file is locked by another writer for longer than busy_timeout, or the
            // writer is stopping: temporary, the caller retries.
            DbError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                log::warn!("database busy: {e}");
                ApiError::unavailable("database is busy; retry")
            }
            DbError::WriterGone => ApiError::unavailable("service is shutting down; retry"),
            DbError::GroupFailed(_) => {
                log::error!("{e}");
                ApiError::unavailable("write not committed; retry")
            }
            _ => {
                log::error!("{e}");
                ApiError::internal()
            }
        }
    }
}
