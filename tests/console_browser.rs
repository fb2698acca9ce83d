//! The operator console in a real browser: headless Chromium (Debian's `chromium`) signs in
//! through the login form and loads every page, driven over the DevTools protocol. The
//! test reads the rendered DOM (the charts' data points, the lead's candidate buyers, the
//! hostile lead's name as text and no element made of it) and fails on any entry in the
//! browser's console: a CSP violation, a failed asset, a script error.
//!
//! Chromium must be installed (`.ci/run` installs it); without it the test fails.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions, Tab};

use super::console::{SCRIPT, operator, populate, start};

/// Where Debian installs Chromium.
fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(
        path.exists(),
        "chromium is missing: `apt-get install chromium` (.ci/run installs it)"
    );
    path
}

/// A headless Chromium with a fresh profile and the flags this machine needs.
pub(crate) fn browser(profile: &std::path::Path) -> Browser {
    let options = LaunchOptions::default_builder()
        .path(Some(chromium()))
        .headless(true)
        .sandbox(false)
        .user_data_dir(Some(profile.to_path_buf()))
        .window_size(Some((1280, 900)))
        .idle_browser_timeout(Duration::from_secs(120))
        .args(
            [
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ]
            .iter()
            .map(OsStr::new)
            .collect(),
        )
        .build()
        .expect("launch options are complete");
    Browser::new(options).expect("chromium starts")
}

/// Every console message, log entry and uncaught exception of `tab`, as text.
pub(crate) fn console_messages(tab: &Tab) -> Arc<Mutex<Vec<String>>> {
    let messages = Arc::new(Mutex::new(Vec::new()));
    let seen = messages.clone();
    tab.enable_log().expect("the log domain enables");
    tab.enable_runtime().expect("the runtime domain enables");
    tab.add_event_listener(Arc::new(move |event: &Event| {
        let message = match event {
            Event::LogEntryAdded(entry) => {
                let entry = &entry.params.entry;
                Some(format!(
                    "log {:?} {}: {}",
                    entry.level,
                    entry.url.as_deref().unwrap_or(""),
                    entry.text
                ))
            }
            Event::RuntimeConsoleAPICalled(call) => Some(format!("console.{:?}", call.params.Type)),
            Event::RuntimeExceptionThrown(thrown) => Some(format!(
                "exception: {}",
                thrown.params.exception_details.text
            )),
            _ => None,
        };
        if let Some(message) = message {
            seen.lock().unwrap().push(message);
        }
    }))
    .expect("the listener is added");
    messages
}

/// What `expression` gives in the page (DevTools evaluates it: the page itself runs no
/// script, and the CSP does not apply to the debugger). One round trip, where walking
/// elements one by one through the protocol costs one per element.
pub(crate) fn evaluate(tab: &Tab, expression: &str) -> serde_json::Value {
    tab.evaluate(expression, false)
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
        .value
        .unwrap_or(serde_json::Value::Null)
}

/// With `CONSOLE_SCREENSHOTS=DIR` set, saves what `tab` shows as `DIR/NAME.png` (the
/// pictures of docs/console.md are made this way).
pub(crate) fn screenshot(tab: &Tab, name: &str) {
    let Ok(dir) = std::env::var("CONSOLE_SCREENSHOTS") else {
        return;
    };
    let png = tab
        .capture_screenshot(
            headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption::Png,
            None,
            None,
            true,
        )
        .expect("a screenshot is taken");
    std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png)
        .expect("the screenshot is saved");
}

/// The number of elements `selector` finds.
pub(crate) fn count(tab: &Tab, selector: &str) -> u64 {
    let expression = format!("document.querySelectorAll({selector:?}).length");
    evaluate(tab, &expression).as_u64().expect("a count")
}

/// The rendered text of the first element `selector` finds.
pub(crate) fn text_of(tab: &Tab, selector: &str) -> String {
    let expression = format!("document.querySelector({selector:?}).innerText");
    match evaluate(tab, &expression) {
        serde_json::Value::String(text) => text,
        other => panic!("{selector}: {other}"),
    }
}

#[test]
fn chromium_signs_in_and_renders_every_page_without_console_errors() {
    let server = start();
    let business = populate(&server);
    let token = operator(&server, "ana")["token"]
        .as_str()
        .unwrap()
        .to_string();
    let profile = tempfile::tempdir().expect("a temp dir for the profile");
    let browser = browser(profile.path());
    let tab = browser.new_tab().expect("a tab opens");
    tab.set_default_timeout(Duration::from_secs(20));
    let messages = console_messages(&tab);

    // Without a session the console sends the browser to the login form.
    tab.navigate_to(&server.console_url("/buyers"))
        .and_then(|tab| tab.wait_until_navigated())
        .expect("the console answers");
    assert!(tab.get_url().ends_with("/login"), "{}", tab.get_url());
    tab.wait_for_element("#token")
        .expect("the login form is shown");
    // Filling the field through the DOM: typing 47 characters as key events takes seconds.
    evaluate(
        &tab,
        &format!("document.getElementById('token').value = {token:?}"),
    );
    tab.find_element("main.login button[type=submit]")
        .expect("a sign-in button")
        .click()
        .expect("the form is sent");
    tab.wait_until_navigated().expect("the overview loads");
    tab.wait_for_element("#leads-per-hour")
        .expect("the overview is shown");
    assert_eq!(tab.get_url(), server.console_url("/"));

    // The overview's charts, with a data point per hour and per day.
    assert_eq!(count(&tab, "#leads-per-hour svg rect.bar"), 48);
    assert_eq!(count(&tab, "#revenue-per-day svg rect.bar"), 30);
    assert_eq!(
        count(&tab, "#leads-per-hour rect.bar:not([data-value=\"0\"])"),
        1,
        "this hour's leads"
    );
    let today = text_of(&tab, "#today tbody tr");
    assert!(today.starts_with("Today\t2\t2\t42.00"), "{today:?}");
    // The stylesheet applied: the bars are drawn in the console's colour, not black.
    let fill = evaluate(
        &tab,
        "getComputedStyle(document.querySelector('rect.bar')).fill",
    );
    assert_eq!(fill, "rgb(59, 111, 224)");
    screenshot(&tab, "console-overview");

    let pages: &[(&str, &str, &str)] = &[
        ("/leads", "Leads", "#leads tbody tr"),
        ("/buyers", "Buyers", "#buyers tr.buyer"),
        ("/sources", "Sources", "#sources tr.source"),
        ("/outbox", "Outbox", "#failed tbody tr"),
        ("/leads?q=partner-77", "Leads", "#leads tbody tr"),
        ("/reports", "Reports", "#report tbody tr.row"),
    ];
    for (path, title, rows) in pages {
        tab.navigate_to(&server.console_url(path))
            .and_then(|tab| tab.wait_until_navigated())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(text_of(&tab, "main h1"), *title, "{path}");
        assert!(count(&tab, rows) >= 1, "{path} shows {rows}");
    }

    // An action: the first buyer's Pause button posts its form (Origin and CSRF token from
    // the page) and comes back to the buyers, the buyer paused.
    tab.navigate_to(&server.console_url("/buyers"))
        .and_then(|tab| tab.wait_until_navigated())
        .expect("the buyers page loads");
    tab.find_element("#buyers tr.buyer form.action button")
        .expect("a pause button")
        .click()
        .expect("the pause button is clicked");
    tab.wait_for_element("#buyers tr.buyer span.tag.paused")
        .unwrap_or_else(|e| panic!("{e}: {}", evaluate(&tab, "document.body.innerText")));
    assert_eq!(tab.get_url(), server.console_url("/buyers"));
    let status = text_of(&tab, "#buyers tr.buyer span.tag");
    assert_eq!(status, "paused", "the first buyer is paused");

    // The report: a row per day of the last 7, today's with the two leads and the sale at
    // 30 (the refused one at 12 counts as sold), and the totals; the CSV link names the
    // same report.
    tab.navigate_to(&server.console_url("/reports?by=day&by=buyer"))
        .and_then(|tab| tab.wait_until_navigated())
        .expect("the report loads");
    let totals = text_of(&tab, "#report tfoot tr.total");
    assert!(totals.starts_with("Total\t2\t2\t0\t0\t2\t"), "{totals:?}");
    assert!(totals.contains("\t42.00\t"), "{totals:?}");
    let buyers = evaluate(
        &tab,
        "Array.from(document.querySelectorAll('#report tbody tr.row td:nth-child(2)')).map(c => c.innerText).join(',')",
    );
    for buyer in ["good", "refuses"] {
        assert!(
            buyers.as_str().unwrap_or("").contains(buyer),
            "{buyer} in {buyers}"
        );
    }
    let csv = evaluate(
        &tab,
        "document.getElementById('report-csv').getAttribute('href')",
    );
    assert!(
        csv.as_str()
            .is_some_and(|href| href.starts_with("/reports.csv?workspace=ws&from=")
                && href.ends_with("&by=day&by=buyer")),
        "{csv}"
    );
    screenshot(&tab, "console-reports");

    // The lead page: the routing trace with every candidate, the hostile name as text.
    tab.navigate_to(&server.console_url(&format!("/leads/{}", business.lead_id)))
        .and_then(|tab| tab.wait_until_navigated())
        .expect("the lead page loads");
    let candidates = text_of(&tab, "table.candidates tbody");
    assert_eq!(
        count(&tab, "table.candidates tr.candidate"),
        2,
        "{candidates}"
    );
    for buyer in ["good", "picky"] {
        assert!(candidates.contains(buyer), "{buyer} in {candidates}");
    }
    assert!(candidates.contains("filter_mismatch"), "{candidates}");
    assert!(
        text_of(&tab, "#person").contains(SCRIPT),
        "the name shows as text"
    );
    assert_eq!(count(&tab, "img"), 0, "no element is made of lead data");
    assert_eq!(count(&tab, "script"), 0);
    screenshot(&tab, "console-lead");

    // Signing out through the button ends the session.
    tab.find_element("form.signout button")
        .expect("a sign-out button")
        .click()
        .expect("the sign-out button is clicked");
    tab.wait_until_navigated().expect("the login form loads");
    tab.wait_for_element("#token").expect("signed out");
    tab.navigate_to(&server.console_url("/"))
        .and_then(|tab| tab.wait_until_navigated())
        .expect("the console answers");
    assert!(tab.get_url().ends_with("/login"), "{}", tab.get_url());

    let messages = messages.lock().unwrap();
    assert!(
        messages.is_empty(),
        "the browser console has entries: {messages:#?}"
    );
}
