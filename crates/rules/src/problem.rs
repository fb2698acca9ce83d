//! Validation problems and the JSON pointers that name where they are.
//!
//! Owns the `{path, code, message}` detail object of a `validation_failed` answer and the
//! escaping of JSON pointer segments (RFC 6901), and [`ErrorBody`], the
//! `{"error": {"code", "message", "details"?}}` form of an error as `--json` prints it. It
//! does not decide what is a problem: the shape and validation steps do.

use serde::Serialize;
use serde_json::Value;

/// One problem in a request body, named by a JSON pointer relative to the whole body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub path: String,
    pub code: &'static str,
    pub message: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, code: &'static str, message: impl Into<String>) -> Problem {
        Problem {
            path: path.into(),
            code,
            message: message.into(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a problem is strings and serialises")
    }
}

/// The detail objects of a list of problems, as the error body and batch items show them.
pub fn details(problems: &[Problem]) -> Value {
    serde_json::to_value(problems).expect("problems are strings and serialise")
}

/// An error as `--json` prints it: `{"error": {"code", "message", "details"?}}`, the form
/// of the HTTP interface's error bodies. `details` (the problems) is left out when there
/// are none to show.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a, D: Serialize> {
    error: ErrorFields<'a, D>,
}

#[derive(Debug, Serialize)]
struct ErrorFields<'a, D: Serialize> {
    code: &'a str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<D>,
}

impl<'a, D: Serialize> ErrorBody<'a, D> {
    pub fn new(code: &'a str, message: String, details: Option<D>) -> Self {
        ErrorBody {
            error: ErrorFields {
                code,
                message,
                details,
            },
        }
    }

    /// The body as a JSON value, for callers that print or embed one.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("an error body is strings and serialisable details")
    }
}

/// `base` extended by one object key, escaped as RFC 6901 asks (`~` → `~0`, `/` → `~1`).
pub fn child(base: &str, key: &str) -> String {
    let mut path = String::with_capacity(base.len() + key.len() + 1);
    path.push_str(base);
    path.push('/');
    if key.contains(['~', '/']) {
        path.push_str(&key.replace('~', "~0").replace('/', "~1"));
    } else {
        path.push_str(key);
    }
    path
}

/// `base` extended by one array index.
pub fn index(base: &str, index: usize) -> String {
    format!("{base}/{index}")
}

/// A short name of a JSON value's type for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_tilde_and_slash() {
        assert_eq!(child("", "firstName"), "/firstName");
        assert_eq!(child("/leads/2", "a/b~c"), "/leads/2/a~1b~0c");
        assert_eq!(index("/leads", 7), "/leads/7");
    }
}
