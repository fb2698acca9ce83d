//! README.md and the pages under docs/ run as pasted, show only commands the binary takes,
//! and link only to files in the repository.
//!
//! - The README's five-minute tour runs in bash with the built binary on PATH. Only what a
//!   test must change is changed: the database path (a temp file), the ports (the server
//!   and its console listen on port 0, and the tour goes on with the address the server
//!   printed once it has), and `cargo build` is left out (the test runs the binary cargo
//!   built for it).
//! - Each docs page's `sh` blocks run the same way after the tour, with its server still
//!   running, from a directory where `docs/` is the repository's (the pages read
//!   `docs/examples/`). Blocks that need a server machine are fenced `text`.
//! - Every `leadrelay …` command in any block of these files parses: the binary answers
//!   `leadrelay WORDS… --help` (clap checks each flag and value before it prints the help).
//! - The command reference of docs/operations.md names every command of the binary, and only
//!   commands and flags the binary has.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::TempDb;

const README: &str = include_str!("../README.md");

/// The docs pages, each with what its examples must print.
const PAGES: [(&str, &str, &[&str]); 8] = [
    (
        "ingest.md",
        include_str!("../docs/ingest.md"),
        &[
            r#""externalId":"f-1001""#,
            "published mapping version 1",
            r#""externalId":"SP-10017""#,
            r#""pingId":"png_"#,
        ],
    ),
    (
        "delivery.md",
        include_str!("../docs/delivery.md"),
        &[
            "pricing: bid",
            r#""state":"#,
            "X-Api-Key: [secret crm-key]",
            "Content-Type: application/x-www-form-urlencoded",
        ],
    ),
    (
        "lifecycle.md",
        include_str!("../docs/lifecycle.md"),
        &[
            r#""status":"acknowledged""#,
            "cancellation_pending",
            r#""code":"cancellation_confirmed""#,
        ],
    ),
    (
        "money.md",
        include_str!("../docs/money.md"),
        &["187.5", "credit note 2026-17", "returnRate"],
    ),
    (
        "privacy.md",
        include_str!("../docs/privacy.md"),
        &[r#""erasureId": "ers_"#, r#""noop": false"#, "dryRun: true"],
    ),
    (
        "operations.md",
        include_str!("../docs/operations.md"),
        &["result: ok", "leadrelay_outbox_events", r#""openapi""#],
    ),
    (
        "console.md",
        include_str!("../docs/console.md"),
        &["token: lro_"],
    ),
    (
        "portal.md",
        include_str!("../docs/portal.md"),
        &["token: lrp_", "revokedAt: 20"],
    ),
];

/// The fenced blocks of a Markdown text: (info string, body).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), Vec::new())),
            (Some(_), Some(_)) => {
                let (info, body) = open.take().expect("a block is open");
                found.push((info, body.join("\n")));
            }
            (Some((_, body)), None) => body.push(line),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a block is not closed");
    found
}

/// The first ```sh block after the `## Five-minute tour` heading.
fn tour() -> String {
    let section = README
        .split_once("## Five-minute tour")
        .expect("the README has the tour")
        .1;
    blocks(section)
        .into_iter()
        .find(|(info, _)| info == "sh")
        .expect("the tour has a shell block")
        .1
}

/// The tour as a script for `db`, and `then` run after it with the tour's server still
/// running (the tour's own `kill %1` is left out when there is more to run).
fn script(db: &Path, then: &str) -> String {
    // The tour's `serve &` with its output kept, then a wait for the address it prints: it
    // ends the tour when the server stops instead (a console port taken by another
    // program, say), so the tour's curl never waits for a server that is not coming.
    // The two-minute bound is only for a server that neither listens nor stops.
    let serve = "leadrelay serve > serve.out &\n\
        for wait in $(seq 2400); do\n\
        \x20 grep -q 'listening on' serve.out && break\n\
        \x20 kill -0 $! 2>/dev/null || { echo 'the server stopped:' >&2; cat serve.out >&2; exit 1; }\n\
        \x20 sleep 0.05\n\
        done\n\
        grep -q 'listening on' serve.out || { echo 'no address in 2 minutes' >&2; exit 1; }\n\
        ADDRESS=$(grep -o 'listening on http://[0-9.:]*' serve.out | cut -d/ -f3)";
    let tour = tour();
    assert!(tour.contains("leadrelay serve &"), "{tour}");
    let script: String = tour
        .lines()
        .filter(|line| !line.starts_with("cargo build"))
        .filter(|line| then.is_empty() || !line.starts_with("kill %1"))
        .map(|line| match line.split_once('#') {
            Some((command, _)) if command.trim() == "leadrelay serve &" => serve,
            _ => line,
        })
        .chain(then.lines())
        .collect::<Vec<_>>()
        .join("\n")
        .replace("/tmp/tour.db", &db.display().to_string())
        .replace("127.0.0.1:8080", "$ADDRESS");
    assert!(
        script.contains("serve.out"),
        "the tour starts the server: {tour}"
    );
    // Stop at the first failure; whatever happens, the server the tour started stops with
    // the shell.
    format!("set -eo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}")
}

/// The test's own binary.
fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_leadrelay"))
}

/// Runs `script` in bash in `db`'s directory with the binary on PATH; its stdout.
fn run(db: &TempDb, script: &str) -> String {
    let bin = binary();
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary is in a folder").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .arg("-c")
        .arg(script)
        // Not the repository: `$PWD/target/release` must not hold an older binary.
        .current_dir(db.dir.path())
        .env("PATH", path)
        .env("LEADRELAY_LISTEN", "127.0.0.1:0")
        .env("LEADRELAY_CONSOLE_LISTEN", "127.0.0.1:0")
        .env("LEADRELAY_PORTAL_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .env("CRM_KEY", "the-crm-key")
        .env_remove("LEADRELAY_DB")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the script failed:\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    stdout
}

#[test]
fn the_readme_tour_runs_as_pasted() {
    let db = TempDb::new();
    let stdout = run(&db, &script(&db.path, ""));
    // What the tour shows happened: the health answer, the lead taken with the captured
    // secret, the new terms, the secret rotated with an overlap, the product as JSON.
    for expected in [
        r#""status":"ok""#,
        r#""status":"accepted""#,
        "price: 27.5",
        "filters: country=DE",
        "oldValidUntil: 20",
        r#""slug": "solar""#,
        "enabled: true",
    ] {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }
}

/// Runs the `sh` blocks of the page `name` after the tour, and checks what they print.
fn page_runs_as_pasted(name: &str) {
    let (_, page, expected) = PAGES
        .iter()
        .find(|(page, _, _)| *page == name)
        .expect("a page of PAGES");
    let examples: Vec<String> = blocks(page)
        .into_iter()
        .filter(|(info, _)| info == "sh")
        .map(|(_, body)| body)
        .collect();
    assert!(!examples.is_empty(), "{name} has no sh block");
    let db = TempDb::new();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    std::os::unix::fs::symlink(&docs, db.dir.path().join("docs")).expect("docs/ is linked");
    let stdout = run(&db, &script(&db.path, &examples.join("\n")));
    for expected in *expected {
        assert!(
            stdout.contains(expected),
            "{name}: {expected} missing:\n{stdout}"
        );
    }
    // An HTTP refusal does not fail curl: the answers must hold no error body.
    assert!(
        !stdout.contains(r#""error":{"#),
        "{name}: an example was refused:\n{stdout}"
    );
}

#[test]
fn docs_ingest_runs_as_pasted() {
    page_runs_as_pasted("ingest.md");
}

#[test]
fn docs_delivery_runs_as_pasted() {
    page_runs_as_pasted("delivery.md");
}

#[test]
fn docs_lifecycle_runs_as_pasted() {
    page_runs_as_pasted("lifecycle.md");
}

#[test]
fn docs_money_runs_as_pasted() {
    page_runs_as_pasted("money.md");
}

#[test]
fn docs_privacy_runs_as_pasted() {
    page_runs_as_pasted("privacy.md");
}

#[test]
fn docs_operations_runs_as_pasted() {
    page_runs_as_pasted("operations.md");
}

#[test]
fn docs_console_runs_as_pasted() {
    page_runs_as_pasted("console.md");
}

#[test]
fn docs_portal_runs_as_pasted() {
    page_runs_as_pasted("portal.md");
}

#[test]
fn the_docs_pages_are_the_files_of_docs() {
    let on_disk: BTreeSet<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs"))
            .expect("docs/ is read")
            .map(|entry| {
                entry
                    .expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.ends_with(".md"))
            .collect();
    let tested: BTreeSet<String> = PAGES.iter().map(|(name, _, _)| name.to_string()).collect();
    assert_eq!(on_disk, tested, "every page under docs/ is tested here");
    for name in &on_disk {
        assert!(
            README.contains(&format!("](docs/{name})")),
            "the README's map links docs/{name}"
        );
    }
}

/// The words of the command that starts `text` (after the program's name), split as bash
/// splits them, up to the end of the command (`|`, `;`, `&`, a redirection, a comment or
/// the `)` that closes a command substitution). A `$(…)` stays part of its word.
fn command_words(text: &str) -> Vec<String> {
    /// Copies a `$(…)` (its `$` already read) into `word`.
    fn substitution(chars: &mut std::iter::Peekable<std::str::Chars>, word: &mut String) {
        word.push('$');
        let mut depth = 0;
        for c in chars.by_ref() {
            word.push(c);
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        '$' if chars.peek() == Some(&'(') => substitution(&mut chars, &mut word),
                        c => word.push(c),
                    }
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                in_word = true;
                substitution(&mut chars, &mut word);
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '|' | ';' | '&' | '>' | '<' | ')' => break,
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Every `leadrelay …` command in `block`, as the words after `leadrelay`: where a shell
/// runs it (at the start of a line or after `$ `, `$(`, `|`, `;`, `&&`, `sudo [-u USER]` or
/// an environment assignment), not where it is a word of other text.
fn commands_in(block: &str) -> Vec<Vec<String>> {
    let joined = block.replace("\\\n", " ");
    let mut commands = Vec::new();
    for line in joined.lines() {
        for (at, _) in line.match_indices("leadrelay ") {
            let before = &line[..at];
            if before.ends_with(|c: char| !c.is_whitespace() && c != '(') {
                continue;
            }
            let before = before.trim_end();
            let previous: Vec<&str> = before.split_whitespace().collect();
            let runs = before.is_empty()
                || before == "$"
                || before.ends_with("$(")
                || before.ends_with('|')
                || before.ends_with(';')
                || before.ends_with("&&")
                || previous.last() == Some(&"sudo")
                || previous.ends_with(&["sudo", "-u", "leadrelay"])
                || previous.last().is_some_and(|word| {
                    word.split_once('=').is_some_and(|(name, _)| {
                        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    })
                });
            if !runs {
                continue;
            }
            let words = command_words(&line[at + "leadrelay ".len()..]);
            // The synopsis line of docs/operations.md (`leadrelay [--db PATH] …`).
            if words.first().is_some_and(|word| word.starts_with('[')) {
                continue;
            }
            commands.push(words);
        }
    }
    commands
}

/// `leadrelay WORDS… --help`: None when the binary takes it, else why not.
fn refused(words: &[String]) -> Option<String> {
    let output = Command::new(binary())
        .args(words)
        .arg("--help")
        .env_remove("LEADRELAY_DB")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.contains("Usage:") {
        return None;
    }
    Some(format!(
        "leadrelay {} --help: {}{}",
        words.join(" "),
        stdout,
        String::from_utf8_lossy(&output.stderr)
    ))
}

#[test]
fn every_command_shown_parses() {
    let mut problems = Vec::new();
    let mut count = 0;
    let files = std::iter::once(("README.md", README))
        .chain(PAGES.iter().map(|(name, page, _)| (*name, *page)));
    for (name, text) in files {
        for (_, block) in blocks(text) {
            for words in commands_in(&block) {
                count += 1;
                if let Some(problem) = refused(&words) {
                    problems.push(format!("{name}: {problem}"));
                }
            }
        }
    }
    assert!(count > 80, "the scan finds the commands: {count}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scan_finds_commands_where_a_shell_runs_them() {
    let block = "leadrelay lead show \"$(leadrelay lead list --get 0.id)\" --body # a comment\n\
        $ leadrelay mapping set s --file 'a b.json'\n\
        try it:     leadrelay mapping preview s --file SAMPLE\n\
        printf %s \"$K\" | leadrelay buyer integration secret b k --value -\n\
        sudo -u leadrelay LEADRELAY_DB=/var/lib/leadrelay/leadrelay.db leadrelay workspace list\n\
        leadrelay backup --out b/leadrelay-$(date +%F).db > out.txt\n\
        leadrelay buyer create --name N \\\n    --webhook-url https://x.example/leads";
    let words = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(
        commands_in(block),
        vec![
            words(&[
                "lead",
                "show",
                "$(leadrelay lead list --get 0.id)",
                "--body"
            ]),
            words(&["lead", "list", "--get", "0.id"]),
            words(&["mapping", "set", "s", "--file", "a b.json"]),
            words(&["buyer", "integration", "secret", "b", "k", "--value", "-"]),
            words(&["workspace", "list"]),
            words(&["backup", "--out", "b/leadrelay-$(date +%F).db"]),
            words(&[
                "buyer",
                "create",
                "--name",
                "N",
                "--webhook-url",
                "https://x.example/leads"
            ]),
        ]
    );
}

/// The command paths of the binary, from its help (`buyer terms set`, `init`, …): the
/// commands that have no commands of their own.
fn leaf_commands(path: &[String], found: &mut BTreeSet<String>) {
    let output = Command::new(binary())
        .args(path)
        .arg("--help")
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&output.stdout);
    let subcommands: Vec<String> = help
        .split_once("Commands:\n")
        .map(|(_, after)| {
            after
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .filter_map(|line| line.split_whitespace().next())
                .filter(|name| *name != "help")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if subcommands.is_empty() {
        found.insert(path.join(" "));
    }
    for sub in subcommands {
        let mut longer = path.to_vec();
        longer.push(sub);
        leaf_commands(&longer, found);
    }
}

/// The long flags a help text lists.
fn flags_in(help: &str) -> BTreeSet<String> {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == '=')
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| {
            word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .collect()
}

#[test]
fn the_command_reference_names_every_command_and_only_real_flags() {
    let (_, operations, _) = PAGES
        .iter()
        .find(|(name, _, _)| *name == "operations.md")
        .expect("the operations page");
    let synopsis = blocks(operations)
        .into_iter()
        .map(|(_, body)| body)
        .find(|body| body.starts_with("leadrelay [--db PATH]"))
        .expect("docs/operations.md has the command reference");
    // Entries: a line indented two spaces, with the lines indented further below it.
    let mut entries: Vec<String> = Vec::new();
    for line in synopsis.lines().skip(1) {
        if line.starts_with("   ") {
            entries
                .last_mut()
                .expect("a continuation follows an entry")
                .push_str(line);
        } else {
            entries.push(line.to_string());
        }
    }
    let global = flags_in(synopsis.lines().next().expect("the first line"));
    let mut documented = BTreeSet::new();
    let mut problems = Vec::new();
    for entry in &entries {
        // The path: the leading words of lower-case names, `a|b` naming alternatives.
        let mut paths = vec![Vec::<String>::new()];
        for word in entry.split_whitespace() {
            let names: Vec<&str> = word.split('|').collect();
            let is_name = |name: &&str| {
                name.starts_with(|c: char| c.is_ascii_lowercase())
                    && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            };
            if !names.iter().all(is_name) {
                break;
            }
            paths = paths
                .iter()
                .flat_map(|path| {
                    names.iter().map(move |name| {
                        let mut longer = path.clone();
                        longer.push(name.to_string());
                        longer
                    })
                })
                .collect();
        }
        for path in paths {
            let output = Command::new(binary())
                .args(&path)
                .arg("--help")
                .output()
                .expect("the binary runs");
            let help = String::from_utf8_lossy(&output.stdout);
            if !output.status.success() || !help.contains("Usage:") {
                problems.push(format!("no command `leadrelay {}`", path.join(" ")));
                continue;
            }
            let known = flags_in(&help);
            for flag in flags_in(entry) {
                if !known.contains(&flag) && !global.contains(&flag) {
                    problems.push(format!("`leadrelay {}` has no {flag}", path.join(" ")));
                }
            }
            documented.insert(path.join(" "));
        }
    }
    let mut all = BTreeSet::new();
    leaf_commands(&[], &mut all);
    assert!(all.len() > 60, "the walk finds the commands: {}", all.len());
    for command in all.difference(&documented) {
        problems.push(format!("`leadrelay {command}` is not in the reference"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The anchors GitHub makes of a Markdown text's headings.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut in_block = false;
    let mut found = BTreeSet::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim().to_lowercase();
        let anchor: String = heading
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        found.insert(anchor);
    }
    found
}

/// The relative links of `text` (in `dir`, relative to the repository) that name no file of
/// the repository or no heading of the file they name.
fn broken_links(root: &Path, dir: &Path, text: &str) -> (usize, Vec<String>) {
    let mut broken = Vec::new();
    let mut links = 0;
    for (at, _) in text.match_indices("](") {
        let target = text[at + 2..].split(')').next().unwrap_or_default();
        if target.starts_with("http://") || target.starts_with("https://") {
            continue;
        }
        links += 1;
        let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
        let path: PathBuf = if file.is_empty() {
            dir.to_path_buf()
        } else {
            root.join(dir).join(file)
        };
        let Ok(resolved) = path.canonicalize() else {
            broken.push(target.to_string());
            continue;
        };
        let inside = resolved.starts_with(root.canonicalize().expect("the repository"));
        let anchored = anchor.is_empty() || {
            let named = if file.is_empty() {
                text.to_string()
            } else {
                std::fs::read_to_string(&resolved).unwrap_or_default()
            };
            anchors(&named).contains(anchor)
        };
        if !inside || !anchored {
            broken.push(target.to_string());
        }
    }
    (links, broken)
}

#[test]
fn the_readme_and_docs_link_only_to_files_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (links, broken) = broken_links(root, Path::new(""), README);
    assert!(links >= 10, "the scan finds the README's links: {links}");
    assert!(
        broken.is_empty(),
        "README.md links to what the repository does not have: {broken:?}"
    );
    for text in std::iter::once(README).chain(PAGES.iter().map(|(_, page, _)| *page)) {
        assert!(
            !text.contains("../shared") && !text.contains("DESIGN.md"),
            "the documents name design documents a clone does not have"
        );
    }
    for (name, page, _) in PAGES {
        let (links, broken) = broken_links(root, Path::new("docs"), page);
        assert!(links >= 2, "docs/{name}: the scan finds the links: {links}");
        assert!(
            broken.is_empty(),
            "docs/{name} links to what the repository does not have: {broken:?}"
        );
    }
}

#[test]
fn the_documents_shown_are_the_example_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut compared = 0;
    for (name, page, _) in PAGES {
        // A ```json block right after prose that links an example file shows that file.
        let mut rest = page;
        while let Some(at) = rest.find("```json\n") {
            let prose = rest[..at].rsplit("```").next().unwrap_or_default();
            let body = rest[at + "```json\n".len()..]
                .split_once("\n```")
                .expect("the block ends")
                .0;
            if let Some((_, link)) = prose.rsplit_once("](examples/") {
                let file = link.split(')').next().unwrap_or_default();
                let shown: serde_json::Value = serde_json::from_str(body)
                    .unwrap_or_else(|e| panic!("docs/{name}: the block for {file}: {e}"));
                let text = std::fs::read_to_string(root.join("docs/examples").join(file))
                    .unwrap_or_else(|e| panic!("docs/examples/{file}: {e}"));
                let on_disk: serde_json::Value = serde_json::from_str(&text).expect("JSON");
                assert_eq!(
                    shown, on_disk,
                    "docs/{name} shows docs/examples/{file} as it is"
                );
                compared += 1;
            }
            rest = &rest[at + "```json\n".len()..];
            rest = rest.split_once("\n```").map_or("", |(_, after)| after);
        }
    }
    assert_eq!(
        compared, 4,
        "the sample, the mapping and the two integrations are compared"
    );
}
