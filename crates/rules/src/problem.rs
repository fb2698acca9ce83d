//! Validation problems and the JSON pointers that name where they are.
//!
//! Owns the `{path, code, message}` detail object of a `validation_failed` answer and the
//! escaping of JSON pointer segments (RFC 6901). It does not decide what is a problem: the
//! shape and validation steps do.

use serde_json::{Value, json};

/// One problem in a request body, named by a JSON pointer relative to the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        json!({"path": self.path, "code": self.code, "message": self.message})
    }
}

/// The detail objects of a list of problems, as the error body and batch items show them.
pub fn details(problems: &[Problem]) -> Value {
    Value::Array(problems.iter().map(Problem::to_json).collect())
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
