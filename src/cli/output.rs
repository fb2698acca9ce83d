//! Printing command results: one JSON value with `--json`, readable text otherwise.

use serde_json::Value;

pub struct Output {
    json: bool,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output { json }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Prints `value`: as JSON, or as aligned `key: value` lines (nested objects indented,
    /// arrays of objects as blocks).
    pub fn print(&self, value: &Value) {
        if self.json {
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
        if self.json {
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
