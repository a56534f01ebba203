//! JavaScript dialogs on a CDP lease (`--cdp-dialogs`), with real Playwright and Puppeteer
//! clients that answer every dialog they hear of themselves: left to the client (the default)
//! they answer; with `accept` or `dismiss` the server answers at once and the client hears of
//! none.

use airlock_testkit::docker::docker_ready;
use serde_json::{Value, json};

use super::{TOKEN, node, printed, sites, start};

/// What `cdp_dialogs.js` printed with `client` on a server started with `extra`.
fn dialogs(extra: &[&str], client: &str) -> Value {
    let sites = sites();
    let (served, _dir) = start(&sites, false, extra);
    let endpoint = served.url(&format!("/cdp?token={TOKEN}"));
    let endpoint = endpoint.replacen("http://", "ws://", 1);
    let output = node("cdp_dialogs.js")
        .args([&endpoint, &sites.lab_url(), client])
        .output()
        .unwrap();
    sites.assert_forbidden_heard_nothing();
    printed(&output)
}

#[test]
fn the_operators_dialog_setting_answers_for_every_client() {
    if !docker_ready() {
        return;
    }
    for client in ["playwright", "puppeteer"] {
        let own = dialogs(&[], client);
        assert_eq!(
            own,
            json!({"confirmed": true, "prompted": "from-client", "heard": 2}),
            "{client}, left to the client"
        );
        let accepted = dialogs(&["--cdp-dialogs", "accept"], client);
        assert_eq!(
            accepted,
            json!({"confirmed": true, "prompted": "lab", "heard": 0}),
            "{client}, accepted by the server with the prompt's default text"
        );
        let dismissed = dialogs(&["--cdp-dialogs", "dismiss"], client);
        assert_eq!(
            dismissed,
            json!({"confirmed": false, "prompted": null, "heard": 0}),
            "{client}, dismissed by the server"
        );
    }
}
