//! JSON pointers (RFC 6901) as the mapping language uses them: parsed once when a document
//! is checked, then looked up without re-parsing for every item of every body.

use std::borrow::Cow;

use serde_json::Value;

/// A parsed JSON pointer: its text (kept for error paths) and its unescaped tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    pub text: String,
    tokens: Vec<String>,
}

impl Pointer {
    /// Parses `text`: empty (the whole value) or `/`-separated tokens where `~0` stands for
    /// `~` and `~1` for `/`. The error says what is wrong, for a problem message.
    pub fn parse(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer {
                text: String::new(),
                tokens: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "'{text}' is not a JSON pointer: it must start with '/' (or be empty for the whole value)"
            ));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            tokens.push(unescape(raw).ok_or_else(|| {
                format!("'{text}' is not a JSON pointer: '~' must be followed by 0 or 1")
            })?);
        }
        Ok(Pointer {
            text: text.to_string(),
            tokens,
        })
    }

    /// The unescaped reference tokens, outermost first.
    pub(crate) fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The value at this pointer inside `root`, if there is one.
    pub fn lookup<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        let mut current = root;
        for token in &self.tokens {
            current = match current {
                Value::Object(map) => map.get(token)?,
                Value::Array(items) => items.get(array_index(token)?)?,
                _ => return None,
            };
        }
        Some(current)
    }
}

/// An array index token: decimal digits without leading zeros (RFC 6901 section 4).
fn array_index(token: &str) -> Option<usize> {
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    token.parse().ok()
}

fn unescape(raw: &str) -> Option<String> {
    if !raw.contains('~') {
        return Some(raw.to_string());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Escapes one token for use in a pointer: `~` as `~0`, `/` as `~1`.
pub(crate) fn escape(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_looks_up_like_serde_json() {
        let doc = json!({"a": {"b/c": [10, {"d~e": "x"}], "": 1}, "0": "zero"});
        for text in [
            "",
            "/a",
            "/a/b~1c",
            "/a/b~1c/0",
            "/a/b~1c/1/d~0e",
            "/a/",
            "/0",
            "/x",
        ] {
            let pointer = Pointer::parse(text).unwrap();
            assert_eq!(pointer.lookup(&doc), doc.pointer(text), "{text}");
        }
    }

    #[test]
    fn array_indexes_follow_the_rfc() {
        let doc = json!([1, 2, 3]);
        for (text, expected) in [
            ("/0", Some(1)),
            ("/2", Some(3)),
            ("/3", None),
            ("/01", None),
            ("/-", None),
            ("/+1", None),
        ] {
            let found = Pointer::parse(text).unwrap().lookup(&doc).cloned();
            assert_eq!(found, expected.map(|n| json!(n)), "{text}");
        }
    }

    #[test]
    fn refuses_bad_pointers() {
        for text in ["a", "a/b", "/a~2", "/a~", "#/a"] {
            assert!(Pointer::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn escape_round_trips() {
        let token = "a/b~c";
        let pointer = Pointer::parse(&format!("/{}", escape(token))).unwrap();
        assert_eq!(pointer.tokens, vec![token.to_string()]);
    }
}
