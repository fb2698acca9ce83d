//! The partner portal in a real browser: headless Chromium signs in as a buyer and as a
//! supplier through the login form, walks every page, files a return through the form, reads
//! the rendered DOM (the hostile lead's fields as text, no element made of them) and fails
//! on any entry in the browser's console. With `CONSOLE_SCREENSHOTS=DIR` it saves the
//! pictures of docs/portal.md.

use std::time::Duration;

use headless_chrome::Tab;

use super::console_browser::{browser, console_messages, count, evaluate, screenshot, text_of};
use super::portal::{SCRIPT, scenario};

fn open(tab: &Tab, url: &str) {
    tab.navigate_to(url)
        .and_then(|tab| tab.wait_until_navigated())
        .unwrap_or_else(|e| panic!("{url}: {e}"));
}

fn sign_in(tab: &Tab, url: &str, token: &str) {
    open(tab, url);
    assert!(tab.get_url().ends_with("/login"), "{}", tab.get_url());
    evaluate(
        tab,
        &format!("document.getElementById('token').value = {token:?}"),
    );
    tab.find_element("main.login button[type=submit]")
        .expect("a sign-in button")
        .click()
        .expect("the form is sent");
    tab.wait_until_navigated().expect("the overview loads");
    tab.wait_for_element("#figures")
        .expect("the overview is shown");
}

fn sign_out(tab: &Tab) {
    tab.find_element("form.signout button")
        .expect("a sign-out button")
        .click()
        .expect("the sign-out button is clicked");
    tab.wait_until_navigated().expect("the login form loads");
    tab.wait_for_element("#token").expect("signed out");
}

#[test]
fn chromium_walks_the_buyer_and_supplier_portal_and_files_a_return() {
    let s = scenario();
    let url = |path: &str| s.server.portal_url(path);
    let profile = tempfile::tempdir().expect("a temp dir for the profile");
    let browser = browser(profile.path());
    let tab = browser.new_tab().expect("a tab opens");
    tab.set_default_timeout(Duration::from_secs(20));
    let messages = console_messages(&tab);

    sign_in(&tab, &url("/leads"), &s.buyer_token);
    assert_eq!(tab.get_url(), url("/"));
    assert!(text_of(&tab, "#figures tbody tr").starts_with("Today\t1\t0\t30.00"));
    for (path, title, rows) in [
        ("/leads", "Leads", "#leads tbody tr"),
        ("/account", "Account", "#ledger"),
        ("/delivery", "Delivery", "#attempts tbody tr"),
    ] {
        open(&tab, &url(path));
        assert_eq!(text_of(&tab, "main h1"), title, "{path}");
        assert!(count(&tab, rows) >= 1, "{path} shows {rows}");
    }

    // The lead as delivered: the hostile fields as text, no element made of them.
    open(&tab, &url(&format!("/leads/{}", s.txn_a)));
    assert!(
        text_of(&tab, "#delivered").contains(SCRIPT),
        "the name shows as text"
    );
    assert_eq!(count(&tab, "script"), 0);
    assert_eq!(count(&tab, "img"), 0);
    screenshot(&tab, "portal-buyer-lead");

    // A return through the form.
    evaluate(
        &tab,
        "document.getElementById('reasonCode').value = 'wrong_contact'",
    );
    evaluate(
        &tab,
        "document.getElementById('note').value = 'never answered'",
    );
    tab.find_element("#return button[type=submit]")
        .expect("the return form")
        .click()
        .expect("the return is sent");
    tab.wait_until_navigated().expect("the answer loads");
    tab.wait_for_element("p.notice")
        .expect("the outcome is shown");
    assert!(text_of(&tab, "p.notice").contains("return was"));
    assert_eq!(text_of(&tab, "#status"), "cancelled");
    assert!(text_of(&tab, "#return").contains("wrong_contact"));
    sign_out(&tab);

    sign_in(&tab, &url("/"), &s.supplier_token);
    assert!(text_of(&tab, "#owed").contains("4.00") || text_of(&tab, "#owed").contains("0.00"));
    screenshot(&tab, "portal-supplier-overview");
    for (path, title, rows) in [
        ("/leads", "Leads", "#leads tbody tr"),
        ("/payouts", "Payouts", "#ledger tbody tr"),
        ("/sources", "Sources", "#sources tbody tr"),
    ] {
        open(&tab, &url(path));
        assert_eq!(text_of(&tab, "main h1"), title, "{path}");
        assert!(count(&tab, rows) >= 1, "{path} shows {rows}");
    }
    open(&tab, &url(&format!("/leads/{}", s.lead_c)));
    assert_eq!(text_of(&tab, "#returned"), "yes");
    assert!(text_of(&tab, "#person").contains(SCRIPT));
    open(&tab, &url("/sources/src/docs"));
    assert!(
        text_of(&tab, "main").contains("curl"),
        "the posting instructions"
    );
    sign_out(&tab);

    let messages = messages.lock().unwrap();
    assert!(
        messages.is_empty(),
        "the browser console has entries: {messages:#?}"
    );
}
