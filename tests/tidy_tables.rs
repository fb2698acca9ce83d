//! Table owners (ARCHITECTURE.md, "Table owners"): each table of the schema is written only
//! by the module that owns it; every other module calls the owner.
//!
//! The production code of every crate is parsed (`tests/util/source.rs`) and every string
//! literal is read as SQL: plain and raw strings, the pieces of a `concat!` joined, the
//! format string of a `format!` (or `write!`) with each `{}` replaced by the constant it
//! names when that is a `const` of the same file. Whitespace does not matter, nor case. A
//! statement that writes is `INSERT [OR …] INTO t`, `REPLACE INTO t`, `UPDATE [OR …] t SET
//! a = …, b = …` (each column counts, as do those of an upsert's `DO UPDATE SET`) and
//! `DELETE FROM t`; `CREATE TABLE` and `CREATE TRIGGER` belong in migrations only, but a
//! connection's own `TEMP` table in [`TEMP_SCHEMA_ALLOWED`]. A table name the checker cannot
//! resolve fails, with its file and line, unless the file is in [`UNRESOLVED_ALLOWED`],
//! which lists the tables it may mean. SQL built at run time from pieces (`+`, `push_str`)
//! is not read: write a statement as one string.
//!
//! Migrations are the exception: `crates/store/schema.sql`, `crates/store/migrations/*.sql`
//! (read here for the list of tables, never scanned for writes) and their steps in Rust,
//! `db::migrate`, bring any table's rows to a new schema.
//!
//! Every table the schema ends up with must have an entry in [`TABLE_OWNERS`]: a new table
//! fails the test until it is given its owner.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::util::source::{SourceFile, production_sources};

/// Each table of the schema and the module (a file, or a folder ending in `/`) that writes
/// it; `table.column` gives one column another owner, for `UPDATE`s of that column (an
/// `INSERT` or `DELETE` of the row is the table's owner's). More than one owner is a
/// co-ownership, written down with its reason.
const TABLE_OWNERS: &[(&str, &[&str])] = &[
    // Configuration: `config` writes its records (`retire.rs` deletes and archives them
    // through a table name it chooses).
    ("workspaces", &["crates/core/src/config/"]),
    (
        "workspaces.evaluator_weights",
        &["crates/core/src/autodelivery/weights.rs"],
    ),
    ("containers", &["crates/core/src/config/"]),
    ("suppliers", &["crates/core/src/config/"]),
    // A source's mapping columns are `mapping::store`'s.
    (
        "sources",
        &[
            "crates/core/src/config/",
            "crates/core/src/mapping/store.rs",
        ],
    ),
    ("source_doc_shares", &["crates/core/src/config/"]),
    // Moved by the triggers of migrations 31 and 32 only; `ingest::kept` reads it.
    ("source_stamp", &["crates/core/src/config/"]),
    ("products", &["crates/core/src/config/"]),
    ("buyers", &["crates/core/src/config/"]),
    // The prepaid balance, and what ping reservations hold of it, are the ledger's.
    ("buyers.balance_cents", &["crates/core/src/ledger/"]),
    ("buyers.held_cents", &["crates/core/src/ledger/"]),
    // A buyer's integration document and its secrets are `integration::store`'s.
    (
        "buyers.integration",
        &["crates/core/src/integration/store.rs"],
    ),
    (
        "buyer_integration_secrets",
        &["crates/core/src/integration/store.rs"],
    ),
    ("subscriptions", &["crates/core/src/config/subscription.rs"]),
    // `ingest::store` inserts, `status` makes every later move, `erase` leaves the tombstone
    // `privacy` asks for.
    (
        "leads",
        &[
            "crates/core/src/ingest/store.rs",
            "crates/core/src/ingest/status.rs",
            "crates/core/src/ingest/erase.rs",
        ],
    ),
    (
        "lead_requests",
        &[
            "crates/core/src/ingest/store.rs",
            "crates/core/src/ingest/status.rs",
            "crates/core/src/ingest/erase.rs",
        ],
    ),
    ("transactions", &["crates/core/src/delivery/transaction.rs"]),
    (
        "transaction_history",
        &["crates/core/src/delivery/transaction.rs"],
    ),
    ("outbox_events", &["crates/core/src/outbox/store.rs"]),
    ("outbox_attempts", &["crates/core/src/outbox/store.rs"]),
    ("buyer_health", &["crates/core/src/outbox/health.rs"]),
    ("outbox_workers", &["crates/core/src/outbox/health.rs"]),
    ("cap_usage", &["crates/core/src/caps.rs"]),
    (
        "supplier_cancellations",
        &["crates/core/src/lifecycle/clawback.rs"],
    ),
    ("returns", &["crates/core/src/lifecycle/returns.rs"]),
    (
        "return_reasons",
        &["crates/core/src/config/return_reason.rs"],
    ),
    ("ledger_entries", &["crates/core/src/ledger/"]),
    ("operators", &["crates/core/src/operators.rs"]),
    ("operator_sessions", &["crates/core/src/operators.rs"]),
    // Every change's entry, appended on the connection of the job that makes the change.
    ("audit_log", &["crates/core/src/audit.rs"]),
    ("partner_users", &["crates/core/src/partners.rs"]),
    ("partner_sessions", &["crates/core/src/partners.rs"]),
    (
        "evaluator_versions",
        &["crates/core/src/autodelivery/weights.rs"],
    ),
    (
        "evaluation_features",
        &["crates/core/src/autodelivery/stored_features.rs"],
    ),
    ("health_probe", &["crates/core/src/health.rs"]),
    ("erasures", &["crates/core/src/privacy/"]),
    ("suppressions", &["crates/core/src/suppression.rs"]),
    ("suppression_keys", &["crates/core/src/suppression.rs"]),
    ("alert_targets", &["crates/core/src/alerts/store.rs"]),
    ("alert_rules", &["crates/core/src/alerts/store.rs"]),
    ("alerts", &["crates/core/src/alerts/store.rs"]),
    ("check_steps", &["crates/core/src/checks/store.rs"]),
    ("check_step_secrets", &["crates/core/src/checks/store.rs"]),
    ("pings", &["crates/core/src/ping/store.rs"]),
    ("ping_reservations", &["crates/core/src/ping/store.rs"]),
    ("bids", &["crates/core/src/bids.rs"]),
    ("report_buckets", &["crates/core/src/report/buckets.rs"]),
    ("report_days", &["crates/core/src/report/buckets.rs"]),
];

/// The files whose SQL may name a table through a value the checker cannot resolve, each
/// with the tables it may mean (each checked as if the statement named it) and why.
const UNRESOLVED_ALLOWED: &[(&str, &[&str], &str)] = &[
    (
        "crates/core/src/config/retire.rs",
        &[
            "workspaces",
            "containers",
            "sources",
            "products",
            "buyers",
            "suppliers",
        ],
        "deletes or archives a configuration record by kind (`Kind::table`)",
    ),
    (
        "crates/core/src/report/buckets.rs",
        &["report_buckets", "report_days"],
        "one upsert text for both report tables, built by the `upsert_counts!` macro",
    ),
];
/// The files that keep a `TEMP` table of their connection (with the triggers that feed it),
/// each with why; such a table is its file's alone.
const TEMP_SCHEMA_ALLOWED: &[(&str, &str)] = &[(
    "crates/core/src/autodelivery/subscribers.rs",
    "the writer connection's stamp of the kept subscriber lists, fed by triggers on \
     subscriptions, buyers, buyer_health and cap_usage; never in the file",
)];

/// The files exempt from the check: the migrations' steps in Rust.
const MIGRATIONS: &[&str] = &["crates/store/src/db/migrate.rs"];

#[test]
fn every_table_of_the_schema_has_an_owner() {
    let schema = schema_tables(&schema_files());
    assert!(
        schema.len() > 25,
        "the schema's tables are found: {schema:?}"
    );
    let problems = unowned(&schema, TABLE_OWNERS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn each_table_is_written_by_its_owner_only() {
    let schema = schema_tables(&schema_files());
    let files = production_sources();
    let (writes, broken) = check(
        &files,
        &schema,
        TABLE_OWNERS,
        UNRESOLVED_ALLOWED,
        TEMP_SCHEMA_ALLOWED,
    );
    assert!(writes > 80, "the scan finds the writes: {writes}");
    assert!(
        broken.is_empty(),
        "SQL that writes a table its module does not own (tests/tidy_tables.rs, \
         TABLE_OWNERS; ARCHITECTURE.md, \"Table owners\"):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checker_finds_each_kind_of_seeded_violation() {
    let schema = schema_tables(&[
        (
            "schema.sql".to_string(),
            "CREATE TABLE leads (id TEXT);\nCREATE TABLE buyers (id TEXT, balance_cents INTEGER);\n\
             CREATE TABLE old (id TEXT);"
                .to_string(),
        ),
        (
            "migrations/0002_x.sql".to_string(),
            "CREATE TABLE IF NOT EXISTS  cap_usage(id TEXT);\nDROP TABLE old;\n\
             CREATE TABLE t_new (id TEXT); ALTER TABLE t_new RENAME TO renamed;\n\
             ALTER TABLE leads RENAME COLUMN id TO lead_id;"
                .to_string(),
        ),
    ]);
    assert_eq!(
        schema.keys().collect::<Vec<_>>(),
        ["buyers", "cap_usage", "leads", "renamed"]
    );
    let owners: &[(&str, &[&str])] = &[
        ("leads", &["crates/core/src/ingest/"]),
        ("buyers", &["crates/core/src/config/"]),
        ("buyers.balance_cents", &["crates/core/src/ledger/"]),
        ("cap_usage", &["crates/core/src/caps.rs"]),
        ("gone", &["crates/core/src/gone.rs"]),
    ];
    // A table missing from the owner list, and an owner of no table.
    let missing = unowned(&schema, owners);
    assert_eq!(missing.len(), 2, "{missing:#?}");
    assert!(
        missing[0].contains("`renamed`")
            && missing[0].contains("migrations/0002_x.sql")
            && missing[0].contains("(\"renamed\", &[\"crates/"),
        "{}",
        missing[0]
    );
    assert!(missing[1].contains("`gone`"), "{}", missing[1]);

    let file = |path: &str, text: &str| SourceFile {
        path: Path::new(path).to_path_buf(),
        ast: syn::parse_file(text).expect("the example parses"),
    };
    let files = [
        file(
            "crates/core/src/delivery/example.rs",
            r####"
const TABLE: &str = "cap_usage";
fn multi_line(c: &Connection) {
    c.execute(
        "DELETE
             FROM   leads
         WHERE id = ?1",
        [],
    );
}
fn or_replace(c: &Connection) {
    c.execute(r#"insert or replace into "leads" (id) VALUES (?1)"#, []);
}
fn concatenated(c: &Connection) {
    c.execute(concat!("UPDATE ", "cap_usage", " SET n = n + 1"), []);
}
fn formatted(c: &Connection, table: &str) {
    c.execute(&format!("REPLACE INTO {TABLE} (id) VALUES ({})", 1), []);
    c.execute(&format!("DELETE FROM {} WHERE id = ?1", table), []);
}
fn inside_a_macro(c: &Connection) {
    let s = json!({ "sql": format!("INSERT INTO {t} (id) VALUES (?1)", t = TABLE) });
}
fn schema_outside_migrations(c: &Connection) {
    c.execute_batch("CREATE TEMP TRIGGER t AFTER INSERT ON leads BEGIN SELECT 1; END");
}
fn not_a_table(c: &Connection) {
    c.execute("DELETE FROM nowhere", []);
}
fn temp_of_another(c: &Connection) {
    c.execute("DELETE FROM kept", []);
}
"####,
        ),
        file(
            "crates/core/src/config/example.rs",
            "/// UPDATE leads SET id = 1 (documentation is not SQL)\n\
             fn second_column(c: &Connection) {\n\
             c.execute(\"UPDATE buyers SET name = ?2,\n\
             (balance_cents) = (balance_cents - ?3) WHERE id = ?1\", []);\n\
             c.execute(\"UPDATE buyers SET name = ?2 WHERE id = ?1\", []);\n\
             c.execute(\"INSERT INTO buyers (id) VALUES (?1) \
             ON CONFLICT (id) DO UPDATE SET name = 'x'\", []);\n\
             let x = \"SELECT * FROM leads\";\n\
             c.execute(\"INSERT INTO buyers (id) VALUES (?1) \
             ON CONFLICT (id) DO UPDATE SET balance_cents = 0\", []);\n\
             }\n",
        ),
        file(
            "crates/core/src/autodelivery/kept.rs",
            "const INSTALL: &str = \"CREATE TEMP TABLE kept (x INTEGER)\";\n\
             fn a(c: &Connection) { c.execute(\"INSERT INTO temp.kept (x) VALUES (1)\", []); }",
        ),
        file(
            "crates/core/src/ingest/example.rs",
            "fn a(c: &Connection) { c.execute(\"INSERT INTO leads (id) VALUES (?1)\", []); }",
        ),
    ];
    let temp_allowed = [("crates/core/src/autodelivery/kept.rs", "why")];
    let (writes, found) = check(&files, &schema, owners, &[], &temp_allowed);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(": ").next().expect("file:line first"))
        .collect();
    let at = |n: u32| format!("crates/core/src/delivery/example.rs:{n}");
    assert_eq!(
        lines,
        [
            at(5),
            at(12),
            at(15),
            at(18),
            at(19),
            at(22),
            at(25),
            at(28),
            at(31),
            "crates/core/src/config/example.rs:3".to_string(),
            "crates/core/src/config/example.rs:8".to_string(),
        ],
        "{found:#?}"
    );
    assert!(found[0].contains("DELETE FROM leads"), "{}", found[0]);
    assert!(found[0].contains("crates/core/src/ingest/"), "{}", found[0]);
    assert!(
        found[1].contains("INSERT OR REPLACE INTO leads"),
        "{}",
        found[1]
    );
    assert!(found[2].contains("UPDATE cap_usage"), "{}", found[2]);
    assert!(found[3].contains("REPLACE INTO cap_usage"), "{}", found[3]);
    assert!(found[4].contains("cannot tell which table"), "{}", found[4]);
    assert!(found[5].contains("INSERT INTO cap_usage"), "{}", found[5]);
    assert!(found[6].contains("CREATE TEMP TRIGGER"), "{}", found[6]);
    assert!(found[7].contains("no table `nowhere`"), "{}", found[7]);
    assert!(found[8].contains("temporary table"), "{}", found[8]);
    assert!(
        found[9].contains("writes buyers.balance_cents, which only crates/core/src/ledger/"),
        "{}",
        found[9]
    );
    assert!(
        found[10].contains("`INSERT … DO UPDATE buyers` writes buyers.balance_cents"),
        "{}",
        found[10]
    );
    // The owners' writes pass, and count.
    assert_eq!(writes, 18, "{found:#?}");
    // An allowed file may name its tables through a value.
    let unresolved_allowed: [(&str, &[&str], &str); 1] =
        [("crates/core/src/delivery/example.rs", &["leads"], "why")];
    let (_, found) = check(&files, &schema, owners, &unresolved_allowed, &temp_allowed);
    assert_eq!(found.len(), 11, "{found:#?}");
    assert!(
        found[4].contains(":19: `DELETE FROM leads` writes leads"),
        "the tables an allowed file may mean are checked: {}",
        found[4]
    );
}

/// The schema's files: `crates/store/schema.sql` and `crates/store/migrations/*.sql` in
/// order, each as (path, text).
fn schema_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/store");
    let mut files = vec![(
        "crates/store/schema.sql".to_string(),
        root.join("schema.sql"),
    )];
    let mut migrations: Vec<_> = std::fs::read_dir(root.join("migrations"))
        .expect("the migrations folder reads")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .collect();
    migrations.sort();
    files.extend(migrations.into_iter().map(|path| {
        let name = path.file_name().expect("a file").to_string_lossy();
        (format!("crates/store/migrations/{name}"), path)
    }));
    files
        .into_iter()
        .map(|(shown, path)| {
            let text = std::fs::read_to_string(&path).expect("a schema file reads");
            (shown, text)
        })
        .collect()
}

/// The tables the schema ends up with, each with the file that created it: every
/// `CREATE TABLE`, less those dropped, renamed ones under their new name.
fn schema_tables(files: &[(String, String)]) -> BTreeMap<String, String> {
    let mut tables = BTreeMap::new();
    for (path, text) in files {
        let words = tokens(&without_comments(text));
        for i in 0..words.len() {
            let word = |k: usize| words.get(i + k).map_or("", |w| w.as_str());
            if word(0) == "create" && word(1) == "table" {
                let k = if word(2) == "if" { 5 } else { 2 };
                tables.insert(word(k).to_string(), path.clone());
            } else if word(0) == "drop" && word(1) == "table" {
                let k = if word(2) == "if" { 4 } else { 2 };
                tables.remove(word(k));
            } else if word(0) == "alter"
                && word(1) == "table"
                && word(3) == "rename"
                && word(4) == "to"
            {
                let from = tables.remove(word(2)).unwrap_or_else(|| path.clone());
                tables.insert(word(5).to_string(), from);
            }
        }
    }
    tables
}

/// Each table of `schema` without an owner, and each owner entry of no table (or of a
/// column of no table).
fn unowned(schema: &BTreeMap<String, String>, owners: &[(&str, &[&str])]) -> Vec<String> {
    let mut problems = Vec::new();
    for (table, created) in schema {
        if !owners.iter().any(|(t, _)| t == table) {
            problems.push(format!(
                "the table `{table}` ({created}) has no owner: add the line\n    \
                 (\"{table}\", &[\"crates/core/src/MODULE/\"]),\n\
                 to TABLE_OWNERS in tests/tidy_tables.rs, naming the file or folder that \
                 writes it (two or more only with a comment saying why), and the row to \
                 ARCHITECTURE.md's \"Table owners\""
            ));
        }
    }
    for (entry, _) in owners {
        let table = entry.split('.').next().unwrap_or(entry);
        if !schema.contains_key(table) {
            problems.push(format!(
                "TABLE_OWNERS in tests/tidy_tables.rs names `{entry}`, but the schema has no \
                 table `{table}`: strike or rename its line"
            ));
        }
    }
    problems
}

/// A statement that writes a table, found in a string of the code.
struct Write {
    line: usize,
    /// The statement's verb as normalised (`INSERT OR REPLACE INTO`).
    verb: String,
    /// `None` when the table is a value the checker cannot resolve.
    table: Option<String>,
    /// The columns an `UPDATE` sets.
    columns: Vec<String>,
}

/// The number of writes found and every broken rule, as `path:line: what`.
fn check(
    files: &[SourceFile],
    schema: &BTreeMap<String, String>,
    owners: &[(&str, &[&str])],
    unresolved_allowed: &[(&str, &[&str], &str)],
    temp_allowed: &[(&str, &str)],
) -> (usize, Vec<String>) {
    let mut count = 0;
    let mut broken = Vec::new();
    let shown = |file: &SourceFile| file.path.to_string_lossy().replace('\\', "/");
    // The temporary tables, each with the file that makes it.
    let mut temp = BTreeMap::new();
    for file in files {
        if temp_allowed.iter().any(|(f, _)| *f == shown(file)) {
            for (line, sql) in sql_strings(&file.ast) {
                for write in writes(line, &sql) {
                    if let (Some(table), "CREATE TEMP TABLE") = (write.table, write.verb.as_str()) {
                        temp.insert(table, shown(file));
                    }
                }
            }
        }
    }
    for file in files {
        let shown = shown(file);
        if MIGRATIONS.contains(&shown.as_str()) {
            continue;
        }
        let owns = |entry: &str| {
            owners
                .iter()
                .find(|(e, _)| *e == entry)
                .map(|(_, modules)| *modules)
        };
        for (line, sql) in sql_strings(&file.ast) {
            for write in writes(line, &sql) {
                count += 1;
                let at = format!("{shown}:{}", write.line);
                let tables: Vec<String> = match &write.table {
                    Some(table) => vec![table.clone()],
                    None => match unresolved_allowed.iter().find(|(f, _, _)| *f == shown) {
                        Some((_, tables, _)) => tables.iter().map(|t| t.to_string()).collect(),
                        None => {
                            broken.push(format!(
                                "{at}: `{} …`: the checker cannot tell which table this \
                                 writes; name the table in the string or in a `const` of this \
                                 file",
                                write.verb
                            ));
                            continue;
                        }
                    },
                };
                for table in &tables {
                    if write.verb.starts_with("CREATE TEMP")
                        && temp_allowed.iter().any(|(f, _)| *f == shown)
                    {
                        continue;
                    }
                    if let Some(maker) = temp.get(table) {
                        if *maker != shown {
                            broken.push(format!(
                                "{at}: `{} {table}` writes a temporary table of {maker}",
                                write.verb
                            ));
                        }
                        continue;
                    }
                    if write.verb.starts_with("CREATE") {
                        broken.push(format!(
                            "{at}: `{} {table}` belongs in a migration (crates/store/migrations/)",
                            write.verb
                        ));
                        continue;
                    }
                    if !schema.contains_key(table) {
                        broken.push(format!(
                            "{at}: `{} {table}`: the schema has no table `{table}`",
                            write.verb
                        ));
                        continue;
                    }
                    let mut written: Vec<String> = write
                        .columns
                        .iter()
                        .map(|column| format!("{table}.{column}"))
                        .filter(|entry| owns(entry).is_some())
                        .collect();
                    if written.len() < write.columns.len() || write.columns.is_empty() {
                        written.insert(0, table.clone());
                    }
                    for entry in written {
                        let Some(modules) = owns(&entry) else {
                            // `unowned` reports the table.
                            continue;
                        };
                        if !modules.iter().any(|owner| is_under(&shown, owner)) {
                            broken.push(format!(
                                "{at}: `{} {table}` writes {entry}, which only {} may write",
                                write.verb,
                                modules.join(" and ")
                            ));
                        }
                    }
                }
            }
        }
    }
    (count, broken)
}

fn is_under(path: &str, owner: &str) -> bool {
    if owner.ends_with('/') {
        path.starts_with(owner)
    } else {
        path == owner
    }
}

/// Stands for a `{}` of a format string whose value the checker cannot resolve.
const UNRESOLVED: char = '\u{1}';

/// Every string of the production code `file` as SQL would read it, with its line: string
/// literals outside attributes (doc comments are not SQL), `concat!`s joined, format strings
/// with their constants filled in.
fn sql_strings(file: &syn::File) -> Vec<(usize, String)> {
    let mut consts = Consts::default();
    consts.visit_file(file);
    let mut strings = Strings {
        consts: consts.0,
        found: Vec::new(),
    };
    strings.visit_file(file);
    strings.found
}

/// The `const`s of a file that are strings, by name.
#[derive(Default)]
struct Consts(BTreeMap<String, String>);

impl<'ast> Visit<'ast> for Consts {
    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        if let Some(value) = literal_value(&item.expr, &BTreeMap::new()) {
            self.0.insert(item.ident.to_string(), value);
        }
    }
    fn visit_impl_item_const(&mut self, item: &'ast syn::ImplItemConst) {
        if let Some(value) = literal_value(&item.expr, &BTreeMap::new()) {
            self.0.insert(item.ident.to_string(), value);
        }
    }
}

/// The string `expr` stands for: a literal, a `concat!` of literals, a reference to either
/// or the name of a string `const` in `consts`.
fn literal_value(expr: &syn::Expr, consts: &BTreeMap<String, String>) -> Option<String> {
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s.value()),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => Some(i.base10_digits().to_string()),
        syn::Expr::Reference(r) => literal_value(&r.expr, consts),
        syn::Expr::Paren(p) => literal_value(&p.expr, consts),
        syn::Expr::Group(g) => literal_value(&g.expr, consts),
        syn::Expr::Path(p) => p
            .path
            .get_ident()
            .and_then(|ident| consts.get(&ident.to_string()).cloned()),
        syn::Expr::Macro(m) if m.mac.path.is_ident("concat") => {
            let args = macro_args(m.mac.tokens.clone())?;
            args.iter().map(|arg| literal_value(arg, consts)).collect()
        }
        _ => None,
    }
}

fn macro_args(tokens: TokenStream) -> Option<Punctuated<syn::Expr, syn::Token![,]>> {
    Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated
        .parse2(tokens)
        .ok()
}

struct Strings {
    consts: BTreeMap<String, String>,
    found: Vec<(usize, String)>,
}

impl Strings {
    /// The strings of a macro call: a `concat!` joined, a format string filled in, the
    /// arguments of any other macro read as expressions (or, when they are not, token by
    /// token).
    fn macro_call(&mut self, name: &str, line: usize, tokens: TokenStream) {
        if name == "include_str" || name == "include_bytes" {
            // Migrations' `.sql` files: read as the schema, not scanned.
            return;
        }
        let Some(args) = macro_args(tokens.clone()) else {
            self.tokens(line, tokens);
            return;
        };
        if name == "concat" {
            let joined: String = args
                .iter()
                .map(|arg| literal_value(arg, &self.consts).unwrap_or(UNRESOLVED.to_string()))
                .collect();
            self.found.push((line, joined));
            return;
        }
        let formats = [
            "format",
            "format_args",
            "write",
            "writeln",
            "print",
            "println",
            "eprint",
            "eprintln",
            "panic",
            "anyhow",
            "bail",
        ];
        let args: Vec<&syn::Expr> = args.iter().collect();
        let format_at = if formats.contains(&name) {
            // `write!(out, "…", …)` has its destination first.
            let skip = usize::from(name.starts_with("write"));
            args.get(skip)
                .and_then(|arg| literal_value(arg, &BTreeMap::new()).map(|s| (skip, s)))
        } else {
            None
        };
        let Some((at, format)) = format_at else {
            for arg in args {
                self.visit_expr(arg);
            }
            return;
        };
        let line = args[at].span().start().line;
        let rest = &args[at + 1..];
        self.found.push((line, self.fill(&format, rest)));
        for arg in rest {
            self.visit_expr(arg);
        }
    }

    /// `format` with each `{…}` replaced by its argument's value where it is a literal or a
    /// `const` of the file, else by [`UNRESOLVED`].
    fn fill(&self, format: &str, args: &[&syn::Expr]) -> String {
        let named = |name: &str| {
            args.iter().find_map(|arg| match arg {
                syn::Expr::Assign(a) => match &*a.left {
                    syn::Expr::Path(p) if p.path.is_ident(name) => Some(&*a.right),
                    _ => None,
                },
                _ => None,
            })
        };
        let positional: Vec<&syn::Expr> = args
            .iter()
            .copied()
            .filter(|arg| !matches!(arg, syn::Expr::Assign(_)))
            .collect();
        let mut out = String::new();
        let mut next = 0;
        let mut chars = format.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    out.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    out.push('}');
                }
                '{' => {
                    let spec: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    let name = spec.split(':').next().unwrap_or("").trim();
                    let value = if name.is_empty() {
                        next += 1;
                        positional
                            .get(next - 1)
                            .and_then(|arg| literal_value(arg, &self.consts))
                    } else if let Ok(n) = name.parse::<usize>() {
                        positional
                            .get(n)
                            .and_then(|arg| literal_value(arg, &self.consts))
                    } else if let Some(arg) = named(name) {
                        literal_value(arg, &self.consts)
                    } else {
                        self.consts.get(name).cloned()
                    };
                    out.push_str(&value.unwrap_or(UNRESOLVED.to_string()));
                }
                c => out.push(c),
            }
        }
        out
    }

    /// The strings in macro tokens that are no expressions: each string literal, and each
    /// macro call inside.
    fn tokens(&mut self, line: usize, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(group) => {
                    let called = match (
                        i.checked_sub(2).map(|j| &tokens[j]),
                        i.checked_sub(1).map(|j| &tokens[j]),
                    ) {
                        (Some(TokenTree::Ident(name)), Some(TokenTree::Punct(bang)))
                            if bang.as_char() == '!' =>
                        {
                            Some(name.to_string())
                        }
                        _ => None,
                    };
                    match called {
                        Some(name) => self.macro_call(&name, line, group.stream()),
                        None => self.tokens(line, group.stream()),
                    }
                }
                TokenTree::Literal(literal) => {
                    if let syn::Lit::Str(s) = syn::Lit::new(literal.clone()) {
                        self.found.push((s.span().start().line, s.value()));
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Strings {
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.found.push((s.span().start().line, s.value()));
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        self.macro_call(&name, mac.span().start().line, mac.tokens.clone());
    }
}

/// `sql` without its `--` comments.
fn without_comments(sql: &str) -> String {
    sql.lines()
        .map(|line| line.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The words of `sql`, lowercased: names (a quoted name without its quotes), each
/// punctuation character, a quoted string as `'`, [`UNRESOLVED`] as itself. Whitespace
/// separates and is dropped.
fn tokens(sql: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_lowercase().to_string();
            while let Some(&n) = chars.peek() {
                if !(n.is_alphanumeric() || n == '_') {
                    break;
                }
                word.extend(n.to_lowercase());
                chars.next();
            }
            words.push(word);
        } else if c == '"' || c == '`' || c == '[' {
            let close = if c == '[' { ']' } else { c };
            let name: String = chars.by_ref().take_while(|&n| n != close).collect();
            words.push(name.to_lowercase());
        } else if c == '\'' {
            chars.by_ref().take_while(|&n| n != '\'').for_each(drop);
            words.push("'".to_string());
        } else {
            words.push(c.to_string());
        }
    }
    words
}

/// The statements in `sql` (a string found at `line`) that write a table or make schema.
fn writes(line: usize, sql: &str) -> Vec<Write> {
    let words = tokens(&without_comments(sql));
    let word = |k: usize| words.get(k).map_or("", |w| w.as_str());
    let unresolved = UNRESOLVED.to_string();
    // The table named at `k` (`schema.table` as `table`), and the index after it.
    let table_at = |k: usize| -> (Option<String>, usize) {
        let (name, after) = if word(k + 1) == "." {
            (word(k + 2), k + 3)
        } else {
            (word(k), k + 1)
        };
        if name == unresolved || name.is_empty() {
            (None, after)
        } else {
            (Some(name.to_string()), after)
        }
    };
    let conflict = ["replace", "ignore", "abort", "fail", "rollback"];
    let mut found: Vec<Write> = Vec::new();
    for i in 0..words.len() {
        let inserted = found
            .iter()
            .rev()
            .find(|w| w.verb.starts_with("INSERT"))
            .and_then(|w| w.table.clone());
        let mut push = |verb: String, (table, _): (Option<String>, usize), columns| {
            found.push(Write {
                line,
                verb,
                table,
                columns,
            })
        };
        match word(i) {
            "insert" if word(i + 1) == "into" => {
                push("INSERT INTO".into(), table_at(i + 2), vec![])
            }
            "insert"
                if word(i + 1) == "or"
                    && conflict.contains(&word(i + 2))
                    && word(i + 3) == "into" =>
            {
                let verb = format!("INSERT OR {} INTO", word(i + 2).to_uppercase());
                push(verb, table_at(i + 4), vec![]);
            }
            "replace" if word(i + 1) == "into" && word(i.wrapping_sub(1)) != "or" => {
                push("REPLACE INTO".into(), table_at(i + 2), vec![])
            }
            "delete" if word(i + 1) == "from" => {
                push("DELETE FROM".into(), table_at(i + 2), vec![])
            }
            // An upsert's `DO UPDATE SET` sets columns of the row its `INSERT` names.
            "update" if word(i.wrapping_sub(1)) == "do" && word(i + 1) == "set" => {
                push(
                    "INSERT … DO UPDATE".into(),
                    (inserted, i + 2),
                    set_columns(&words[i + 2..]),
                );
            }
            "update" => {
                let (verb, at) = if word(i + 1) == "or" && conflict.contains(&word(i + 2)) {
                    (format!("UPDATE OR {}", word(i + 2).to_uppercase()), i + 3)
                } else {
                    ("UPDATE".to_string(), i + 1)
                };
                let (table, after) = table_at(at);
                if word(after) == "set" {
                    push(verb, (table, after), set_columns(&words[after + 1..]));
                }
            }
            "create" => {
                let mut k = i + 1;
                let temp = matches!(word(k), "temp" | "temporary");
                if temp {
                    k += 1;
                }
                if matches!(word(k), "table" | "trigger") {
                    let temp = if temp { " TEMP" } else { "" };
                    let verb = format!("CREATE{temp} {}", word(k).to_uppercase());
                    let k = if word(k + 1) == "if" { k + 4 } else { k + 1 };
                    push(verb, table_at(k), vec![]);
                }
            }
            _ => {}
        }
    }
    found
}

/// The columns an `UPDATE … SET` sets: the first name of each assignment (each of a
/// `(a, b) = …`), up to the end of the `SET` clause.
fn set_columns(words: &[String]) -> Vec<String> {
    let mut columns = BTreeSet::new();
    let mut depth = 0usize;
    let mut start = true;
    let mut tuple = false;
    for word in words {
        let word = word.as_str();
        if depth == 0
            && matches!(
                word,
                "where" | "from" | "returning" | ";" | "order" | "limit"
            )
        {
            break;
        }
        match word {
            "(" if start => {
                tuple = true;
                depth += 1;
            }
            "(" => depth += 1,
            ")" => {
                depth = depth.saturating_sub(1);
                tuple = false;
            }
            "," if depth == 0 => {
                start = true;
                continue;
            }
            "," if tuple => {}
            _ if (start || tuple) && word.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                columns.insert(word.to_string());
            }
            _ => {}
        }
        start = false;
    }
    columns.into_iter().collect()
}
