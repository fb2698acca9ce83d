//! README.md's five-minute tour runs as pasted in bash: the test takes the tour's shell
//! block from the README and runs it with the built binary on PATH. Only what a test must
//! change is changed: the database path (a temp file) and the port (a free one instead of
//! 8080), and `cargo build` is left out (the test runs the binary cargo built for it).

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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let script: String = tour
        .lines()
        .filter(|line| !line.starts_with("cargo build"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("/tmp/tour.db", &db.path.display().to_string())
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"));
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
        .env("LEADRELAY_LISTEN", format!("127.0.0.1:{port}"))
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
