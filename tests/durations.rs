//! The one duration syntax (`500ms`, `30s`, `5m`, `2h`, `7d`) on every duration flag of the
//! real binary, bare seconds where 0.1.0 took them, and usage errors naming the forms.

use crate::util::process::ServeProcess;
use crate::util::{Request, TempDb, TestCommand, lr};

fn health(served: &ServeProcess) -> u16 {
    Request::new("GET", &format!("{}/api/health", served.base))
        .send()
        .status
}

const FORMS: &str = "500ms, 30s, 5m, 2h or 7d";

fn buyer_with_window(db: &TempDb, id: &str, window: &str) -> TestCommand {
    lr(
        db,
        format!("buyer create --workspace ws --name {id} --id {id}"),
    )
    .line("--webhook-url http://x --cancellation-window")
    .arg(window)
}

#[test]
fn the_cancellation_window_takes_every_unit_and_bare_seconds() {
    let db = TempDb::new();
    lr(&db, "init").json();
    lr(&db, "workspace create --name W --id ws").json();
    for (n, (window, seconds)) in [
        ("5m", 300),
        ("2d", 172_800),
        ("2000ms", 2),
        ("90", 90),
        ("0", 0),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("b{n}");
        let created = buyer_with_window(&db, &id, window).json();
        assert_eq!(created["cancellationWindowSeconds"], seconds, "{window}");
    }
    for (window, message) in [("5w", FORMS), ("1500ms", "whole seconds"), ("1.5h", FORMS)] {
        buyer_with_window(&db, "bad", window)
            .fails(2)
            .stderr_contains(message);
    }
}

#[test]
fn serve_takes_units_in_the_retry_schedule_and_the_timeout() {
    let db = TempDb::new();
    lr(&db, "init").json();
    // 0.1.0 refused `5m` here while `--cancellation-window 5m` worked.
    let flags = [
        "--retry-schedule",
        "30s,5m,2h,7d",
        "--delivery-timeout",
        "2s",
    ];
    let served = ServeProcess::start(&db.path, &flags);
    assert_eq!(health(&served), 200);
    // One server per file: the first stops before the next starts.
    served.stop();
    let served = ServeProcess::start(&db.path, &["--retry-schedule", "1,2,5"]);
    assert_eq!(health(&served), 200, "bare seconds as in 0.1.0");

    for flags in [
        ["--retry-schedule", "5m,5w"],
        ["--retry-schedule", "1.5s"],
        ["--delivery-timeout", "soon"],
    ] {
        lr(&db, "serve --listen 127.0.0.1:0")
            .args(flags)
            .fails(2)
            .stderr_contains(FORMS);
    }
}

#[test]
fn serve_help_shows_the_default_retry_schedule_in_the_same_syntax() {
    let help = lr("unused.db", "serve --help").ok();
    assert!(
        help.contains("[default: 5s,5m,30m,2h,5h,10h,10h]"),
        "{help}"
    );
    assert!(help.contains("[default: 15s]"), "{help}");
}
