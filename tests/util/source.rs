//! The production code (`src/` and each crate's `crates/*/src/`), parsed with `syn`, for the few tests that check a property
//! a test of behaviour cannot see (that secrets are compared in constant time). Parsed, not
//! grepped: layout, comments, string contents and names do not change what a check finds.
//!
//! Unit-test code is left out: items under `#[cfg(test)]` and the files such a `mod` names.

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;

/// One source file: its path under the repository root and its items without test code.
pub struct SourceFile {
    pub path: PathBuf,
    pub ast: syn::File,
}

impl SourceFile {
    /// `path:line` of `node`, for failure messages.
    pub fn at(&self, node: &impl Spanned) -> String {
        format!("{}:{}", self.path.display(), node.span().start().line)
    }
}

/// Every `.rs` file under `dir` of the repository, with its path under the repository root
/// and its text.
pub fn rust_files(dir: &str) -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pending = vec![root.join(dir)];
    let mut found = Vec::new();
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("the folder reads") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file reads");
                let relative = path.strip_prefix(root).expect("under the root");
                found.push((relative.to_path_buf(), text));
            }
        }
    }
    found
}

/// Every `.rs` file of the production code: the root package's `src/` and the `src/` of
/// each crate under `crates/`, as [`rust_files`] gives them.
pub fn all_rust_files() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec!["src".to_string()];
    let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("the crates folder reads")
        .map(|entry| entry.expect("a directory entry").file_name())
        .map(|name| format!("crates/{}/src", name.to_string_lossy()))
        .collect();
    crates.sort();
    dirs.extend(crates);
    let found: Vec<(PathBuf, String)> = dirs.iter().flat_map(|dir| rust_files(dir)).collect();
    assert!(found.len() > 20, "the sources are found");
    found
}

/// Every production `.rs` file ([`all_rust_files`]), parsed.
pub fn production_sources() -> Vec<SourceFile> {
    let mut files: Vec<SourceFile> = all_rust_files()
        .into_iter()
        .map(|(path, text)| {
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            SourceFile { path, ast }
        })
        .collect();
    let test_files: Vec<PathBuf> = files.iter().flat_map(test_modules_named).collect();
    files.retain(|file| !test_files.contains(&file.path));
    for file in &mut files {
        strip_test_items(&mut file.ast.items);
    }
    files
}

/// The production function (free or in an `impl`) named `name`; panics unless there is
/// exactly one.
pub fn function<'a>(files: &'a [SourceFile], name: &str) -> (&'a SourceFile, &'a syn::Block) {
    struct Find<'a, 'ast> {
        name: &'a str,
        found: Vec<&'ast syn::Block>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Find<'_, 'ast> {
        fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
            if item.sig.ident == self.name {
                self.found.push(&item.block);
            }
            syn::visit::visit_item_fn(self, item);
        }
        fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
            if item.sig.ident == self.name {
                self.found.push(&item.block);
            }
            syn::visit::visit_impl_item_fn(self, item);
        }
    }
    let mut found = Vec::new();
    for file in files {
        let mut find = Find {
            name,
            found: Vec::new(),
        };
        syn::visit::Visit::visit_file(&mut find, &file.ast);
        found.extend(find.found.into_iter().map(|block| (file, block)));
    }
    assert_eq!(found.len(), 1, "one production fn {name}");
    found.remove(0)
}

/// Whether `attrs` hold `#[cfg(test)]`, or `#[cfg(any(test, feature = "testing"))]`: the
/// fixtures a crate's unit tests share with the unit tests of the crates above.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| match &attr.meta {
        syn::Meta::List(list) => {
            let cfg = list.tokens.to_string();
            list.path.is_ident("cfg")
                && (cfg == "test" || cfg == "any (test , feature = \"testing\")")
        }
        _ => false,
    })
}

fn attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn strip_test_items(items: &mut Vec<syn::Item>) {
    items.retain(|item| !is_cfg_test(attrs(item)));
    for item in items {
        match item {
            syn::Item::Mod(module) => {
                if let Some((_, inner)) = &mut module.content {
                    strip_test_items(inner);
                }
            }
            syn::Item::Impl(block) => block.items.retain(|i| match i {
                syn::ImplItem::Fn(f) => !is_cfg_test(&f.attrs),
                _ => true,
            }),
            _ => {}
        }
    }
}

/// The files that `#[cfg(test)] mod NAME;` declarations in `file` name (with an optional
/// `#[path = "…"]`).
fn test_modules_named(file: &SourceFile) -> Vec<PathBuf> {
    let dir = file.path.parent().expect("a file is in a folder");
    let stem = file.path.file_stem().expect("a file name");
    // A module's children live beside `mod.rs`, `lib.rs` and `main.rs`, else in a folder
    // named after the file.
    let children = if ["mod", "lib", "main"].iter().any(|n| stem == *n) {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    file.ast
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(module) if module.content.is_none() && is_cfg_test(&module.attrs) => {
                Some(module)
            }
            _ => None,
        })
        .flat_map(|module| {
            let name = module.ident.to_string();
            let explicit = module.attrs.iter().find_map(|attr| match &attr.meta {
                syn::Meta::NameValue(pair) if pair.path.is_ident("path") => match &pair.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(file),
                        ..
                    }) => Some(dir.join(file.value())),
                    _ => None,
                },
                _ => None,
            });
            let mut paths = vec![
                children.join(format!("{name}.rs")),
                children.join(&name).join("mod.rs"),
            ];
            paths.extend(explicit);
            paths
        })
        .collect()
}
