//! The CDP guard through its public face: every table row, the state it keeps and its bounds,
//! and the properties that hold for any message.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_policy::{
    CdpGuard, HISTORY_ASKED_LIMIT, HISTORY_LIMIT, MAX_JSON_ELEMENTS, RECORD_LIMIT, SERVER_ID_BASE,
    Verdict, page_refusal,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn check(guard: &mut CdpGuard, message: &Value) -> Verdict {
    guard.check(&message.to_string())
}

fn reply_of(verdict: &Verdict) -> Value {
    match verdict {
        Verdict::Refuse { reply, .. }
        | Verdict::Invalid { reply, .. }
        | Verdict::Close { reply } => serde_json::from_str(reply).unwrap(),
        other => panic!("no reply in {other:?}"),
    }
}

#[test]
fn ordinary_commands_are_sent_on_as_read() {
    let mut guard = CdpGuard::new();
    for message in [
        json!({"id": 1, "method": "Browser.getVersion"}),
        json!({"id": 2, "method": "Target.setAutoAttach", "params": {"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}}),
        json!({"id": 3, "method": "Page.navigate", "sessionId": "S1", "params": {"url": "https://example.com/"}}),
        json!({"id": 4, "method": "Runtime.evaluate", "sessionId": "S1", "params": {"expression": "1+1"}}),
        json!({"id": 5, "method": "Target.createTarget", "params": {"url": "about:blank"}}),
        json!({"id": 6, "method": "Target.createTarget", "params": {"url": ""}}),
        json!({"id": 7, "method": "Page.navigate", "params": {"url": "data:text/html,<p>hi"}}),
        json!({"id": 8, "method": "Target.createBrowserContext", "params": {"disposeOnDetach": true}}),
        json!({"id": 9, "method": "Security.setIgnoreCertificateErrors", "params": {"ignore": false}}),
    ] {
        let verdict = check(&mut guard, &message);
        let Verdict::Forward { message: sent } = &verdict else {
            panic!("{message} was not forwarded: {verdict:?}");
        };
        assert_eq!(serde_json::from_str::<Value>(sent).unwrap(), message);
    }
    assert!(guard.record().is_empty(), "forwards are not recorded");
}

#[test]
fn the_browsers_own_pages_are_refused_however_spelled() {
    for url in [
        "file:///etc/hostname",
        "FILE:///etc/passwd",
        " \u{1}file:///etc/passwd",
        "fi\tle:///etc/passwd",
        "f\ni\rle:/etc/passwd",
        "chrome://settings",
        "chrome-extension://abc/x.html",
        "chrome-untrusted://terminal",
        "devtools://devtools/bundled/inspector.html",
        "view-source:https://example.com",
        "about:version",
        "About:Settings",
        "filesystem:https://example.com/temporary/x",
    ] {
        for method in ["Page.navigate", "Target.createTarget"] {
            let mut guard = CdpGuard::new();
            let verdict = check(
                &mut guard,
                &json!({"id": 7, "sessionId": "S", "method": method, "params": {"url": url}}),
            );
            let Verdict::Refuse { reason, .. } = &verdict else {
                panic!("{method} {url:?} was not refused: {verdict:?}");
            };
            assert!(
                reason.starts_with(&format!("airlock refuses {method}: ")),
                "{reason}"
            );
            let reply = reply_of(&verdict);
            assert_eq!(reply["id"], 7);
            assert_eq!(reply["sessionId"], "S");
            assert_eq!(reply["error"]["code"], -32000);
            assert_eq!(reply["error"]["message"], reason.as_str());
        }
    }
    for url in [
        "about:blank",
        "ABOUT:BLANK#x",
        "about:srcdoc",
        "https://x.test/",
        "javascript:void 0",
    ] {
        assert_eq!(page_refusal(url), None, "{url}");
    }
}

#[test]
fn the_listed_switches_are_refused_and_the_connection_kept() {
    let mut guard = CdpGuard::new();
    for (message, says) in [
        (
            json!({"id": 1, "method": "Target.exposeDevToolsProtocol", "params": {"targetId": "T"}}),
            "protocol",
        ),
        (
            json!({"id": 2, "method": "Target.sendMessageToTarget", "params": {"message": "{}"}}),
            "flatten",
        ),
        (
            json!({"id": 3, "method": "Target.attachToTarget", "params": {"targetId": "T"}}),
            "flatten",
        ),
        (
            json!({"id": 4, "method": "Target.setAutoAttach", "params": {"autoAttach": true, "waitForDebuggerOnStart": false}}),
            "flatten",
        ),
        (
            json!({"id": 5, "method": "Target.createBrowserContext", "params": {"proxyServer": "http://10.0.0.1:3128"}}),
            "proxy",
        ),
        (
            json!({"id": 6, "method": "Target.createBrowserContext", "params": {"proxyBypassList": "*"}}),
            "proxy",
        ),
        (
            json!({"id": 7, "method": "Security.setIgnoreCertificateErrors", "params": {"ignore": true}}),
            "certificate",
        ),
        (
            json!({"id": 8, "method": "Security.setOverrideCertificateErrors", "params": {"override": true}}),
            "certificate",
        ),
        (
            json!({"id": 9, "method": "Security.handleCertificateError", "params": {"eventId": 1, "action": "continue"}}),
            "certificate",
        ),
        (
            json!({"id": 10, "method": "DOM.setFileInputFiles", "params": {"files": ["/etc/passwd"], "nodeId": 3}}),
            "files",
        ),
        (
            json!({"id": 11, "method": "Page.setInterceptFileChooserDialog", "params": {"enabled": true}}),
            "file chooser",
        ),
        (
            json!({"id": 12, "method": "Input.dispatchDragEvent", "params": {"type": "drop", "x": 1, "y": 1, "data": {"items": [], "files": ["/etc/passwd"], "dragOperationsMask": 1}}}),
            "files",
        ),
        (
            json!({"id": 13, "method": "Target.setRemoteLocations", "params": {"locations": [{"host": "10.0.0.1", "port": 9222}]}}),
            "outside the egress proxy",
        ),
        (
            json!({"id": 14, "method": "Extensions.loadUnpacked", "params": {"path": "/tmp/x"}}),
            "extensions",
        ),
        (
            json!({"id": 15, "method": "PWA.install", "params": {"manifestId": "x", "installUrlOrBundleUrl": "file:///x"}}),
            "web apps",
        ),
        (
            json!({"id": 16, "method": "Network.loadNetworkResource", "params": {"url": "file:///etc/passwd", "options": {"disableCache": true, "includeCredentials": false}}}),
            "browser's own",
        ),
    ] {
        let verdict = check(&mut guard, &message);
        let Verdict::Refuse { reason, .. } = &verdict else {
            panic!("{message} was not refused: {verdict:?}");
        };
        assert!(reason.contains(says), "{reason} should say {says}");
        assert_eq!(reply_of(&verdict)["id"], message["id"]);
        // The connection is kept: the next command goes on.
        assert_eq!(
            guard.check(r#"{"id":99,"method":"Page.enable"}"#).kind(),
            "forward"
        );
    }
    assert_eq!(guard.record().len(), 16);
    assert!(guard.record().iter().all(|r| r.verdict == "refuse"));
}

#[test]
fn downloads_are_pinned_to_deny() {
    let mut guard = CdpGuard::new();
    for method in ["Browser.setDownloadBehavior", "Page.setDownloadBehavior"] {
        let verdict = check(
            &mut guard,
            &json!({"id": 1, "method": method, "params": {"behavior": "allow", "downloadPath": "/tmp/x", "browserContextId": "C", "eventsEnabled": true}}),
        );
        let Verdict::Rewrite { message, .. } = &verdict else {
            panic!("{verdict:?}")
        };
        let sent: Value = serde_json::from_str(message).unwrap();
        assert_eq!(
            sent,
            json!({"id": 1, "method": method, "params": {"behavior": "deny", "browserContextId": "C", "eventsEnabled": true}})
        );
    }
}

#[test]
fn closing_the_browser_answers_then_ends_the_connection() {
    for method in ["Browser.close", "Browser.crash", "Browser.crashGpuProcess"] {
        let mut guard = CdpGuard::new();
        let verdict = check(&mut guard, &json!({"id": 41, "method": method}));
        assert!(matches!(verdict, Verdict::Close { .. }), "{verdict:?}");
        assert_eq!(reply_of(&verdict), json!({"id": 41, "result": {}}));
        assert_eq!(
            check(
                &mut guard,
                &json!({"id": 42, "method": "Browser.getVersion"})
            ),
            Verdict::Ignore
        );
    }
}

#[test]
fn unreadable_messages_get_invalid_request() {
    let mut guard = CdpGuard::new();
    for (text, id) in [
        ("not json", Value::Null),
        ("[1, 2]", Value::Null),
        ("{\"method\": \"Page.enable\"}", Value::Null),
        ("{\"id\": \"1\", \"method\": \"Page.enable\"}", Value::Null),
        ("{\"id\": 1.5, \"method\": \"Page.enable\"}", Value::Null),
        ("{\"id\": 3, \"method\": 7}", json!(3)),
        (
            "{\"id\": 4, \"method\": \"Page.navigate\", \"params\": [\"file:///\"]}",
            json!(4),
        ),
        (
            "{\"id\": 5, \"method\": \"Page.enable\", \"sessionId\": 9}",
            json!(5),
        ),
        // The server's own range, where its live view's commands are numbered.
        (
            "{\"id\": 2000000000, \"method\": \"Page.enable\"}",
            json!(SERVER_ID_BASE),
        ),
    ] {
        let verdict = guard.check(text);
        let Verdict::Invalid { .. } = &verdict else {
            panic!("{text} was not invalid: {verdict:?}");
        };
        let reply = reply_of(&verdict);
        assert_eq!(reply["error"]["code"], -32600, "{text}");
        assert_eq!(reply["id"], id, "{text}");
    }
}

#[test]
fn duplicate_keys_are_read_once_and_sent_as_read() {
    // Whatever the guard judged is exactly what the browser gets: no parser differential.
    let mut guard = CdpGuard::new();
    let text = r#"{"id":1,"method":"Page.navigate","params":{"url":"https://a.test/"},"params":{"url":"file:///etc/passwd"}}"#;
    let verdict = guard.check(text);
    assert!(matches!(verdict, Verdict::Refuse { .. }), "{verdict:?}");
    let text = r#"{"id":1,"method":"Page.navigate","params":{"url":"file:///etc/passwd"},"params":{"url":"https://a.test/"}}"#;
    let Verdict::Forward { message } = guard.check(text) else {
        panic!()
    };
    assert!(!message.contains("file:"), "{message}");
}

#[test]
fn history_entries_are_judged_by_where_they_lead() {
    let mut guard = CdpGuard::new();
    check(
        &mut guard,
        &json!({"id": 5, "sessionId": "S", "method": "Page.getNavigationHistory"}),
    );
    guard.observe_reply(
        &json!({"id": 5, "sessionId": "S", "result": {"currentIndex": 1, "entries": [
            {"id": 10, "url": "chrome://version", "title": "", "userTypedURL": "", "transitionType": "typed"},
            {"id": 11, "url": "https://a.test/", "title": "", "userTypedURL": "", "transitionType": "typed"}
        ]}})
        .to_string(),
    );
    let refused = check(
        &mut guard,
        &json!({"id": 6, "sessionId": "S", "method": "Page.navigateToHistoryEntry", "params": {"entryId": 10}}),
    );
    assert!(matches!(refused, Verdict::Refuse { .. }), "{refused:?}");
    let sent = check(
        &mut guard,
        &json!({"id": 7, "sessionId": "S", "method": "Page.navigateToHistoryEntry", "params": {"entryId": 11}}),
    );
    assert!(matches!(sent, Verdict::Forward { .. }), "{sent:?}");
    // Another session's entry 10 is not this one's.
    let other = check(
        &mut guard,
        &json!({"id": 8, "sessionId": "T", "method": "Page.navigateToHistoryEntry", "params": {"entryId": 10}}),
    );
    assert!(matches!(other, Verdict::Forward { .. }), "{other:?}");
}

#[test]
fn the_record_keeps_the_first_hundred() {
    let mut guard = CdpGuard::new();
    for id in 0..150 {
        check(
            &mut guard,
            &json!({"id": id, "method": "DOM.setFileInputFiles", "params": {"files": []}}),
        );
    }
    assert_eq!(guard.record().len(), RECORD_LIMIT);
    assert_eq!(guard.unrecorded(), 50);
}

/// A refused URL, spelled the ways a browser forgives: any case, tabs and newlines anywhere,
/// controls and spaces around.
fn refused_url() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        Just("file:///etc/hostname".to_owned()),
        Just("chrome://settings/".to_owned()),
        Just("chrome-extension://id/page.html".to_owned()),
        Just("chrome-untrusted://x/".to_owned()),
        Just("devtools://devtools/".to_owned()),
        Just("view-source:http://a.test/".to_owned()),
        Just("about:version".to_owned()),
    ];
    (
        base,
        any::<u64>(),
        "[\u{0}-\u{20}]{0,3}",
        "[\u{0}-\u{20}]{0,3}",
    )
        .prop_map(|(url, seed, before, after)| {
            let mut spelled = String::new();
            for (index, c) in url.chars().enumerate() {
                let bit = (seed >> (index % 64)) & 1 == 1;
                spelled.push(if bit { c.to_ascii_uppercase() } else { c });
                if (seed >> ((index + 7) % 64)).trailing_zeros() >= 2 {
                    spelled.push(['\t', '\n', '\r'][index % 3]);
                }
            }
            format!("{before}{spelled}{after}")
        })
}

/// A real command: one of the methods the guard judges (or an ordinary one) with parameters
/// shaped like a client's, some of them refused.
fn command() -> impl Strategy<Value = (String, Value)> {
    let url = prop_oneof![
        refused_url(),
        "https?://[a-z]{1,8}\\.test/[a-z]{0,5}",
        Just("about:blank".to_owned())
    ];
    prop_oneof![
        url.clone().prop_map(|url| ("Page.navigate".to_owned(), json!({"url": url}))),
        url.clone().prop_map(|url| ("Target.createTarget".to_owned(), json!({"url": url}))),
        url.clone().prop_map(|url| ("Fetch.continueRequest".to_owned(), json!({"requestId": "r", "url": url}))),
        url.prop_map(|url| ("Fetch.fulfillRequest".to_owned(), json!({"requestId": "r", "responseCode": 302, "responseHeaders": [{"name": "Location", "value": url}]}))),
        any::<bool>().prop_map(|flatten| ("Target.attachToTarget".to_owned(), json!({"targetId": "T", "flatten": flatten}))),
        (any::<i64>(), 0..16i64).prop_map(|(code, modifiers)| ("Input.dispatchKeyEvent".to_owned(), json!({"type": "rawKeyDown", "windowsVirtualKeyCode": code.rem_euclid(256), "modifiers": modifiers}))),
        Just(("Browser.setDownloadBehavior".to_owned(), json!({"behavior": "allow", "downloadPath": "/tmp"}))),
        Just(("Browser.close".to_owned(), json!({}))),
        Just(("Tethering.bind".to_owned(), json!({"port": 9222}))),
        Just(("SystemInfo.getProcessInfo".to_owned(), json!({}))),
        Just(("Runtime.evaluate".to_owned(), json!({"expression": "1 + 1"}))),
        Just(("Page.enable".to_owned(), json!({}))),
    ]
}

#[test]
fn commands_nobody_judged_before_are_judged_now() {
    for (message, refused) in [
        (
            json!({"id": 1, "method": "Fetch.continueRequest", "params": {"requestId": "r", "url": "file:///etc/passwd"}}),
            true,
        ),
        (
            json!({"id": 2, "method": "Fetch.continueRequest", "params": {"requestId": "r", "url": "https://a.test/"}}),
            false,
        ),
        (
            json!({"id": 3, "method": "Network.continueInterceptedRequest", "params": {"interceptionId": "i", "url": "chrome://settings"}}),
            true,
        ),
        (
            json!({"id": 4, "method": "Fetch.fulfillRequest", "params": {"requestId": "r", "responseCode": 302, "responseHeaders": [{"name": "location", "value": "chrome://history"}]}}),
            true,
        ),
        (
            json!({"id": 5, "method": "Fetch.fulfillRequest", "params": {"requestId": "r", "responseCode": 200, "responseHeaders": [{"name": "Content-Type", "value": "text/html"}], "body": "PGI+aGk8L2I+"}}),
            false,
        ),
        (
            json!({"id": 6, "method": "Fetch.fulfillRequest", "params": {"requestId": "r", "responseCode": 302, "binaryResponseHeaders": "TG9jYXRpb246IGZpbGU6Ly8v"}}),
            true,
        ),
        (
            json!({"id": 7, "method": "Fetch.continueResponse", "params": {"requestId": "r", "responseHeaders": [{"name": " LOCATION", "value": "file:///"}]}}),
            true,
        ),
        (
            json!({"id": 8, "method": "Tethering.bind", "params": {"port": 9222}}),
            true,
        ),
        (json!({"id": 9, "method": "SystemInfo.getInfo"}), true),
        (
            json!({"id": 10, "method": "SystemInfo.getProcessInfo"}),
            true,
        ),
        (
            json!({"id": 11, "method": "Browser.getBrowserCommandLine"}),
            true,
        ),
        (
            json!({"id": 12, "method": "Browser.executeBrowserCommand", "params": {"commandId": "openTabSearch"}}),
            true,
        ),
    ] {
        let verdict = check(&mut CdpGuard::new(), &message);
        assert_eq!(
            matches!(verdict, Verdict::Refuse { .. }),
            refused,
            "{message}: {verdict:?}"
        );
    }
}

#[test]
fn key_chords_that_open_the_browsers_own_pages_are_refused_and_editing_ones_sent() {
    // CDP modifiers: Alt 1, Ctrl 2, Meta 4, Shift 8.
    let key = |code: i64, key: &str, dom: &str, modifiers: i64| {
        json!({"id": 1, "sessionId": "S", "method": "Input.dispatchKeyEvent", "params": {
            "type": "rawKeyDown", "windowsVirtualKeyCode": code, "key": key, "code": dom, "modifiers": modifiers}})
    };
    for (message, why) in [
        (key(72, "h", "KeyH", 2), "Ctrl+H: history"),
        (key(84, "t", "KeyT", 2), "Ctrl+T: new tab"),
        (key(78, "N", "KeyN", 10), "Ctrl+Shift+N: new window"),
        (key(74, "j", "KeyJ", 2), "Ctrl+J: downloads"),
        (key(85, "u", "KeyU", 2), "Ctrl+U: view source"),
        (key(79, "o", "KeyO", 2), "Ctrl+O: open a file"),
        (key(73, "I", "KeyI", 10), "Ctrl+Shift+I: DevTools"),
        (key(123, "F12", "F12", 0), "F12: DevTools"),
        (key(37, "ArrowLeft", "ArrowLeft", 1), "Alt+Left: back"),
        (key(36, "Home", "Home", 1), "Alt+Home: home page"),
        (key(72, "h", "KeyH", 4), "Meta+H"),
        // A field that disagrees with the others does not pass as an editing key.
        (key(65, "a", "KeyH", 2), "Ctrl with code KeyH"),
        (key(72, "a", "KeyA", 2), "Ctrl with key code 72"),
        (
            json!({"id": 1, "method": "Input.dispatchKeyEvent", "params": {"type": "rawKeyDown", "modifiers": 2}}),
            "Ctrl with no key named",
        ),
    ] {
        let verdict = check(&mut CdpGuard::new(), &message);
        assert!(
            matches!(verdict, Verdict::Refuse { .. }),
            "{why}: {verdict:?}"
        );
    }
    for (message, why) in [
        (key(65, "a", "KeyA", 2), "Ctrl+A: select all"),
        (key(67, "c", "KeyC", 2), "Ctrl+C"),
        (key(86, "v", "KeyV", 4), "Meta+V"),
        (key(90, "Z", "KeyZ", 10), "Ctrl+Shift+Z: redo"),
        (
            key(8, "Backspace", "Backspace", 2),
            "Ctrl+Backspace: delete a word",
        ),
        (
            key(37, "ArrowLeft", "ArrowLeft", 2),
            "Ctrl+Left: a word back",
        ),
        (key(72, "h", "KeyH", 0), "h"),
        (key(72, "H", "KeyH", 8), "Shift+H"),
        (key(13, "Enter", "Enter", 0), "Enter"),
        (
            json!({"id": 1, "method": "Input.dispatchKeyEvent", "params": {"type": "char", "text": "x"}}),
            "a typed character",
        ),
    ] {
        let verdict = check(&mut CdpGuard::new(), &message);
        assert!(
            matches!(verdict, Verdict::Forward { .. }),
            "{why}: {verdict:?}"
        );
    }
}

#[test]
fn what_a_client_makes_the_guard_remember_is_bounded() {
    let mut guard = CdpGuard::new();
    // History requests the browser never answers (or answers on another session).
    for id in 0..10_000 {
        check(
            &mut guard,
            &json!({"id": id, "sessionId": format!("S{id}"), "method": "Page.getNavigationHistory"}),
        );
    }
    assert_eq!(guard.history_held().0, HISTORY_ASKED_LIMIT);
    // The newest request is still served; an answer with more entries than the limit keeps the
    // limit.
    let entries: Vec<Value> = (0..5_000)
        .map(|entry| json!({"id": entry, "url": format!("https://a.test/{entry}")}))
        .collect();
    guard.observe_reply(&json!({"id": 9_999, "sessionId": "S9999", "result": {"currentIndex": 0, "entries": entries}}).to_string());
    assert_eq!(
        guard.history_held(),
        (HISTORY_ASKED_LIMIT - 1, HISTORY_LIMIT)
    );
    // The oldest request was forgotten: its answer teaches nothing.
    guard.observe_reply(&json!({"id": 0, "sessionId": "S0", "result": {"entries": [{"id": 1, "url": "chrome://version"}]}}).to_string());
    assert_eq!(
        guard.history_held(),
        (HISTORY_ASKED_LIMIT - 1, HISTORY_LIMIT)
    );
}

proptest! {
    #[test]
    fn refused_urls_are_refused_in_every_spelling(url in refused_url(), id in i64::MIN..SERVER_ID_BASE) {
        for method in ["Page.navigate", "Target.createTarget"] {
            let mut guard = CdpGuard::new();
            let verdict = check(&mut guard, &json!({"id": id, "method": method, "params": {"url": url}}));
            prop_assert!(matches!(verdict, Verdict::Refuse { .. }), "{} {:?}: {:?}", method, url, verdict);
        }
    }

    #[test]
    fn any_text_gets_a_verdict(text in any::<String>()) {
        let mut guard = CdpGuard::new();
        let verdict = guard.check(&text);
        if let Verdict::Invalid { reply, .. } = &verdict {
            let reply: Value = serde_json::from_str(reply).unwrap();
            prop_assert_eq!(&reply["error"]["code"], &json!(-32600));
        }
    }

    #[test]
    fn every_reply_keeps_the_commands_id_and_session(
        (method, params) in command(),
        id in i64::MIN..SERVER_ID_BASE,
        session in proptest::option::of("[A-F0-9]{1,8}"),
        close_first in any::<bool>(),
    ) {
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &session {
            message["sessionId"] = json!(session);
        }
        let mut guard = CdpGuard::new();
        if close_first {
            guard.close();
            prop_assert_eq!(check(&mut guard, &message), Verdict::Ignore);
            return Ok(());
        }
        let verdict = check(&mut guard, &message);
        match &verdict {
            Verdict::Forward { message: sent } | Verdict::Rewrite { message: sent, .. } => {
                let sent: Value = serde_json::from_str(sent).unwrap();
                prop_assert_eq!(&sent["id"], &json!(id));
                prop_assert_eq!(&sent["method"], &json!(method));
                prop_assert_eq!(sent.get("sessionId").cloned(), session.map(Value::from));
            }
            Verdict::Refuse { reply, .. } | Verdict::Close { reply } => {
                let reply: Value = serde_json::from_str(reply).unwrap();
                prop_assert_eq!(&reply["id"], &json!(id));
                prop_assert_eq!(reply.get("sessionId").cloned(), session.map(Value::from));
            }
            other => prop_assert!(false, "a well-formed command got {:?}", other),
        }
    }

    #[test]
    fn what_is_forwarded_is_what_was_judged(
        method in prop_oneof![Just("Page.navigate".to_owned()), Just("Runtime.evaluate".to_owned()), Just("Target.createTarget".to_owned()), "[A-Za-z.]{1,20}"],
        url in prop_oneof![refused_url(), "https?://[a-z]{1,8}\\.test/[a-z]{0,5}", any::<String>()],
        id in i64::MIN..SERVER_ID_BASE,
        session in proptest::option::of("[A-F0-9]{1,8}"),
    ) {
        let mut message = json!({"id": id, "method": method, "params": {"url": url}});
        if let Some(session) = &session {
            message["sessionId"] = json!(session);
        }
        let mut guard = CdpGuard::new();
        match check(&mut guard, &message) {
            Verdict::Forward { message: sent } => {
                let sent: Value = serde_json::from_str(&sent).unwrap();
                prop_assert_eq!(&sent, &message);
                if method == "Page.navigate" || method == "Target.createTarget" {
                    prop_assert!(page_refusal(&url).is_none());
                }
            }
            Verdict::Refuse { reply, .. } => {
                let reply: Value = serde_json::from_str(&reply).unwrap();
                prop_assert_eq!(&reply["id"], &json!(id));
                prop_assert_eq!(reply.get("sessionId").cloned(), session.map(Value::from));
            }
            other => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    #[test]
    fn after_a_close_nothing_is_forwarded(texts in proptest::collection::vec(any::<String>(), 0..8)) {
        let mut guard = CdpGuard::new();
        let closed = guard.check(r#"{"id":1,"method":"Browser.close"}"#);
        prop_assert!(matches!(closed, Verdict::Close { .. }), "{:?}", closed);
        for text in texts {
            prop_assert_eq!(guard.check(&text), Verdict::Ignore);
        }
        prop_assert_eq!(
            guard.check(r#"{"id":2,"method":"Page.navigate","params":{"url":"https://a.test/"}}"#),
            Verdict::Ignore
        );
    }
}

#[test]
fn a_message_of_millions_of_elements_is_refused_before_it_is_parsed() {
    // 32 MiB of `[0,0,…]`: sixteen million values if parsed.
    let mut hostile = String::from(r#"{"id":1,"method":"Runtime.evaluate","params":{"x":["#);
    hostile.push_str(&"0,".repeat(16 * 1024 * 1024));
    hostile.push_str("0]}}");
    let verdict = CdpGuard::new().check(&hostile);
    let Verdict::Invalid { reason, reply } = &verdict else {
        panic!("{:?}", verdict.kind())
    };
    assert!(reason.contains(&MAX_JSON_ELEMENTS.to_string()), "{reason}");
    assert!(reply.contains("-32600"));
    // A large string is one element, however long: a file's base64 passes.
    let file = format!(
        r#"{{"id":2,"method":"Runtime.evaluate","params":{{"expression":"'{}'.length"}}}}"#,
        "A".repeat(16 * 1024 * 1024)
    );
    assert_eq!(CdpGuard::new().check(&file).kind(), "forward");
    // Brackets and commas inside strings (escaped quotes too) are not counted.
    let quoted = format!(
        r#"{{"id":3,"method":"Runtime.evaluate","params":{{"expression":"\"{}\""}}}}"#,
        "[,:{".repeat(100_000)
    );
    assert_eq!(CdpGuard::new().check(&quoted).kind(), "forward");
}
