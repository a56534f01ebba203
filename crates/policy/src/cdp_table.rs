//! The CDP guard's table: every DevTools Protocol method the guard judges, with its rule and the
//! reason a client reads. A method not listed here is sent on as read: the sealed container and
//! the egress proxy still hold for it. Changing what a CDP client may do means changing this
//! table (and a condition below, when a rule needs one), nothing else.

/// What the guard does with one method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Answer `{}`, then dispose of the browser and close the connection.
    Close,
    /// Refuse, whatever the parameters.
    Refuse,
    /// Refuse unless the parameters meet the condition.
    RefuseUnless(Condition),
    /// Judge the URL in this parameter as a page the client opens (none given: sent on).
    PageUrl(&'static str),
    /// Judge by the URL the browser itself said this history entry opens.
    HistoryEntry,
    /// Sent on with `behavior: "deny"`, keeping only the context and events parameters.
    DenyDownloads,
}

/// A condition on a command's parameters under which it is sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Condition {
    /// `flatten: true`.
    Flattened,
    /// Not auto-attaching, or auto-attaching with `flatten: true`.
    FlattenedIfAutoAttaching,
    /// None of these parameters given (or all null).
    Absent(&'static [&'static str]),
    /// This parameter given as `false`.
    IsFalse(&'static str),
    /// A drag that carries no files.
    NoDraggedFiles,
    /// No `Location` header leading to one of the browser's own pages, and no raw headers the
    /// guard cannot read.
    NoRedirectToOwnPages,
    /// A key without Ctrl, Alt or Meta, or an editing chord (select all, copy, cut, paste, undo,
    /// redo, word moves and deletes): never one of the browser's own shortcuts (history, new
    /// tab, downloads, view source, DevTools, open file, …).
    EditingKeyOnly,
}

/// One row: a method (exact, or `Domain.*` for a whole domain), its rule, and why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MethodRule {
    pub(crate) method: &'static str,
    pub(crate) rule: Rule,
    pub(crate) reason: &'static str,
}

const FLATTEN_ONLY: &str =
    "only flattened sessions are served: attach with `flatten: true` and send with `sessionId`";
const CERTIFICATES: &str = "certificate checks stay on";
const FILES: &str = "the sealed browser takes no files from disk (no uploads, no file chooser)";
const OWN_PAGES: &str = "it opens the browser's own pages, which a client may not";

/// The table. Exact names are looked up before `Domain.*` rows.
pub(crate) const CDP_TABLE: &[MethodRule] = &[
    MethodRule {
        method: "Browser.close",
        rule: Rule::Close,
        reason: "the client closed the browser: it is disposed of",
    },
    MethodRule {
        method: "Browser.crash",
        rule: Rule::Close,
        reason: "the client closed the browser: it is disposed of",
    },
    MethodRule {
        method: "Browser.crashGpuProcess",
        rule: Rule::Close,
        reason: "the client closed the browser: it is disposed of",
    },
    MethodRule {
        method: "Browser.executeBrowserCommand",
        rule: Rule::Refuse,
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Browser.getBrowserCommandLine",
        rule: Rule::Refuse,
        reason: "the browser's launch settings (its proxy, its sandbox) are the host's, not the client's",
    },
    MethodRule {
        method: "Browser.setDownloadBehavior",
        rule: Rule::DenyDownloads,
        reason: "downloads are pinned to deny: airlock keeps no files",
    },
    MethodRule {
        method: "Page.setDownloadBehavior",
        rule: Rule::DenyDownloads,
        reason: "downloads are pinned to deny: airlock keeps no files",
    },
    MethodRule {
        method: "Target.exposeDevToolsProtocol",
        rule: Rule::Refuse,
        reason: "it would give a page the DevTools protocol",
    },
    MethodRule {
        method: "Target.sendMessageToTarget",
        rule: Rule::Refuse,
        reason: FLATTEN_ONLY,
    },
    MethodRule {
        method: "Target.attachToTarget",
        rule: Rule::RefuseUnless(Condition::Flattened),
        reason: FLATTEN_ONLY,
    },
    MethodRule {
        method: "Target.setAutoAttach",
        rule: Rule::RefuseUnless(Condition::FlattenedIfAutoAttaching),
        reason: FLATTEN_ONLY,
    },
    MethodRule {
        method: "Target.createBrowserContext",
        rule: Rule::RefuseUnless(Condition::Absent(&["proxyServer", "proxyBypassList"])),
        reason: "a browser context may not set its own proxy: the egress proxy is the browser's only way out",
    },
    MethodRule {
        method: "Target.setRemoteLocations",
        rule: Rule::Refuse,
        reason: "it opens connections of the browser's own, outside the egress proxy",
    },
    MethodRule {
        method: "Target.openDevTools",
        rule: Rule::Refuse,
        reason: "the DevTools front end is one of the browser's own pages",
    },
    MethodRule {
        method: "Target.createTarget",
        rule: Rule::PageUrl("url"),
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Page.navigate",
        rule: Rule::PageUrl("url"),
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Page.navigateToHistoryEntry",
        rule: Rule::HistoryEntry,
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Network.loadNetworkResource",
        rule: Rule::PageUrl("url"),
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Network.continueInterceptedRequest",
        rule: Rule::PageUrl("url"),
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Fetch.continueRequest",
        rule: Rule::PageUrl("url"),
        reason: OWN_PAGES,
    },
    MethodRule {
        method: "Fetch.fulfillRequest",
        rule: Rule::RefuseUnless(Condition::NoRedirectToOwnPages),
        reason: "a response may not redirect to the browser's own pages; send `responseHeaders` (which the guard reads), not `binaryResponseHeaders`",
    },
    MethodRule {
        method: "Fetch.continueResponse",
        rule: Rule::RefuseUnless(Condition::NoRedirectToOwnPages),
        reason: "a response may not redirect to the browser's own pages; send `responseHeaders` (which the guard reads), not `binaryResponseHeaders`",
    },
    MethodRule {
        method: "Security.setIgnoreCertificateErrors",
        rule: Rule::RefuseUnless(Condition::IsFalse("ignore")),
        reason: CERTIFICATES,
    },
    MethodRule {
        method: "Security.setOverrideCertificateErrors",
        rule: Rule::RefuseUnless(Condition::IsFalse("override")),
        reason: CERTIFICATES,
    },
    MethodRule {
        method: "Security.handleCertificateError",
        rule: Rule::Refuse,
        reason: CERTIFICATES,
    },
    MethodRule {
        method: "DOM.setFileInputFiles",
        rule: Rule::Refuse,
        reason: FILES,
    },
    MethodRule {
        method: "Page.setInterceptFileChooserDialog",
        rule: Rule::RefuseUnless(Condition::IsFalse("enabled")),
        reason: FILES,
    },
    MethodRule {
        method: "Input.dispatchDragEvent",
        rule: Rule::RefuseUnless(Condition::NoDraggedFiles),
        reason: FILES,
    },
    MethodRule {
        method: "Input.dispatchKeyEvent",
        rule: Rule::RefuseUnless(Condition::EditingKeyOnly),
        reason: "a key chord with Ctrl, Alt or Meta opens the browser's own pages and windows; editing chords (select all, copy, cut, paste, undo, redo) are sent",
    },
    MethodRule {
        method: "Extensions.loadUnpacked",
        rule: Rule::Refuse,
        reason: "extensions from disk are not loaded",
    },
    MethodRule {
        method: "PWA.*",
        rule: Rule::Refuse,
        reason: "installing web apps is not offered",
    },
    MethodRule {
        method: "Tethering.*",
        rule: Rule::Refuse,
        reason: "it binds ports in the browser's own process, outside the egress proxy",
    },
    MethodRule {
        method: "SystemInfo.*",
        rule: Rule::Refuse,
        reason: "the host's hardware and processes are not the client's to read",
    },
];

/// The row that judges `method`, if any: an exact row first, then its domain's `Domain.*` row.
pub(crate) fn rule_for(method: &str) -> Option<&'static MethodRule> {
    CDP_TABLE
        .iter()
        .find(|row| row.method == method)
        .or_else(|| {
            let (domain, _) = method.split_once('.')?;
            CDP_TABLE.iter().find(|row| {
                row.method
                    .strip_suffix(".*")
                    .is_some_and(|prefix| prefix == domain)
            })
        })
}

/// Windows virtual key codes (which Chromium matches its shortcuts on) that may be pressed with
/// Ctrl, Alt or Meta: editing keys, never a browser shortcut.
const EDITING_KEY_CODES: &[i64] = &[
    8,  // Backspace: delete a word
    13, // Enter
    16, 17, 18, // Shift, Control, Alt themselves
    35, 36, 37, 38, 39,
    40, // End, Home, arrows: move by word or line (Alt+Left is Back, below)
    46, // Delete
    65, 67, 86, 88, 89, 90, // A, C, V, X, Y, Z
    91, 92, 93, // Meta keys themselves
];

/// `key` values that may be pressed with Ctrl, Alt or Meta (compared without case).
const EDITING_KEYS: &[&str] = &[
    "Backspace",
    "Enter",
    "Shift",
    "Control",
    "Alt",
    "Meta",
    "End",
    "Home",
    "ArrowLeft",
    "ArrowRight",
    "ArrowUp",
    "ArrowDown",
    "Delete",
    "a",
    "c",
    "v",
    "x",
    "y",
    "z",
];

/// `code` values that may be pressed with Ctrl, Alt or Meta.
const EDITING_CODES: &[&str] = &[
    "Backspace",
    "Enter",
    "NumpadEnter",
    "ShiftLeft",
    "ShiftRight",
    "ControlLeft",
    "ControlRight",
    "AltLeft",
    "AltRight",
    "MetaLeft",
    "MetaRight",
    "End",
    "Home",
    "ArrowLeft",
    "ArrowRight",
    "ArrowUp",
    "ArrowDown",
    "Delete",
    "KeyA",
    "KeyC",
    "KeyV",
    "KeyX",
    "KeyY",
    "KeyZ",
];

/// Keys that open the browser's own tools without any modifier.
const SHORTCUT_KEY_CODES: &[i64] = &[123]; // F12: DevTools
const SHORTCUT_KEYS: &[&str] = &["F12"];

/// Whether a key event is an editing key or chord, judged on every field that names the key (a
/// client chooses them all, and Chromium matches shortcuts on the virtual key code).
pub(crate) fn editing_key_only(params: &serde_json::Map<String, serde_json::Value>) -> bool {
    // CDP modifiers: Alt = 1, Ctrl = 2, Meta = 4, Shift = 8.
    let modifiers = params
        .get("modifiers")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    let code = params
        .get("windowsVirtualKeyCode")
        .or_else(|| params.get("nativeVirtualKeyCode"))
        .and_then(serde_json::Value::as_i64);
    let key = params.get("key").and_then(serde_json::Value::as_str);
    let dom_code = params.get("code").and_then(serde_json::Value::as_str);
    let plain_shortcut = code.is_some_and(|c| SHORTCUT_KEY_CODES.contains(&c))
        || key.is_some_and(|k| SHORTCUT_KEYS.contains(&k))
        || dom_code.is_some_and(|k| SHORTCUT_KEYS.contains(&k));
    if plain_shortcut {
        return false;
    }
    // Alt, Ctrl and Meta are the low three bits; none of them held is plain typing.
    let chord_bits = modifiers & 0b111;
    if chord_bits == 0 {
        return true;
    }
    // Alt with an arrow is Back/Forward, and with Home the home page: browser navigation.
    let alt_only = chord_bits == 1;
    let navigation_codes = [35, 36, 37, 38, 39, 40];
    let navigation_names = [
        "End",
        "Home",
        "ArrowLeft",
        "ArrowRight",
        "ArrowUp",
        "ArrowDown",
    ];
    let navigates = code.is_some_and(|c| navigation_codes.contains(&c))
        || key.is_some_and(|k| navigation_names.contains(&k))
        || dom_code.is_some_and(|k| navigation_names.contains(&k));
    if alt_only && navigates {
        return false;
    }
    code.is_none_or(|c| EDITING_KEY_CODES.contains(&c))
        && key.is_none_or(|k| EDITING_KEYS.iter().any(|e| e.eq_ignore_ascii_case(k)))
        && dom_code.is_none_or(|k| EDITING_CODES.contains(&k))
        && (code.is_some() || key.is_some() || dom_code.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_has_one_row_and_every_row_reads_as_a_method() {
        let mut seen = std::collections::HashSet::new();
        for row in CDP_TABLE {
            assert!(seen.insert(row.method), "{} is listed twice", row.method);
            let (domain, name) = row.method.split_once('.').expect("Domain.method");
            assert!(
                domain.chars().all(|c| c.is_ascii_alphanumeric()),
                "{}",
                row.method
            );
            assert!(
                name == "*" || name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{}",
                row.method
            );
            assert!(!row.reason.is_empty());
        }
        assert_eq!(
            rule_for("Tethering.bind").map(|r| r.method),
            Some("Tethering.*")
        );
        assert_eq!(
            rule_for("Page.navigate").map(|r| r.method),
            Some("Page.navigate")
        );
        assert!(rule_for("Page.enable").is_none());
        assert!(rule_for("Tethering").is_none());
    }
}
