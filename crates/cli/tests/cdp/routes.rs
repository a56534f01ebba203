//! A CDP lease on a route: `/cdp?route=NAME` picks the operator's route, an unknown one is
//! refused before any browser starts, and with `--ca-cert` the lease's Chromium trusts a
//! TLS-inspecting parent's CA (mitmproxy) while without it the page fails its certificate check.

use airlock_testkit::docker::docker_ready;
use airlock_testkit::parents::{INSPECTED_PAGE, mitmproxy};
use serde_json::Value;

use super::{TOKEN, node, sites, start};

/// What `cdp_text.js` printed for `url` through `endpoint`.
fn text_through(endpoint: &str, url: &str) -> Value {
    let output = node("cdp_text.js").args([endpoint, url]).output().unwrap();
    super::printed(&output)
}

#[test]
fn a_lease_on_an_inspecting_parents_route_trusts_its_ca_only_when_given() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let inspector = runtime.block_on(mitmproxy());
    let ca = inspector.ca_cert().display().to_string();
    let parent = format!("inspect=http://{}", inspector.address);
    // The lab's port over https: mitmproxy answers for it under its own CA.
    let url = format!("https://127.0.0.1:{}/", sites.lab);

    let (trusting, _dir) = start(&sites, false, &["--parent", &parent, "--ca-cert", &ca]);
    let (status, refused) = super::request(
        trusting.port,
        "GET",
        &format!("/cdp?token={TOKEN}&route=moon"),
        &[],
        "",
    );
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("there is no route `moon`"), "{refused}");
    let endpoint = trusting.url(&format!("/cdp?token={TOKEN}&route=inspect"));
    let page = text_through(&endpoint, &url);
    assert!(
        page["text"]
            .as_str()
            .unwrap_or_default()
            .contains(INSPECTED_PAGE),
        "{page}"
    );
    drop(trusting);

    let (plain, _dir) = start(&sites, false, &["--parent", &parent, "--route", "inspect"]);
    let page = text_through(&plain.url(&format!("/cdp?token={TOKEN}")), &url);
    assert!(
        page["error"]
            .as_str()
            .unwrap_or_default()
            .contains("ERR_CERT_AUTHORITY_INVALID"),
        "{page}"
    );
    assert!(!page.to_string().contains(INSPECTED_PAGE), "{page}");
    sites.assert_forbidden_heard_nothing();
}
