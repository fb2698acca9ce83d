//! Tidy: the import rules of ARCHITECTURE.md ("Architecture invariants"), checked on the
//! source tree, so that the map cannot drift silently again.
//!
//! Every production line of `src/` is read with its comments and string literals blanked
//! out and its `use` trees flattened (`use crate::{db::Db, http::AppState};` counts as
//! `crate::http::AppState`). Unit-test code is exempt: a `#[cfg(test)] mod` at the end of a
//! file and the files such a declaration names. A broken rule fails with the file, the line
//! and the rule.

use std::path::{Path, PathBuf};

/// One rule: where the things it names may appear.
struct Rule {
    /// The rule as ARCHITECTURE.md states it.
    says: &'static str,
    /// What breaks it outside `allowed`.
    names: &'static [Name],
    /// The files (a path) or folders (ending in `/`) under the repository root where the
    /// names are allowed.
    allowed: &'static [&'static str],
}

/// A rule the other way round: where the things it names must not appear.
struct Ban {
    says: &'static str,
    names: &'static [Name],
    /// The files or folders where the names are banned.
    banned: &'static [&'static str],
}

const BANS: &[Ban] = &[
    Ban {
        says: "the console only reads: console/ runs no write job (`Db::write`, \
               `write_blocking`) and no SQL statement that changes rows (`execute`); its \
               sessions are written by operators.rs, their owner, and its actions by the \
               writer jobs of audited.rs",
        names: &[
            anywhere("write"),
            anywhere("write_blocking"),
            anywhere("execute"),
            anywhere("execute_batch"),
        ],
        banned: &["crates/edge/src/console/"],
    },
    Ban {
        says: "the console escapes everything it shows: no raw markup (`PreEscaped`) in \
               console/, since lead fields and answer excerpts come from partners and buyers",
        names: &[anywhere("PreEscaped")],
        banned: &[
            "crates/edge/src/console/",
            "crates/edge/src/portal/",
            "crates/edge/src/http/",
        ],
    },
];

/// A name the code may use, as it is written in a path. It matches where it is not part of
/// a longer identifier; a trailing `*` lets the last identifier continue
/// (`Connection::open*` is also `Connection::open_in_memory`).
struct Name {
    text: &'static str,
    /// Whether `text` counts only as the first segment of a path (a crate), not after
    /// `something::`.
    root: bool,
}

const fn root(text: &'static str) -> Name {
    Name { text, root: true }
}

const fn anywhere(text: &'static str) -> Name {
    Name { text, root: false }
}

/// The HTTP layer (with the console's) and the outbox's clients of outbound webhooks, of
/// bid requests (ping/post) and of check steps, the places that speak HTTP.
const HTTP_EDGES: &[&str] = &[
    "crates/edge/src/http/",
    "crates/edge/src/console/",
    "crates/edge/src/web/",
    "crates/edge/src/portal/",
    "crates/edge/src/outbox/test_event.rs",
    "crates/edge/src/service.rs",
    "crates/edge/src/cli/serve.rs",
    "crates/edge/src/outbox/sender.rs",
    "crates/edge/src/outbox/bid.rs",
    "crates/edge/src/outbox/check.rs",
    "crates/edge/src/outbox/connect.rs",
    "crates/edge/src/outbox/alert.rs",
];

const RULES: &[Rule] = &[
    Rule {
        says: "only the HTTP layer (http/, the console's console/, the portal's portal/, their \
               forms' web/), the server entry (service.rs, cli/serve.rs) and the outbox's \
               clients (outbox/sender.rs, bid.rs, check.rs, connect.rs, alert.rs, \
               test_event.rs) use hyper, hyper_util or http_body_util",
        names: &[
            root("hyper::"),
            root("hyper_util::"),
            root("http_body_util::"),
        ],
        allowed: HTTP_EDGES,
    },
    Rule {
        says: "no domain module uses the HTTP layer (`crate::http`); only the server entry \
               (service.rs) starts it, the console (console/) and the portal (portal/), with \
               web/'s forms, serve \
               through it, and the posting instructions (posting/) show its answers",
        names: &[anywhere("crate::http")],
        allowed: &[
            "crates/edge/src/http/",
            "crates/edge/src/console/",
            "crates/edge/src/web/",
            "crates/edge/src/portal/",
            "crates/edge/src/service.rs",
            "crates/edge/src/posting/",
        ],
    },
    Rule {
        says: "domain modules know nothing of status codes or headers: only http/, \
               console/, portal/ and their shared web/ name StatusCode, HeaderMap or \
               HeaderValue",
        names: &[
            anywhere("StatusCode"),
            anywhere("HeaderMap"),
            anywhere("HeaderValue"),
        ],
        allowed: &[
            "crates/edge/src/http/",
            "crates/edge/src/console/",
            "crates/edge/src/portal/",
            "crates/edge/src/web/",
        ],
    },
    Rule {
        says: "the `http` types crate is for the HTTP layer and the outbox's client; \
               outbound_url.rs uses its `Uri` to check a URL leadrelay sends to",
        names: &[root("http::")],
        allowed: &[
            "crates/edge/src/http/",
            "crates/edge/src/console/",
            "crates/edge/src/outbox/sender.rs",
            "crates/edge/src/outbox/bid.rs",
            "crates/edge/src/outbox/alert.rs",
            "crates/edge/src/outbox/test_event.rs",
            "crates/edge/src/outbox/check.rs",
            "crates/rules/src/outbound_url.rs",
        ],
    },
    Rule {
        says: "only outbox/ makes outbound HTTP calls (hyper's client, hyper-rustls, ureq)",
        names: &[
            root("ureq::"),
            root("hyper_rustls::"),
            anywhere("hyper_util::client"),
            anywhere("hyper::client"),
        ],
        allowed: &["crates/edge/src/outbox/"],
    },
    Rule {
        says: "only db/ and ops/ open connections to the database",
        names: &[
            anywhere("Connection::open*"),
            anywhere("SqliteConnectionManager"),
            anywhere("r2d2::Pool"),
        ],
        allowed: &["crates/store/src/db/", "crates/core/src/ops/"],
    },
];

#[test]
fn the_source_tree_keeps_the_architecture_invariants() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = production_sources(root);
    assert!(files.len() > 50, "the sources are found: {}", files.len());
    let mut broken = Vec::new();
    for (path, text) in &files {
        broken.extend(check(path, text));
    }
    assert!(
        broken.is_empty(),
        "the code breaks the architecture invariants of ARCHITECTURE.md:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checker_finds_imports_in_any_form_and_ignores_comments_and_strings() {
    let domain = Path::new("crates/core/src/ingest/example.rs");
    let text = "//! Not hyper::Request, only text: crate::http::Response.\n\
                use crate::{db::Db,\n    http::{AppState, Request}};\n\
                fn a() { let s = \"hyper::Body\"; } // hyper::StatusCode\n\
                fn b() -> ::hyper::StatusCode { status }\n\
                /* rusqlite::Connection::open */ fn c() {}\n\
                fn d() { let x = rusqlite::Connection::open_in_memory(); }\n\
                fn e() { let u: http::Uri = ureq::get(\"/\"); }\n\
                fn f() -> crate::outbox::http::Thing { thing }\n";
    let found = check(domain, text);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(": ").next().expect("file:line first"))
        .collect();
    assert_eq!(
        lines,
        [
            "crates/core/src/ingest/example.rs:2",
            "crates/core/src/ingest/example.rs:5",
            "crates/core/src/ingest/example.rs:5",
            "crates/core/src/ingest/example.rs:7",
            "crates/core/src/ingest/example.rs:8",
            "crates/core/src/ingest/example.rs:8",
        ],
        "{found:#?}"
    );
    assert!(found[0].contains("crate::http::AppState"), "{}", found[0]);
    assert!(found[0].contains("no domain module uses the HTTP layer"));
    // The console may use hyper but not write, nor splice raw markup.
    let console = Path::new("crates/edge/src/console/pages/example.rs");
    let found = check(
        console,
        "use hyper::StatusCode;\nfn a(db: &Db) { db.write(|c| c.execute(\"\", [])); }\n\
         fn b() -> maud::Markup { maud::html! { (maud::PreEscaped(x)) } }\n",
    );
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("crates/edge/src/console/pages/example.rs:2: `write`"));
    assert!(found[2].contains("PreEscaped"));
    // The same text is allowed where the rules allow it.
    let http_layer = Path::new("crates/edge/src/http/example.rs");
    assert!(
        check(
            http_layer,
            "use hyper::StatusCode;\nuse crate::http::Request;\n"
        )
        .is_empty()
    );
}

/// Every rule `text` (the file at `path`, relative to the repository root) breaks, as
/// `path:line: what: rule`.
fn check(path: &Path, text: &str) -> Vec<String> {
    let shown = path.to_string_lossy().replace('\\', "/");
    let code = flatten_uses(&blank_comments_and_strings(production_code(text)));
    let mut broken = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for ban in BANS {
            if !ban.banned.iter().any(|b| is_under(&shown, b)) {
                continue;
            }
            for name in ban.names {
                if let Some(at) = find_name(line, name) {
                    let what: String = line[at..]
                        .chars()
                        .take_while(|c| is_ident(*c) || *c == ':')
                        .collect();
                    broken.push(format!(
                        "{shown}:{}: `{what}` breaks the rule: {}",
                        n + 1,
                        ban.says
                    ));
                }
            }
        }
        for rule in RULES {
            if rule.allowed.iter().any(|a| is_under(&shown, a)) {
                continue;
            }
            for name in rule.names {
                if let Some(at) = find_name(line, name) {
                    let what: String = line[at..]
                        .chars()
                        .take_while(|c| is_ident(*c) || *c == ':')
                        .collect();
                    broken.push(format!(
                        "{shown}:{}: `{what}` breaks the rule: {}",
                        n + 1,
                        rule.says
                    ));
                }
            }
        }
    }
    broken
}

fn is_under(path: &str, allowed: &str) -> bool {
    if allowed.ends_with('/') {
        path.starts_with(allowed)
    } else {
        path == allowed
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where `name` is used in `line`: not inside a longer identifier, and for a root name not
/// after `something::`.
fn find_name(line: &str, name: &Name) -> Option<usize> {
    let (text, prefix) = match name.text.strip_suffix('*') {
        Some(text) => (text, true),
        None => (name.text, false),
    };
    let mut from = 0;
    while let Some(found) = line[from..].find(text) {
        let at = from + found;
        from = at + text.len();
        let before = &line[..at];
        let inside_before = before.chars().next_back().is_some_and(is_ident);
        let inside_after = !prefix
            && text.ends_with(is_ident)
            && line[from..].chars().next().is_some_and(is_ident);
        let not_root = name.root
            && before
                .strip_suffix("::")
                .is_some_and(|path| path.chars().next_back().is_some_and(is_ident));
        if !inside_before && !inside_after && !not_root {
            return Some(at);
        }
    }
    None
}

/// The file without its unit tests: everything before a `#[cfg(test)]` inline module
/// (`mod tests {`), which by habit ends the file.
fn production_code(text: &str) -> &str {
    let mut from = 0;
    while let Some(found) = text[from..].find("#[cfg(test)]\nmod ") {
        let at = from + found;
        let line_end = text[at..]
            .match_indices('\n')
            .nth(1)
            .map_or(text.len(), |(i, _)| at + i);
        if text[at..line_end].trim_end().ends_with('{') {
            return &text[..at];
        }
        from = line_end;
    }
    text
}

/// `text` with comments and the contents of string and char literals replaced by spaces,
/// lines kept where they are.
fn blank_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && !out.chars().next_back().is_some_and(is_ident)
        {
            // A raw string: r"…" or r#"…"#, with as many hashes at the end.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('r');
            out.extend(std::iter::repeat_n(' ', j - i));
            i = j + 1;
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the first is
            // closed by a quote soon after.
            let close = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push('\'');
                    out.extend(std::iter::repeat_n(' ', end - i - 1));
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` with each `use` tree written as its flat paths, on the line where the `use`
/// starts (`use a::{b, c::{d}};` → `use a::b; use a::c::d;`); the lines it spanned stay.
fn flatten_uses(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        out.push_str(&rest[..at]);
        let statement = &rest[at..];
        let end = statement.find(';').map_or(statement.len(), |e| e + 1);
        let tree = statement["use ".len()..end].trim_end_matches(';');
        let mut paths = Vec::new();
        flatten("", tree, &mut paths);
        for path in paths {
            out.push_str("use ");
            out.push_str(&path);
            out.push_str("; ");
        }
        out.extend(statement[..end].chars().filter(|&c| c == '\n'));
        rest = &statement[end..];
    }
    out.push_str(rest);
    out
}

/// Where the next `use` item starts in `code`.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        if !code[..at].chars().next_back().is_some_and(is_ident) {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// Appends the paths of the use tree `tree` under `prefix` (`a as b` counts as `a`).
fn flatten(prefix: &str, tree: &str, paths: &mut Vec<String>) {
    let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(&tree);
        paths.push(format!("{prefix}{}", path.replace(' ', "")));
        return;
    };
    let head = format!("{prefix}{}", tree[..open].replace(' ', ""));
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                flatten(&head, &inner[start..i], paths);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        flatten(&head, &inner[start..], paths);
    }
}

/// Every `.rs` file under `src/` with its text, but the files that a `#[cfg(test)]`
/// declaration names (unit tests kept in their own file).
fn production_sources(root: &Path) -> Vec<(PathBuf, String)> {
    let found: Vec<(PathBuf, String)> = crate::util::source::all_rust_files()
        .into_iter()
        .map(|(path, text)| (root.join(path), text))
        .collect();
    let test_only: Vec<PathBuf> = found
        .iter()
        .flat_map(|(path, text)| test_modules(path, text))
        .collect();
    found
        .into_iter()
        .filter(|(path, _)| !test_only.contains(path))
        .map(|(path, text)| {
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .to_path_buf();
            (relative, text)
        })
        .collect()
}

/// The files of the modules that `text` (the file at `path`) declares under
/// `#[cfg(test)]`: `mod name;`, also `pub(crate) mod name;` for test fixtures other
/// modules' tests share (with an optional `#[path = "…"]`).
fn test_modules(path: &Path, text: &str) -> Vec<PathBuf> {
    let dir = path.parent().expect("a file has a folder");
    // Children of `mod.rs`, `lib.rs` and `main.rs` live beside it; others in a folder of
    // the file's name.
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let children = if matches!(stem, "mod" | "lib" | "main") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut modules = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        // Test fixtures that crates above share: `#[cfg(any(test, feature = "testing"))]`.
        if *line != "#[cfg(test)]" && *line != "#[cfg(any(test, feature = \"testing\"))]" {
            continue;
        }
        let mut explicit = None;
        for next in &lines[n + 1..] {
            if let Some(file) = next
                .strip_prefix("#[path = \"")
                .and_then(|p| p.strip_suffix("\"]"))
            {
                explicit = Some(dir.join(file));
            } else if let Some(name) = ["mod ", "pub(crate) mod ", "pub mod "]
                .iter()
                .find_map(|prefix| next.strip_prefix(prefix))
                .and_then(|m| m.strip_suffix(';'))
            {
                modules.push(
                    explicit
                        .take()
                        .unwrap_or_else(|| children.join(format!("{name}.rs"))),
                );
                modules.push(children.join(name).join("mod.rs"));
                break;
            } else if !next.starts_with("#[") {
                break;
            }
        }
    }
    modules
}
