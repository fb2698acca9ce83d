//! Output is built from `#[derive(Serialize)]` views (ARCHITECTURE.md, "Output"): a view
//! names every key its type has, where `json!` patches keys into a value anywhere. The
//! production code keeps `json!` only where the value is free-form (what a partner or an
//! operator wrote), each place listed in [`FREE_FORM`] with why; any other `json!` fails,
//! and so does a listed place that no longer has one or has more than listed.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::util::source::{SourceFile, production_sources};

/// The files that may build a value with `json!`, how many times, and why the value is
/// free-form there.
const FREE_FORM: &[(&str, usize, &str)] = &[
    (
        "crates/core/src/autodelivery/decision.rs",
        1,
        "the stored decision is read back as free-form JSON; the partner view keeps a filter mismatch's field only",
    ),
    (
        "crates/edge/src/cli/setup.rs",
        2,
        "an audit entry's view of a record marks the secret field the command names as rotated, never its value",
    ),
];

/// The most `json!` the production code may hold in all (at most 10, each for a free-form
/// value): what it holds now, so the count only goes down.
const MOST: usize = 3;

/// Every `json!` of `files`, as `path:line`.
fn json_macros(files: &[SourceFile]) -> Vec<(String, String)> {
    struct Find<'a> {
        file: &'a SourceFile,
        found: Vec<(String, String)>,
    }
    impl Find<'_> {
        fn tokens(&mut self, tokens: TokenStream) {
            let mut previous: Option<proc_macro2::Ident> = None;
            for tree in tokens {
                match &tree {
                    TokenTree::Punct(punct) if punct.as_char() == '!' => {
                        if let Some(ident) = previous.take()
                            && ident == "json"
                        {
                            let at = format!(
                                "{}:{}",
                                self.file.path.display(),
                                ident.span().start().line
                            );
                            self.found.push((self.file.path.display().to_string(), at));
                        }
                    }
                    TokenTree::Ident(ident) => previous = Some(ident.clone()),
                    TokenTree::Group(group) => {
                        previous = None;
                        self.tokens(group.stream());
                    }
                    _ => previous = None,
                }
            }
        }
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_macro(&mut self, mac: &'ast syn::Macro) {
            if mac.path.segments.last().is_some_and(|s| s.ident == "json") {
                self.found
                    .push((self.file.path.display().to_string(), self.file.at(mac)));
            }
            self.tokens(mac.tokens.clone());
        }
    }
    let mut found = Vec::new();
    for file in files {
        let mut find = Find {
            file,
            found: Vec::new(),
        };
        find.visit_file(&file.ast);
        found.extend(find.found);
    }
    found
}

#[test]
fn json_macros_build_only_free_form_values() {
    let found = json_macros(&production_sources());
    let mut unlisted = Vec::new();
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for (path, at) in &found {
        match FREE_FORM.iter().find(|(listed, _, _)| listed == path) {
            Some((listed, _, _)) => *counts.entry(listed).or_default() += 1,
            None => unlisted.push(at.clone()),
        }
    }
    assert!(
        unlisted.is_empty(),
        "{} json! outside the free-form places (build a Serialize view):\n{}",
        unlisted.len(),
        unlisted.join("\n")
    );
    for (path, most, why) in FREE_FORM {
        let count = counts.get(path).copied().unwrap_or(0);
        assert!(
            count > 0 && count <= *most,
            "{path} is listed for {most} json! ({why}) and has {count}: update FREE_FORM"
        );
    }
    assert!(found.len() <= MOST, "{} json! in all", found.len());
}

#[test]
fn the_check_finds_json_in_any_position() {
    let file = SourceFile {
        path: "crates/x/src/a.rs".into(),
        ast: syn::parse_file(
            "fn f() { let a = json!({\"k\": 1}); let b = vec![serde_json::json!(2)]; }\n\
             fn g() -> String { format!(\"{}\", json!([3])) }\n",
        )
        .expect("the example parses"),
    };
    let found = json_macros(std::slice::from_ref(&file));
    let lines: Vec<&str> = found.iter().map(|(_, at)| at.as_str()).collect();
    assert_eq!(
        lines,
        [
            "crates/x/src/a.rs:1",
            "crates/x/src/a.rs:1",
            "crates/x/src/a.rs:2"
        ]
    );
}
