//! README.md's five-minute tour runs as pasted in bash: the test takes the tour's shell
//! block from the README and runs it with the built binary on PATH. Only what a test must
//! change is changed: the database path (a temp file), the ports (the server and its
//! console listen on port 0, and the tour goes on with the address the server printed once
//! it has), and `cargo build` is left out (the test runs the binary cargo built for it).

use std::path::Path;
use std::process::Command;

use crate::util::TempDb;

/// The first ```sh block after the `## Five-minute tour` heading.
fn tour() -> String {
    let readme = include_str!("../README.md");
    let section = readme
        .split_once("## Five-minute tour")
        .expect("the README has the tour")
        .1;
    let block = section
        .split_once("```sh\n")
        .expect("the tour has a shell block")
        .1;
    block
        .split_once("\n```")
        .expect("the block ends")
        .0
        .to_string()
}

#[test]
fn the_readme_tour_runs_as_pasted() {
    let tour = tour();
    assert!(tour.contains("leadrelay serve &"), "{tour}");
    let db = TempDb::new();
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
    let script: String = tour
        .lines()
        .filter(|line| !line.starts_with("cargo build"))
        .map(|line| match line.split_once('#') {
            Some((command, _)) if command.trim() == "leadrelay serve &" => serve,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
        .replace("/tmp/tour.db", &db.path.display().to_string())
        .replace("127.0.0.1:8080", "$ADDRESS");
    assert!(
        script.contains("serve.out"),
        "the tour starts the server: {tour}"
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_leadrelay"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary is in a folder").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Stop at the first failure; whatever happens, the server the tour started stops with
    // the shell.
    let script =
        format!("set -eo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}");
    let output = Command::new("bash")
        .arg("-c")
        .arg(&script)
        // Not the repository: `$PWD/target/release` must not hold an older binary.
        .current_dir(db.dir.path())
        .env("PATH", path)
        .env("LEADRELAY_LISTEN", "127.0.0.1:0")
        .env("LEADRELAY_CONSOLE_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .env_remove("LEADRELAY_DB")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the tour failed:\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
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

#[test]
fn the_readme_links_only_to_files_in_the_repository() {
    let readme = include_str!("../README.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut links = 0;
    for (at, _) in readme.match_indices("](") {
        let target = readme[at + 2..].split(')').next().unwrap_or_default();
        if target.starts_with("http://")
            || target.starts_with("https://")
            || target.starts_with('#')
        {
            continue;
        }
        links += 1;
        let file = target.split('#').next().unwrap_or_default();
        if file.starts_with("..") || !root.join(file).exists() {
            broken.push(target.to_string());
        }
    }
    assert!(links >= 3, "the scan finds the links: {links}");
    assert!(
        !readme.contains("../shared") && !readme.contains("DESIGN.md"),
        "the README names design documents a clone does not have"
    );
    assert!(
        broken.is_empty(),
        "links to files not in the repository: {broken:?}"
    );
}
