//! `packaging/`: the systemd units, the settings file and the deb metadata. The units are
//! checked by reading them and by `systemd-analyze`, which the suite requires (Debian
//! package `systemd`; `.ci/run` installs it when it is missing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|e| panic!("{relative} cannot be read: {e}"))
}

/// A unit file as `section → key → values` (a key may be given several times).
type Unit = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn parse_unit(text: &str) -> Unit {
    let mut unit = Unit::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a key=value line: {line}"));
        unit.entry(section.clone())
            .or_default()
            .entry(key.to_string())
            .or_default()
            .push(value.to_string());
    }
    unit
}

fn values<'a>(unit: &'a Unit, section: &str, key: &str) -> &'a [String] {
    unit.get(section)
        .and_then(|keys| keys.get(key))
        .map_or(&[], Vec::as_slice)
}

#[test]
fn the_service_unit_is_hardened_and_complete() {
    let unit = parse_unit(&read("packaging/leadrelay.service"));
    let required = [
        ("User", "leadrelay"),
        ("Group", "leadrelay"),
        ("StateDirectory", "leadrelay"),
        ("StateDirectoryMode", "0700"),
        ("UMask", "0077"),
        ("Restart", "on-failure"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectKernelLogs", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictNamespaces", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("LockPersonality", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
        ("CapabilityBoundingSet", ""),
        ("SystemCallArchitectures", "native"),
        ("SystemCallFilter", "@system-service"),
        ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
        ("EnvironmentFile", "-/etc/default/leadrelay"),
        (
            "Environment",
            "LEADRELAY_DB=/var/lib/leadrelay/leadrelay.db",
        ),
    ];
    for (key, value) in required {
        assert!(
            values(&unit, "Service", key).iter().any(|v| v == value),
            "[Service] lacks {key}={value}"
        );
    }
    let exec = &values(&unit, "Service", "ExecStart")[0];
    assert!(exec.starts_with("/usr/bin/leadrelay serve"), "{exec}");
    // Shutdown drains requests for up to 30 s: systemd must wait longer before SIGKILL.
    let stop: u32 = values(&unit, "Service", "TimeoutStopSec")[0]
        .parse()
        .unwrap();
    assert!(stop > 30, "TimeoutStopSec={stop}");
    assert_eq!(values(&unit, "Install", "WantedBy"), ["multi-user.target"]);
    assert!(
        values(&unit, "Unit", "After")
            .iter()
            .any(|v| v.contains("network-online.target"))
    );
}

#[test]
fn the_backup_timer_runs_the_backup_service() {
    let timer = parse_unit(&read("packaging/leadrelay-backup.timer"));
    assert!(!values(&timer, "Timer", "OnCalendar").is_empty());
    assert_eq!(values(&timer, "Timer", "Persistent"), ["true"]);
    let service = parse_unit(&read("packaging/leadrelay-backup.service"));
    assert_eq!(values(&service, "Service", "Type"), ["oneshot"]);
    assert_eq!(values(&service, "Service", "User"), ["leadrelay"]);
    let exec = values(&service, "Service", "ExecStart").join(" ");
    assert!(exec.contains("leadrelay backup --force --out"), "{exec}");
    let post = values(&service, "Service", "ExecStartPost").join(" ");
    assert!(post.contains(" check"), "the copy is checked: {post}");
}

/// Copies the units to `dir` with the real binary in place of `/usr/bin/leadrelay`, since
/// `systemd-analyze verify` checks that the program exists.
fn units_for_verify(dir: &Path) -> Vec<PathBuf> {
    let binary = env!("CARGO_BIN_EXE_leadrelay");
    [
        "leadrelay.service",
        "leadrelay-backup.service",
        "leadrelay-backup.timer",
    ]
    .iter()
    .map(|name| {
        let text = read(&format!("packaging/{name}")).replace("/usr/bin/leadrelay", binary);
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    })
    .collect()
}

/// Runs `systemd-analyze ARGS`. A machine without it fails the test rather than skipping
/// the check: a skipped check passed unnoticed before.
fn systemd_analyze(args: &[&std::ffi::OsStr]) -> std::process::Output {
    match Command::new("systemd-analyze").args(args).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "systemd-analyze is not installed: the units cannot be verified \
             (apt-get install systemd; .ci/run does this)"
        ),
        Err(e) => panic!("systemd-analyze cannot run: {e}"),
    }
}

#[test]
fn systemd_accepts_the_units_and_rates_the_service_well() {
    let dir = tempfile::tempdir().unwrap();
    let units = units_for_verify(dir.path());
    let mut args = vec![std::ffi::OsStr::new("verify")];
    args.extend(units.iter().map(|u| u.as_os_str()));
    let output = systemd_analyze(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // verify exits 0 on unknown keys and bad values, printing a warning: any output fails.
    assert!(
        output.status.success() && stderr.trim().is_empty(),
        "{stderr}"
    );

    // Exposure 0.0 (locked down) to 10.0 (unprotected); the unit is at 1.2 today.
    let output = systemd_analyze(&[
        "security".as_ref(),
        "--offline=yes".as_ref(),
        "--threshold=20".as_ref(),
        units[0].as_os_str(),
    ]);
    assert!(
        output.status.success(),
        "exposure above 2.0:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn every_setting_in_the_environment_file_is_read_by_serve() {
    let settings: Vec<String> = read("packaging/leadrelay.default")
        .lines()
        .map(|line| line.trim_start_matches('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name.to_string())
        .filter(|name| name.starts_with("LEADRELAY_"))
        .collect();
    assert!(settings.len() >= 5, "{settings:?}");
    let help = crate::util::bin()
        .args(["serve", "--help"])
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&help.stdout);
    let unit = read("packaging/leadrelay.service");
    for name in settings {
        let read_by_serve = help.contains(&format!("[env: {name}="));
        let read_by_unit = unit.contains(&format!("${name}"));
        assert!(
            read_by_serve || read_by_unit,
            "{name} is in the environment file but neither serve nor the unit reads it"
        );
    }
}

#[test]
fn the_deb_metadata_ships_files_that_exist() {
    let manifest = read("Cargo.toml");
    let section = manifest
        .split("[package.metadata.deb]")
        .nth(1)
        .expect("Cargo.toml has [package.metadata.deb]");
    let section = section.split("\n[").next().unwrap();
    let assets: Vec<&str> = section
        .lines()
        .filter_map(|line| line.trim().strip_prefix("[\""))
        .filter_map(|line| line.split('"').next())
        .collect();
    assert!(assets.contains(&"target/release/leadrelay"), "{assets:?}");
    for asset in assets.iter().filter(|a| !a.starts_with("target/")) {
        assert!(root().join(asset).is_file(), "deb asset {asset} is missing");
    }
    for unit in ["leadrelay", "leadrelay-backup"] {
        assert!(
            section.contains(&format!("unit-name = \"{unit}\"")),
            "{unit}"
        );
    }
    assert!(section.contains("maintainer-scripts = \"packaging/debian/\""));
    for script in ["postinst", "prerm", "postrm"] {
        let path = root().join("packaging/debian").join(script);
        let text = read(&format!("packaging/debian/{script}"));
        assert!(text.starts_with("#!/bin/sh\n"), "{script}");
        // cargo-deb replaces every occurrence, comments included: exactly one, on its own
        // line, where the systemd snippets are to run.
        assert_eq!(text.matches("#DEBHELPER#").count(), 1, "{script}");
        assert!(
            text.lines().any(|line| line == "#DEBHELPER#"),
            "{script}: #DEBHELPER# is not on its own line"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o111, 0o111, "{script} is not executable");
        }
        let syntax = Command::new("sh").arg("-n").arg(&path).output().unwrap();
        assert!(
            syntax.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&syntax.stderr)
        );
    }
    let postinst = read("packaging/debian/postinst");
    assert!(
        postinst.contains("adduser --system"),
        "postinst creates the user"
    );
}
