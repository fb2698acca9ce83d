//! No import cycle between the top-level modules of a crate (ARCHITECTURE.md, "Crate map").
//! The crate graph keeps the crates apart (`tests/crates.rs`); inside a crate, this reads
//! every `crate::…` and `super::…` path of the production code (use trees, paths in code,
//! paths in macro arguments such as `json!`) and fails on a cycle between top-level
//! modules, naming the files that import each way.
//!
//! The domain crate's write path imports one way, `ingest` < `outbox` < `delivery` < `bids`
//! < `autodelivery` < `ping` < `accept`, with the use cases (`accept`, `attempt`) on top,
//! applying the facts the owners return: [`KNOWN_UPWARD`] lists its imports that still run
//! up (none now). The list only shrinks: an import that is gone fails the test until its
//! line is struck, and a new cycle fails whether or not it runs through the list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::util::source::{SourceFile, production_sources};

/// The imports of the domain crate (`crates/core`) that still run up, from → to. Strike a
/// line when its import goes; never add one.
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[];

/// Per crate (its folder), per top-level module: the top-level modules it imports, each
/// with the files that do.
type Graph = BTreeMap<String, BTreeMap<String, BTreeMap<String, BTreeSet<String>>>>;

#[test]
fn no_crate_has_an_import_cycle_between_its_top_level_modules() {
    let graph = graph(&production_sources());
    assert!(
        graph
            .get("crates/core")
            .is_some_and(|modules| modules.len() > 10),
        "the domain crate's modules are found: {:?}",
        graph.keys().collect::<Vec<_>>()
    );
    let mut stale = Vec::new();
    for (krate, from, to) in KNOWN_UPWARD {
        if !graph
            .get(*krate)
            .and_then(|modules| modules.get(*from))
            .is_some_and(|imports| imports.contains_key(*to))
        {
            stale.push(format!("{krate}: {from} -> {to}"));
        }
    }
    assert!(
        stale.is_empty(),
        "these imports are gone: strike them from KNOWN_UPWARD (tests/modules.rs):\n{}",
        stale.join("\n")
    );
    let found = cycles(&graph, KNOWN_UPWARD);
    assert!(
        found.is_empty(),
        "import cycles between top-level modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_reads_imports_in_any_form_and_finds_a_seeded_cycle() {
    let file = |path: &str, text: &str| SourceFile {
        path: Path::new(path).to_path_buf(),
        ast: syn::parse_file(text).expect("the example parses"),
    };
    let files = [
        file(
            "crates/x/src/a/b.rs",
            "use crate::{c::D, e};\n\
             use super::f;\n\
             fn g() { super::super::h::i(); let _ = json!(crate::k::l()); }\n",
        ),
        file("crates/x/src/a/mod.rs", "pub mod b;\n"),
        file("crates/x/src/c.rs", "use super::e::E;\n"),
        file(
            "crates/x/src/e.rs",
            "fn x() -> crate::a::B { crate::a::B::default() }\n",
        ),
        file("crates/x/src/h.rs", ""),
        file("crates/x/src/k.rs", ""),
        file("crates/x/src/lib.rs", "pub mod a;\n"),
    ];
    let graph = graph(&files);
    let imports = |from: &str| -> Vec<&String> {
        graph["crates/x"]
            .get(from)
            .map(|to| to.keys().collect())
            .unwrap_or_default()
    };
    // `super::f` stays inside `a`; `lib.rs` re-exports and is no module.
    assert_eq!(imports("a"), ["c", "e", "h", "k"]);
    assert_eq!(imports("c"), ["e"]);
    assert_eq!(imports("e"), ["a"]);
    let found = cycles(&graph, &[]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("crates/x: a, c, e"), "{}", found[0]);
    assert!(
        found[0].contains("e -> a (crates/x/src/e.rs)"),
        "{}",
        found[0]
    );
    // A known edge opens the cycle; any other stays one.
    assert!(cycles(&graph, &[("crates/x", "e", "a")]).is_empty());
    assert_eq!(cycles(&graph, &[("crates/x", "a", "k")]).len(), 1);
}

/// The imports between top-level modules of every crate of `files`.
fn graph(files: &[SourceFile]) -> Graph {
    let mut graph = Graph::new();
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut found = Vec::new();
    for file in files {
        let path = file.path.to_string_lossy().replace('\\', "/");
        let Some((krate, inside)) = path
            .split_once("/src/")
            .or_else(|| path.strip_prefix("src/").map(|inside| ("", inside)))
        else {
            continue;
        };
        let mut module: Vec<String> = inside
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if module.last().is_some_and(|last| last == "mod") {
            module.pop();
        }
        // The crate root only declares and re-exports.
        if matches!(inside, "lib.rs" | "main.rs") {
            continue;
        }
        modules
            .entry(krate.to_string())
            .or_default()
            .insert(module[0].clone());
        let mut paths = Paths::default();
        syn::visit::Visit::visit_file(&mut paths, &file.ast);
        for segments in paths.found {
            if let Some(top) = top_of(&segments, &module)
                && top != module[0]
            {
                found.push((krate.to_string(), module[0].clone(), top, path.clone()));
            }
        }
    }
    for (krate, from, to, path) in found {
        // Only the crate's own modules: `crate::money` in the domain crate is the rules'.
        if modules.get(&krate).is_some_and(|own| own.contains(&to)) {
            graph
                .entry(krate)
                .or_default()
                .entry(from)
                .or_default()
                .entry(to)
                .or_default()
                .insert(path);
        }
    }
    graph
}

/// The top-level module a path names from inside `module` (the file's module path), when
/// it starts at the crate root (`crate::`) or climbs to it (`super::`).
fn top_of(segments: &[String], module: &[String]) -> Option<String> {
    let mut at = module.to_vec();
    let mut rest = segments.iter();
    match rest.next()?.as_str() {
        "crate" => at.clear(),
        "super" => {
            at.pop();
            for segment in rest.by_ref() {
                if segment == "super" {
                    at.pop();
                } else {
                    at.push(segment.clone());
                    break;
                }
            }
            return at.first().cloned();
        }
        _ => return None,
    }
    rest.next().cloned()
}

/// Every path of a file as its segments: use trees flattened, paths in code and types,
/// and `crate :: name` in the tokens of macro calls.
#[derive(Default)]
struct Paths {
    found: Vec<Vec<String>>,
}

impl Paths {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut full = prefix.clone();
                full.push(name.ident.to_string());
                self.found.push(full);
            }
            syn::UseTree::Rename(rename) => {
                let mut full = prefix.clone();
                full.push(rename.ident.to_string());
                self.found.push(full);
            }
            syn::UseTree::Glob(_) => self.found.push(prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tokens: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        for (n, token) in tokens.iter().enumerate() {
            match token {
                proc_macro2::TokenTree::Group(group) => self.tokens(group.stream()),
                proc_macro2::TokenTree::Ident(ident) if ident == "crate" => {
                    if let [
                        proc_macro2::TokenTree::Punct(a),
                        proc_macro2::TokenTree::Punct(b),
                        proc_macro2::TokenTree::Ident(name),
                        ..,
                    ] = &tokens[n + 1..]
                        && a.as_char() == ':'
                        && b.as_char() == ':'
                    {
                        self.found.push(vec!["crate".to_string(), name.to_string()]);
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Paths {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.found.push(
            path.segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect(),
        );
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// The cycles of `graph` without the `known` imports: per crate, each set of top-level
/// modules that import each other in a loop, with the imports between them and their files.
fn cycles(graph: &Graph, known: &[(&str, &str, &str)]) -> Vec<String> {
    let mut found = Vec::new();
    for (krate, modules) in graph {
        let edges: BTreeMap<&str, Vec<&str>> = modules
            .iter()
            .map(|(from, imports)| {
                let to = imports
                    .keys()
                    .map(String::as_str)
                    .filter(|to| !known.contains(&(krate.as_str(), from.as_str(), *to)))
                    .collect();
                (from.as_str(), to)
            })
            .collect();
        for component in strongly_connected(&edges) {
            let mut lines = vec![format!("{krate}: {}", component.join(", "))];
            for from in &component {
                for to in &edges[from] {
                    if component.contains(to) {
                        let files: Vec<&String> = modules[*from][*to].iter().collect();
                        lines.push(format!(
                            "  {from} -> {to} ({})",
                            files
                                .iter()
                                .map(|f| f.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                }
            }
            found.push(lines.join("\n"));
        }
    }
    found
}

/// The strongly connected components of more than one node (Tarjan), each sorted.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'e> {
        edges: &'e BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            for &next in self.edges.get(node).map(Vec::as_slice).unwrap_or_default() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    component.push(top);
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for &node in edges.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}
