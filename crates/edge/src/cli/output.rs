//! Printing command results: one JSON value with `--json`, readable text otherwise, or with
//! `--get PATH` the one value at PATH as plain text (for `ID=$(leadrelay … --get id)` in a
//! shell, without a JSON tool). Also prints errors: `error: …` as text, or one JSON object
//! on stderr under `--json` (`{"error": {"code", "message"}}`).

use serde_json::Value;

pub struct Output {
    json: bool,
    get: Option<String>,
}

impl Output {
    pub fn new(json: bool, get: Option<String>) -> Output {
        Output { json, get }
    }

    pub fn is_json(&self) -> bool {
        self.json || self.get.is_some()
    }

    /// Prints the view `view` as [`Output::print`] prints a value.
    pub fn show(&self, view: &impl serde::Serialize) {
        self.print(&leadrelay_core::to_value(view));
    }

    /// Prints `value`: as JSON, or as aligned `key: value` lines (nested objects indented,
    /// arrays of objects as blocks); with `--get` only the value at its path.
    pub fn print(&self, value: &Value) {
        if let Some(path) = &self.get {
            match select(value, path) {
                Some(Value::String(text)) => println!("{text}"),
                Some(Value::Null) => println!(),
                Some(other) => println!("{other}"),
                None => {
                    print_error(
                        self.json,
                        "no_such_field",
                        &format!("the output has no value at '{path}'"),
                    );
                    std::process::exit(1);
                }
            }
        } else if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(value).expect("a Value always serialises")
            );
        } else {
            let mut text = String::new();
            write_text(&mut text, value, 0);
            print!("{text}");
        }
    }

    /// Prints a list: a JSON array, or one block per item.
    pub fn print_list(&self, items: &[Value]) {
        if self.is_json() {
            self.print(&Value::Array(items.to_vec()));
        } else if items.is_empty() {
            println!("(none)");
        } else {
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    println!();
                }
                self.print(item);
            }
        }
    }
}

/// The value at `path`: keys and array indexes joined by `.` (`id`, `0.id`,
/// `item.requestIds.0`).
fn select<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |at, step| match at {
        Value::Object(map) => map.get(step),
        Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// `{"removed": …}`, what a command that removes something prints.
#[derive(serde::Serialize)]
pub(super) struct Removed {
    pub(super) removed: bool,
}

/// Prints an error on stderr: `error: MESSAGE`, or under `--json` one JSON object
/// `{"error": {"code", "message"}}` on one line.
pub(super) fn print_error(json: bool, code: &str, message: &str) {
    if json {
        let body = leadrelay_rules::problem::ErrorBody::<()>::new(code, message.to_string(), None);
        eprintln!("{}", body.to_json());
    } else {
        eprintln!("error: {message}");
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn write_text(out: &mut String, value: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::Object(inner) if !inner.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_text(out, value, indent + 1);
                    }
                    Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        for item in items {
                            out.push_str(&format!("{pad}  -\n"));
                            write_text(out, item, indent + 2);
                        }
                    }
                    Value::Array(items) => {
                        let joined: Vec<String> = items.iter().map(scalar).collect();
                        out.push_str(&format!("{pad}{key}: {}\n", joined.join(", ")));
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", scalar(value))),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_by_keys_and_indexes() {
        let value = json!({"id": "a", "item": {"requestIds": ["r1", "r2"]}, "list": [{"id": "x"}]});
        assert_eq!(select(&value, "id"), Some(&json!("a")));
        assert_eq!(select(&value, "item.requestIds.1"), Some(&json!("r2")));
        assert_eq!(select(&value, "list.0.id"), Some(&json!("x")));
        assert_eq!(select(&value, "list.1.id"), None);
        assert_eq!(select(&value, "nope"), None);
    }
}
