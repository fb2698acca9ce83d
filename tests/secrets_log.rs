//! Secrets: the real binary logging at `trace` never prints a secret, a key or their hashes
//! while it takes ingest, lifecycle and supplier calls with right and wrong credentials in
//! both headers, rotates a source's secret and sends a signed webhook, and no HTTP answer,
//! webhook or CLI output shows one after the command that created it; a presented secret is
//! hashed and compared in constant time whatever its length (checked on the parsed source,
//! since timing cannot be asserted in a test); and SQL is never built from values, only from
//! reviewed constant pieces.

use std::time::Duration;

use serde_json::{Value, json};

use syn::visit::Visit;

use crate::util::process::ServeProcess;
use crate::util::receiver::Receiver;
use crate::util::source::{self, SourceFile, production_sources};
use crate::util::{TempDb, basic_setup, complete_lead, lr};

/// A wrong secret that is as long as `right` and shares its prefix.
fn same_length_wrong(right: &str) -> String {
    let keep = right.len() / 2;
    let tail: String = right[keep..]
        .chars()
        .map(|c| if c == 'A' { 'B' } else { 'A' })
        .collect();
    format!("{}{tail}", &right[..keep])
}

/// Runs `leadrelay LINE` (with `--json` when `json`) at `trace` level; panics unless it
/// succeeds. Returns its stdout and its stderr.
fn printed_at_trace(db: &TempDb, line: &str, json: bool) -> (String, String) {
    let output = lr(db, line)
        .env("RUST_LOG", "trace")
        .command(json)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{line}: {stderr}");
    (stdout, stderr)
}

#[test]
fn secrets_and_keys_never_reach_the_log_or_any_output() {
    let db = TempDb::new();
    let path = &db.path;
    let receiver = Receiver::start();
    basic_setup(path);
    let supplier = lr(path, "supplier create --workspace ws --name Sup --id sup").json();
    let source = lr(
        path,
        "source create --channel web --name Src --id src --supplier sup --result-detail full",
    )
    .json();
    let buyer = crate::util::buyer(path, "b", &receiver.url("/hook"), Some("20"), []);
    let source_secret = source["secret"]
        .as_str()
        .expect("a generated secret")
        .to_string();
    let buyer_secret = buyer["secret"]
        .as_str()
        .expect("a generated secret")
        .to_string();
    let signing_secret = buyer["signingSecret"]
        .as_str()
        .expect("a signing secret")
        .to_string();
    let supplier_key = supplier["key"]
        .as_str()
        .expect("a generated key")
        .to_string();
    let wrong = [
        same_length_wrong(&source_secret),
        same_length_wrong(&buyer_secret),
        same_length_wrong(&supplier_key),
        "short-wrong-secret".to_string(),
    ];

    let server = ServeProcess::start_with(
        lr(&db, "serve --listen 127.0.0.1:0 --retry-schedule 200ms").env("RUST_LOG", "trace"),
    );
    let post = |path: &str, body: &Value| server.post(path).json(body);
    let ingest = "/api/webhooks/channels/web/sources/src/leads";
    // The first lead asks for automated delivery (a complete lead, so it scores well); the
    // second is delivered by the operator.
    let lead = |n: u32| {
        let (email, phone) = (format!("a{n}@example.com"), format!("+49 30 123456{n}"));
        let mut lead = complete_lead(&format!("s-{n}"), &email, &phone);
        lead["triggerAutoDelivery"] = json!(n == 1);
        lead
    };

    // Ingest: right secret in each header, wrong ones in each, and one in the query string.
    let first = post(ingest, &lead(1)).secret(&source_secret).send();
    assert_eq!(first.status, 201, "{}", first.text);
    let second = post(ingest, &lead(2)).bearer(&source_secret).send();
    assert_eq!(second.status, 201, "{}", second.text);
    for wrong in &wrong {
        assert_eq!(post(ingest, &lead(3)).secret(wrong).send().status, 401);
        assert_eq!(post(ingest, &lead(3)).bearer(wrong).send().status, 401);
    }
    let in_query = format!("{ingest}?secret={source_secret}");
    assert_eq!(post(&in_query, &lead(4)).send().status, 401);
    let invalid = post(ingest, &json!({"firstName": source_secret}))
        .secret(&source_secret)
        .send();
    assert_eq!(invalid.status, 400, "{}", invalid.text);

    // The operator rotates the source's secret while the server runs: it is printed once,
    // the old one stops working, the new one works.
    let (rotation, rotation_log) = printed_at_trace(&db, "source rotate-secret src", true);
    let rotated: Value = serde_json::from_str(&rotation).expect("rotate-secret prints JSON");
    let rotated_secret = rotated["secret"]
        .as_str()
        .expect("a new secret")
        .to_string();
    let old = post(ingest, &lead(5)).secret(&source_secret).send();
    assert_eq!(old.status, 401, "{}", old.text);
    let new = post(ingest, &lead(5)).bearer(&rotated_secret).send();
    assert_eq!(new.status, 201, "{}", new.text);
    let mut replies = vec![first.text.clone(), second.text.clone(), old.text, new.text];

    // Two deliveries, automated and by the operator: their events are signed with the
    // signing secret and sent.
    let automated = &first.json["item"]["autoDelivery"]["requests"][0]["deliveries"][0];
    let mut transactions = vec![
        automated["transactionId"]
            .as_str()
            .unwrap_or_else(|| panic!("the first lead is delivered automatically: {}", first.text))
            .to_string(),
    ];
    let request_id = second.json["item"]["requestIds"][0]
        .as_str()
        .expect("a request id");
    let delivered = lr(path, format!("deliver --request {request_id} --buyer b")).json();
    transactions.push(
        delivered["transactionId"]
            .as_str()
            .expect("a transaction")
            .to_string(),
    );
    receiver.wait_for_on("/hook", 2, Duration::from_secs(20));

    // Lifecycle: right and wrong buyer secrets in both headers.
    let confirm = json!({"transactionId": transactions[0], "status": "acknowledged"});
    for wrong in &wrong {
        let reply = post("/api/webhooks/partner-confirmation", &confirm)
            .bearer(wrong)
            .send();
        assert_eq!(reply.status, 401, "{}", reply.text);
        replies.push(reply.text);
    }
    let reply = post("/api/webhooks/partner-confirmation", &confirm)
        .secret(&buyer_secret)
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    replies.push(reply.text);
    for endpoint in ["partner-payout-pending", "partner-payout"] {
        let reply = post(
            &format!("/api/webhooks/{endpoint}"),
            &json!({"transactionId": transactions[0]}),
        )
        .bearer(&buyer_secret)
        .send();
        assert_eq!(reply.status, 200, "{endpoint}: {}", reply.text);
        replies.push(reply.text);
    }
    let cancel = json!({"transactionId": transactions[1], "reason": "customer withdrew"});
    let reply = post("/api/webhooks/partner-cancellation", &cancel)
        .secret(&buyer_secret)
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    replies.push(reply.text);

    // Supplier: the cancelled lead's clawback, answered with a wrong and the right key.
    let lead_id = second.json["item"]["leadId"].as_str().expect("a lead id");
    let answer = json!({"leadId": lead_id, "status": "acknowledged"});
    for wrong in &wrong {
        let reply = post("/api/webhooks/supplier-cancellation-confirmation", &answer)
            .secret(wrong)
            .send();
        assert_eq!(reply.status, 401, "{}", reply.text);
        replies.push(reply.text);
    }
    let reply = post("/api/webhooks/supplier-cancellation-confirmation", &answer)
        .bearer(&supplier_key)
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    replies.push(reply.text);

    let log = server.stop();
    // Every command that shows what holds a secret, as text and as JSON, at trace level:
    // after its creation a secret is never printed again.
    let events = lr(&db, "outbox list").json();
    let mut commands = vec![
        "source show src".to_string(),
        "source list".to_string(),
        "buyer list".to_string(),
        "transaction list".to_string(),
        "outbox list".to_string(),
        "lead list".to_string(),
        format!("lead show {lead_id}"),
        "check".to_string(),
    ];
    commands.extend(transactions.iter().map(|t| format!("transaction show {t}")));
    commands.extend(
        events
            .as_array()
            .expect("outbox list prints an array")
            .iter()
            .map(|e| format!("outbox show {}", e["id"].as_str().expect("an event id"))),
    );
    let mut outputs = vec![("rotate-secret's log".to_string(), rotation_log)];
    for command in &commands {
        for json in [false, true] {
            let (stdout, stderr) = printed_at_trace(&db, command, json);
            outputs.push((command.clone(), format!("{stdout}{stderr}")));
        }
    }
    // The webhooks the buyer received carry a signature, never the secret.
    for request in receiver.requests_to("/hook") {
        outputs.push(("a webhook".to_string(), format!("{request:?}")));
    }
    outputs.extend(
        replies
            .into_iter()
            .map(|r| ("an HTTP answer".to_string(), r)),
    );
    // The capture works: the request lines are there, at every level down to trace.
    assert!(
        log.contains("POST /api/webhooks/channels/web/sources/src/leads 201"),
        "{log}"
    );
    // The log goes to a pipe here: plain text, no terminal colour codes.
    assert!(!log.contains('\x1b'), "{log}");
    assert!(
        log.contains("POST /api/webhooks/partner-confirmation 401"),
        "{log}"
    );
    assert!(
        log.contains("POST /api/webhooks/supplier-cancellation-confirmation 200"),
        "{log}"
    );
    let signing_key = signing_secret.trim_start_matches("whsec_");
    let mut forbidden: Vec<(String, String)> = vec![
        ("source secret".into(), source_secret.clone()),
        ("rotated source secret".into(), rotated_secret.clone()),
        ("buyer secret".into(), buyer_secret.clone()),
        ("supplier key".into(), supplier_key.clone()),
        ("signing secret".into(), signing_key.to_string()),
    ];
    for (n, wrong) in wrong.iter().enumerate() {
        forbidden.push((format!("wrong secret {n}"), wrong.clone()));
    }
    let hashes: Vec<(String, String)> = forbidden
        .iter()
        .map(|(what, secret)| {
            (
                format!("hash of the {what}"),
                leadrelay::secrets::hash(secret),
            )
        })
        .collect();
    forbidden.extend(hashes);
    for (what, secret) in &forbidden {
        // Even a 16-character piece of it would be a leak.
        let piece = &secret[secret.len() - 16..];
        assert!(!log.contains(piece), "the log shows the {what}");
        for (source, output) in &outputs {
            assert!(
                !output.contains(piece),
                "{source} shows the {what}: {output}"
            );
        }
    }
}

#[test]
fn a_wrong_secret_of_the_right_length_takes_the_same_path_as_the_right_one() {
    let right = leadrelay::secrets::generate("lrs_");
    let stored = leadrelay::secrets::hash(&right);
    let wrong = same_length_wrong(&right);
    assert_eq!(wrong.len(), right.len());
    assert!(leadrelay::secrets::verify(&right, &stored));
    assert!(!leadrelay::secrets::verify(&wrong, &stored));
    // Both are hashed before the comparison, so what is compared always has the stored
    // hash's length, whatever was presented.
    for presented in [right.as_str(), wrong.as_str(), "", "x", &"y".repeat(10_000)] {
        assert_eq!(leadrelay::secrets::hash(presented).len(), stored.len());
    }
    // Every presented candidate is checked, in any order.
    let checks = leadrelay::secrets::any_matches;
    assert!(checks(&[&wrong, &right], &stored));
    assert!(checks(&[&right, &wrong], &stored));
    assert!(!checks(&[&wrong, &wrong], &stored));

    // How long a comparison takes cannot be asserted in a test on a shared machine, so the
    // code that makes it constant is checked instead, parsed rather than grepped: `verify`
    // compares with `subtle`'s `ct_eq` and `any_matches` calls `verify`, and neither has a
    // data-dependent branch or early exit, however they are written.
    let sources = production_sources();
    for (name, must_call) in [("verify", "ct_eq"), ("any_matches", "verify")] {
        let (file, body) = source::function(&sources, name);
        let mut scan = Branches {
            file,
            found: Vec::new(),
            calls: Vec::new(),
        };
        scan.visit_block(body);
        assert!(
            scan.found.is_empty(),
            "{name} branches or exits early:\n{}",
            scan.found.join("\n")
        );
        assert!(
            scan.calls.iter().any(|c| c == must_call),
            "{name} calls {must_call}: {:?}",
            scan.calls
        );
    }
}

#[test]
fn stored_secret_hashes_are_only_compared_through_secrets_verify() {
    // A hash compared with `==` (or `starts_with`, `cmp`, a literal pattern, `assert_eq!`)
    // would leak, through timing, how much of it matched. Any comparison in production code
    // with a hash on either side fails: a name with `hash` in it (`secret_hash`, `key_hash`,
    // `stored_hash`) or a call of `secrets::hash`.
    let mut sites = Vec::new();
    for file in &production_sources() {
        let mut scan = HashComparisons {
            file,
            found: Vec::new(),
        };
        scan.visit_file(&file.ast);
        sites.extend(scan.found);
    }
    assert!(
        sites.is_empty(),
        "hashes compared outside secrets::verify:\n{}",
        sites.join("\n")
    );
}

/// Methods that compare their receiver with their argument.
const COMPARING_METHODS: &[&str] = &[
    "eq",
    "ne",
    "cmp",
    "partial_cmp",
    "lt",
    "le",
    "gt",
    "ge",
    "starts_with",
    "ends_with",
    "contains",
    "strip_prefix",
    "strip_suffix",
    "eq_ignore_ascii_case",
];

/// Iterator methods that stop at the first match.
const SHORT_CIRCUIT_METHODS: &[&str] = &[
    "any",
    "all",
    "find",
    "find_map",
    "position",
    "rposition",
    "take_while",
    "skip_while",
    "map_while",
    "try_fold",
    "try_for_each",
];

fn is_comparison(op: &syn::BinOp) -> bool {
    matches!(
        op,
        syn::BinOp::Eq(_)
            | syn::BinOp::Ne(_)
            | syn::BinOp::Lt(_)
            | syn::BinOp::Le(_)
            | syn::BinOp::Gt(_)
            | syn::BinOp::Ge(_)
    )
}

/// Whether `node` names a hash: an identifier with `hash` in it.
fn mentions_hash<'ast>(visit: impl FnOnce(&mut IdentNames<'ast>)) -> bool {
    let mut names = IdentNames::default();
    visit(&mut names);
    names
        .0
        .iter()
        .any(|name| name.to_lowercase().contains("hash"))
}

#[derive(Default)]
struct IdentNames<'ast>(Vec<String>, std::marker::PhantomData<&'ast ()>);

impl<'ast> Visit<'ast> for IdentNames<'ast> {
    fn visit_ident(&mut self, ident: &'ast proc_macro2::Ident) {
        self.0.push(ident.to_string());
    }
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        self.0.extend(token_idents(mac.tokens.clone()));
    }
}

/// The identifiers in a macro's tokens (which syn leaves unparsed).
fn token_idents(tokens: proc_macro2::TokenStream) -> Vec<String> {
    tokens
        .into_iter()
        .flat_map(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) => vec![ident.to_string()],
            proc_macro2::TokenTree::Group(group) => token_idents(group.stream()),
            _ => Vec::new(),
        })
        .collect()
}

/// The arguments of a function-like macro, when they are expressions (`assert!(a == b)`).
fn macro_arguments(mac: &syn::Macro) -> Vec<syn::Expr> {
    use syn::punctuated::Punctuated;
    mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        .map(|args| args.into_iter().collect())
        .unwrap_or_default()
}

/// Comparisons with a hash on either side.
struct HashComparisons<'a> {
    file: &'a SourceFile,
    found: Vec<String>,
}

impl<'ast> Visit<'ast> for HashComparisons<'_> {
    fn visit_expr_binary(&mut self, e: &'ast syn::ExprBinary) {
        if is_comparison(&e.op)
            && mentions_hash(|n| {
                n.visit_expr(&e.left);
                n.visit_expr(&e.right);
            })
        {
            self.found
                .push(format!("{}: a comparison operator", self.file.at(e)));
        }
        syn::visit::visit_expr_binary(self, e);
    }

    fn visit_expr_method_call(&mut self, e: &'ast syn::ExprMethodCall) {
        if COMPARING_METHODS.iter().any(|m| e.method == m)
            && mentions_hash(|n| {
                n.visit_expr(&e.receiver);
                e.args.iter().for_each(|a| n.visit_expr(a));
            })
        {
            self.found
                .push(format!("{}: .{}()", self.file.at(e), e.method));
        }
        syn::visit::visit_expr_method_call(self, e);
    }

    fn visit_expr_match(&mut self, e: &'ast syn::ExprMatch) {
        let literal_arm = e.arms.iter().any(|arm| {
            let mut literals = Literals(false);
            literals.visit_pat(&arm.pat);
            literals.0
        });
        if literal_arm && mentions_hash(|n| n.visit_expr(&e.expr)) {
            self.found
                .push(format!("{}: a match against literals", self.file.at(e)));
        }
        syn::visit::visit_expr_match(self, e);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac.path.segments.last().map(|s| s.ident.to_string());
        let comparing = [
            "assert_eq",
            "assert_ne",
            "debug_assert_eq",
            "debug_assert_ne",
        ];
        if name.as_deref().is_some_and(|n| comparing.contains(&n))
            && mentions_hash(|n| n.visit_macro(mac))
        {
            self.found
                .push(format!("{}: {}!", self.file.at(mac), name.unwrap()));
        }
        for argument in macro_arguments(mac) {
            self.visit_expr(&argument);
        }
    }
}

/// Whether a pattern holds a literal.
struct Literals(bool);

impl<'ast> Visit<'ast> for Literals {
    fn visit_expr_lit(&mut self, _: &'ast syn::ExprLit) {
        self.0 = true;
    }
}

/// Data-dependent branches and early exits in a function body, and what it calls.
struct Branches<'a> {
    file: &'a SourceFile,
    found: Vec<String>,
    calls: Vec<String>,
}

impl<'ast> Visit<'ast> for Branches<'_> {
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        let branch = match e {
            syn::Expr::If(_) => Some("if".to_string()),
            syn::Expr::Match(_) => Some("match".to_string()),
            syn::Expr::Try(_) => Some("?".to_string()),
            syn::Expr::Return(_) => Some("return".to_string()),
            syn::Expr::Break(_) => Some("break".to_string()),
            syn::Expr::Continue(_) => Some("continue".to_string()),
            syn::Expr::While(_) => Some("while".to_string()),
            syn::Expr::Loop(_) => Some("loop".to_string()),
            syn::Expr::Macro(_) => Some("a macro".to_string()),
            syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_) | syn::BinOp::Or(_)) => {
                Some("&& or ||".to_string())
            }
            syn::Expr::Binary(b) if is_comparison(&b.op) => {
                Some("a comparison operator".to_string())
            }
            syn::Expr::MethodCall(m)
                if SHORT_CIRCUIT_METHODS
                    .iter()
                    .chain(COMPARING_METHODS)
                    .any(|name| m.method == name) =>
            {
                Some(format!(".{}()", m.method))
            }
            _ => None,
        };
        if let Some(branch) = branch {
            self.found.push(format!("{}: {branch}", self.file.at(e)));
        }
        match e {
            syn::Expr::MethodCall(m) => self.calls.push(m.method.to_string()),
            syn::Expr::Call(call) => {
                if let syn::Expr::Path(path) = &*call.func
                    && let Some(last) = path.path.segments.last()
                {
                    self.calls.push(last.ident.to_string());
                }
            }
            _ => {}
        }
        syn::visit::visit_expr(self, e);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        if local
            .init
            .as_ref()
            .is_some_and(|init| init.diverge.is_some())
        {
            self.found
                .push(format!("{}: let … else", self.file.at(local)));
        }
        syn::visit::visit_local(self, local);
    }
}

/// SQL text built with interpolation that was reviewed: the file, the interpolated
/// expression and why it cannot carry input. Any other interpolation into SQL fails the
/// test until it is reviewed and added here (or, better, turned into a bound parameter).
const REVIEWED_SQL_INTERPOLATIONS: &[(&str, &str, &str)] = &[
    (
        "crates/core/src/config/mod.rs",
        "table",
        "a `&'static str` table name chosen by the caller's code",
    ),
    (
        "crates/core/src/config/retire.rs",
        "table",
        "a table name from `Kind::table`, a constant per record kind",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "rows",
        "one of two constant subqueries (a lead filter's driving rows); the buyer and time are bound",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "direction",
        "`DESC` or `ASC`, from the constant `Order` of the read",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "limit_clause",
        "` LIMIT ?` or nothing; the limit is bound",
    ),
    (
        "crates/core/src/delivery/transaction.rs",
        "direction",
        "`DESC` or `ASC`, a `&'static str` from the two constant calls (`list`, `for_each`)",
    ),
    (
        "crates/core/src/delivery/transaction.rs",
        "limit_clause",
        "` LIMIT ?` or nothing; the limit is bound",
    ),
    (
        "crates/core/src/autodelivery/subscribers.rs",
        "caps::COUNTER_COLUMNS",
        "the constant column list of `cap_usage` that `caps` reads rows with",
    ),
    (
        "crates/core/src/ops/states.rs",
        "table",
        "a table name from the constant list of status columns",
    ),
    (
        "crates/core/src/ops/states.rs",
        "selected",
        "column names from the constant list of status columns",
    ),
    (
        "crates/core/src/ops/states.rs",
        "unknown",
        "conditions on constant column names with one `?` per bound known value",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "body::COLUMN_NAMES",
        "the constant list of the lead columns a stored body is compressed against",
    ),
    (
        "crates/core/src/ingest/store.rs",
        "body::COLUMN_NAMES",
        "the constant list of the lead columns a stored body is compressed against",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "conditions",
        "conditions chosen from constants by the filter's fields, every value bound",
    ),
    (
        "crates/core/src/delivery/transaction.rs",
        "conditions",
        "conditions chosen from constants by the filter's fields, every value bound",
    ),
    (
        "crates/core/src/caps.rs",
        "moved",
        "a counter's column suffix, `count` or `held`, from the two constant calls in `change`",
    ),
    (
        "crates/core/src/caps.rs",
        "other",
        "a counter's column suffix, `held` or `count`, from the two constant calls in `change`",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "quality.as_str()",
        "a quality status name from the enum's constant spelling (`QualityStatus::ALL`), as a literal so each status pair's range of `leads_source_mix` is one index search",
    ),
    (
        "crates/core/src/ingest/view.rs",
        "duplicate.as_str()",
        "a duplicate status name from the enum's constant spelling (unique or review), as a literal like the quality status beside it",
    ),
    (
        "crates/core/src/report/mod.rs",
        "list",
        "the group-by columns a report needs, chosen from a constant list by its dimensions",
    ),
    (
        "crates/core/src/report/mod.rs",
        "table",
        "the aggregate's table of a grain, `report_buckets` or `report_days` (`Grain::table`'s constants)",
    ),
    (
        "crates/core/src/report/mod.rs",
        "time",
        "the time column of a grain's table, `bucket` or `day` (`Grain::table`'s constants)",
    ),
    (
        "crates/core/src/portal/supplier.rs",
        "table",
        "the aggregate's table of a grain, `report_buckets` or `report_days` (`Grain::table`'s constants)",
    ),
    (
        "crates/core/src/portal/supplier.rs",
        "column",
        "the time column of a grain's table, `bucket` or `day` (`Grain::table`'s constants)",
    ),
    (
        "crates/edge/src/console/pages/sources.rs",
        "table",
        "the aggregate's table of a grain, `report_buckets` or `report_days` (`Grain::table`'s constants)",
    ),
    (
        "crates/edge/src/console/pages/sources.rs",
        "time",
        "the time column of a grain's table, `bucket` or `day` (`Grain::table`'s constants)",
    ),
    (
        "crates/store/src/db/migrate.rs",
        "table",
        "a table of migration 20's constant list of tables that name leads or lead requests",
    ),
    (
        "crates/store/src/db/migrate.rs",
        "set",
        "the constant assignments of that table's id columns in the same list",
    ),
];

#[test]
fn sql_is_built_only_from_constants_and_reviewed_pieces() {
    let keywords = [
        "SELECT ",
        "INSERT ",
        "UPDATE ",
        "DELETE ",
        " WHERE ",
        " FROM ",
        " VALUES",
        "PRAGMA ",
        "CREATE ",
        "DROP ",
        " SET ",
        "SAVEPOINT ",
    ];
    let mut used = vec![false; REVIEWED_SQL_INTERPOLATIONS.len()];
    let mut unreviewed = Vec::new();
    let mut sql_sites = 0;
    // Unit-test files (`tests.rs`) build SQL of their own to set up cases.
    let sources = source::all_rust_files()
        .into_iter()
        .filter(|(path, _)| path.file_name().is_some_and(|n| n != "tests.rs"));
    for (file, text) in sources {
        let code = production_code(&text);
        let file_name = file.to_string_lossy().replace('\\', "/");
        for macro_name in ["format!(", "write!(", "writeln!(", "format_args!("] {
            for (at, _) in code.match_indices(macro_name) {
                let arguments = balanced(&code[at + macro_name.len() - 1..]);
                let Some(template) = first_string_literal(arguments) else {
                    continue;
                };
                if !keywords.iter().any(|k| template.contains(k)) {
                    continue;
                }
                sql_sites += 1;
                for piece in interpolations(template, arguments) {
                    let constant = piece
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                    if constant {
                        continue;
                    }
                    match REVIEWED_SQL_INTERPOLATIONS
                        .iter()
                        .position(|(f, p, _)| file_name.ends_with(f) && *p == piece)
                    {
                        Some(index) => used[index] = true,
                        None => {
                            unreviewed.push(format!("{file_name}: {{{piece}}} in {template:?}"))
                        }
                    }
                }
            }
        }
        for (at, _) in code.match_indices("push_str(") {
            let argument = balanced(&code[at + "push_str".len()..]);
            assert!(
                !keywords.iter().any(|k| argument.contains(k)),
                "{file_name}: SQL assembled with push_str: {argument}"
            );
        }
    }
    assert!(
        sql_sites >= 10,
        "the scan finds the SQL built with format! ({sql_sites} sites)"
    );
    assert!(
        unreviewed.is_empty(),
        "SQL with unreviewed interpolation (bind a parameter, or review and list it):\n{}",
        unreviewed.join("\n")
    );
    for (index, (file, piece, _)) in REVIEWED_SQL_INTERPOLATIONS.iter().enumerate() {
        assert!(used[index], "stale review entry: {file} {piece}");
    }
}

/// The file without its unit tests: a `#[cfg(test)]` module comes last in a file by our
/// convention.
fn production_code(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// From an opening bracket to its partner (brackets inside string literals are skipped).
fn balanced(text: &str) -> &str {
    let (open, close) = match text.as_bytes()[0] {
        b'(' => (b'(', b')'),
        b'{' => (b'{', b'}'),
        _ => return "",
    };
    let mut depth = 0;
    let mut in_string = false;
    let mut escaped = false;
    for (index, byte) in text.bytes().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b if b == open => depth += 1,
            b if b == close => {
                depth -= 1;
                if depth == 0 {
                    return &text[..=index];
                }
            }
            _ => {}
        }
    }
    text
}

/// The first string literal (plain or raw) in `text`, without its quotes.
fn first_string_literal(text: &str) -> Option<&str> {
    let start = text.find('"')?;
    let raw = text[..start].ends_with("r#");
    let rest = &text[start + 1..];
    let end = if raw {
        rest.find("\"#")?
    } else {
        let mut escaped = false;
        rest.char_indices()
            .find(|&(_, c)| {
                let end = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                end
            })?
            .0
    };
    Some(&rest[..end])
}

/// What a format template interpolates: inline names (`{COLUMNS}`) and, for each `{}`, the
/// positional argument after the template.
fn interpolations(template: &str, arguments: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut positional = 0;
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if rest[open..].starts_with("{{") {
            rest = &rest[open + 2..];
            continue;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let inner = &rest[open + 1..open + close];
        let name = inner.split(':').next().unwrap_or("");
        if name.is_empty() {
            positional += 1;
        } else {
            pieces.push(name.to_string());
        }
        rest = &rest[open + close + 1..];
    }
    if positional > 0 {
        let after_template = arguments
            .find(template)
            .map(|at| &arguments[at + template.len()..])
            .unwrap_or("");
        let inner = after_template
            .trim_start_matches(['"', '#'])
            .trim_end_matches(')');
        pieces.extend(
            split_arguments(inner)
                .into_iter()
                .filter(|a| !a.is_empty())
                .take(positional),
        );
    }
    pieces
}

/// Top-level comma-separated arguments.
fn split_arguments(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    let mut in_string = false;
    for c in text.chars() {
        match c {
            '"' => in_string = !in_string,
            '(' | '[' | '{' if !in_string => depth += 1,
            ')' | ']' | '}' if !in_string => depth -= 1,
            ',' if depth == 0 && !in_string => {
                parts.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current.trim().to_string());
    parts
}
