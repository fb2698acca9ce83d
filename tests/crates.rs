//! The crate graph is the architecture (ARCHITECTURE.md, "Crate map"): read from
//! `cargo metadata`, each crate depends only on crates below it, the rules crate on no
//! storage, HTTP or async runtime, and only the edge crate on hyper. Plain `cargo test`
//! (and `cargo clippy`) at the root covers every crate.

use serde_json::Value;

/// The workspace's crates, bottom to top: a crate may depend only on crates before it.
const LAYERS: &[&str] = &[
    "leadrelay-rules",
    "leadrelay-store",
    "leadrelay-core",
    "leadrelay-edge",
    "leadrelay",
];

/// The HTTP stack: only the edge crate (and the binary above it) may depend on it.
const HTTP: &[&str] = &[
    "hyper",
    "hyper-util",
    "hyper-rustls",
    "http-body-util",
    "tower-service",
    "maud",
];

/// What each crate must not depend on, beyond [`HTTP`] below the edge, and why.
const BANNED: &[(&str, &[&str], &str)] = &[(
    "leadrelay-rules",
    &["rusqlite", "r2d2", "r2d2_sqlite", "tokio"],
    "the rules are pure: no storage, no async runtime",
)];

/// One package as `cargo metadata` describes it: its name and the names of its normal
/// and build dependencies (dev-dependencies serve its tests only).
struct Package {
    name: String,
    dependencies: Vec<String>,
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let metadata = metadata();
    let packages: Vec<Package> = metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages")
        .iter()
        .map(|package| Package {
            name: package["name"].as_str().expect("a name").to_string(),
            dependencies: package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|dep| dep["kind"].as_str() != Some("dev"))
                .map(|dep| dep["name"].as_str().expect("a name").to_string())
                .collect(),
        })
        .collect();
    assert!(packages.len() >= 5, "the workspace has its crates");
    let broken = violations(&packages);
    assert!(
        broken.is_empty(),
        "the crate graph breaks the architecture:\n{}",
        broken.join("\n")
    );
}

#[test]
fn plain_cargo_commands_at_the_root_cover_every_crate() {
    let metadata = metadata();
    let ids = |key: &str| -> Vec<String> {
        let mut ids: Vec<String> = metadata[key]
            .as_array()
            .unwrap_or_else(|| panic!("cargo metadata has {key}"))
            .iter()
            .map(|id| id.as_str().expect("an id").to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids("workspace_default_members"),
        ids("workspace_members"),
        "[workspace] default-members names every member, so `cargo test` runs every crate's tests"
    );
}

#[test]
fn the_check_finds_a_seeded_violation_of_each_kind() {
    let package = |name: &str, dependencies: &[&str]| Package {
        name: name.to_string(),
        dependencies: dependencies.iter().map(|d| d.to_string()).collect(),
    };
    let broken = violations(&[
        package("leadrelay-rules", &["rusqlite", "jiff"]),
        package("leadrelay-store", &["leadrelay-core", "hyper"]),
        package("leadrelay-core", &["leadrelay-store", "http-body-util"]),
        package("leadrelay-edge", &["leadrelay-core", "hyper"]),
        package("leadrelay-portal", &["leadrelay-core"]),
    ]);
    assert_eq!(
        broken,
        [
            "leadrelay-rules depends on rusqlite: the rules are pure: no storage, no async runtime",
            "leadrelay-store depends on leadrelay-core, which is not below it",
            "leadrelay-store depends on hyper: only the edge crate speaks HTTP",
            "leadrelay-core depends on http-body-util: only the edge crate speaks HTTP",
            "leadrelay-portal is a crate of no layer: place it in LAYERS (tests/crates.rs)",
        ]
    );
}

/// Every way `packages` break the layering, one line each.
fn violations(packages: &[Package]) -> Vec<String> {
    let layer = |name: &str| LAYERS.iter().position(|l| *l == name);
    let edge = layer("leadrelay-edge").expect("the edge is a layer");
    let mut broken = Vec::new();
    for package in packages {
        let Some(own) = layer(&package.name) else {
            broken.push(format!(
                "{} is a crate of no layer: place it in LAYERS (tests/crates.rs)",
                package.name
            ));
            continue;
        };
        for dep in &package.dependencies {
            if let Some(theirs) = layer(dep)
                && theirs >= own
            {
                broken.push(format!(
                    "{} depends on {dep}, which is not below it",
                    package.name
                ));
            }
            if own < edge && HTTP.contains(&dep.as_str()) {
                broken.push(format!(
                    "{} depends on {dep}: only the edge crate speaks HTTP",
                    package.name
                ));
            }
            for (name, banned, why) in BANNED {
                if *name == package.name && banned.contains(&dep.as_str()) {
                    broken.push(format!("{} depends on {dep}: {why}", package.name));
                }
            }
        }
    }
    broken
}

/// `cargo metadata` of the workspace, without its dependencies' packages.
fn metadata() -> Value {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}
