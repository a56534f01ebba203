//! The CDP guard: what a DevTools Protocol client may ask of a sealed browser.
//!
//! Every message a client sends passes [`CdpGuard::check`] before it reaches Chromium, and gets a
//! [`Verdict`]: sent on (always re-serialised from what the guard read, so the guard and Chromium
//! can never read two different commands out of one text), rewritten, refused with an error in
//! Chromium's own shape, or answered and the end of the connection.
//!
//! The guard is **not** the boundary: the sealed container and the egress proxy are, and they hold
//! for everything the guard lets through (a page the client opens still reaches only what the
//! egress policy allows). The guard keeps a client from turning the browser's own controls against
//! the seal: reading files through `file:` pages, opening the browser's internal pages, giving a
//! page the protocol, switching certificate checks off, setting a proxy of its own, writing
//! downloads, or handing the browser paths on disk.
//!
//! It is a state machine without I/O: the only state is whether the connection is closing, which
//! history entries lead where (read from the browser's answers to `Page.getNavigationHistory`, so
//! `Page.navigateToHistoryEntry` is judged by the URL it opens), and the record it keeps.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::url::{browser_clean, scheme_of};

/// Chromium's error code for a command it could not carry out.
const SERVER_ERROR: i64 = -32000;
/// JSON-RPC's code for a message that is not a command.
const INVALID_REQUEST: i64 = -32600;
/// How many notable decisions a connection's record keeps.
pub const RECORD_LIMIT: usize = 100;
/// The longest method name kept in the record (a client chooses it).
const RECORD_METHOD_CHARS: usize = 80;

/// What to do with one message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send `message` to the browser: the command as the guard read it.
    Forward {
        /// The command, re-serialised.
        message: String,
    },
    /// Send `message` to the browser instead of what the client sent.
    Rewrite {
        /// The changed command.
        message: String,
        /// What changed and why.
        why: &'static str,
    },
    /// Send nothing to the browser; answer the client with a `-32000` error naming the reason.
    Refuse {
        /// The error answer.
        reply: String,
        /// Why, as written in the answer.
        reason: String,
    },
    /// Not a command the guard can read: answer with a `-32600` error.
    Invalid {
        /// The error answer.
        reply: String,
        /// What was wrong.
        reason: String,
    },
    /// Answer the client with `reply`, then dispose of its browser and close the connection
    /// (WebSocket code 1000).
    Close {
        /// The answer (`{}`), sent before closing.
        reply: String,
    },
    /// The connection is closing: nothing more is sent to the browser or answered.
    Ignore,
}

impl Verdict {
    /// A short stable word for counters and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Forward { .. } => "forward",
            Self::Rewrite { .. } => "rewrite",
            Self::Refuse { .. } => "refuse",
            Self::Invalid { .. } => "invalid",
            Self::Close { .. } => "close",
            Self::Ignore => "ignore",
        }
    }
}

/// One notable decision: refused, rewritten, invalid, or the close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The command's method (cut to 80 characters), or empty when there was none.
    pub method: String,
    /// [`Verdict::kind`].
    pub verdict: &'static str,
    /// Why.
    pub reason: String,
}

/// The guard of one client connection.
#[derive(Debug, Default)]
pub struct CdpGuard {
    closing: bool,
    /// `Page.getNavigationHistory` commands sent on and not yet answered: (session, id).
    history_asked: HashSet<(Option<String>, i64)>,
    /// What each history entry the browser told of opens: (session, entry id) → URL.
    history: HashMap<(Option<String>, i64), String>,
    record: Vec<Recorded>,
    /// Decisions past the record's limit, counted but not kept.
    unrecorded: u64,
}

/// A command read from the client.
struct Command {
    id: i64,
    session: Option<String>,
    method: String,
    params: Map<String, Value>,
    /// The whole message, so a forward keeps every field the client sent.
    whole: Map<String, Value>,
}

/// How a command is judged.
enum Judgement {
    Forward,
    Rewrite(Map<String, Value>, &'static str),
    Refuse(String),
    Close,
}

impl CdpGuard {
    /// A guard for a new connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Judge one message from the client.
    pub fn check(&mut self, text: &str) -> Verdict {
        if self.closing {
            return Verdict::Ignore;
        }
        let command = match read_command(text) {
            Ok(command) => command,
            Err((id, reason)) => {
                let reply = error_reply(id.as_ref(), None, INVALID_REQUEST, &reason);
                self.note("", "invalid", &reason);
                return Verdict::Invalid { reply, reason };
            }
        };
        match self.judge(&command) {
            Judgement::Forward => {
                if command.method == "Page.getNavigationHistory" {
                    self.history_asked
                        .insert((command.session.clone(), command.id));
                }
                Verdict::Forward {
                    message: Value::Object(command.whole).to_string(),
                }
            }
            Judgement::Rewrite(params, why) => {
                let mut whole = command.whole;
                whole.insert("params".to_owned(), Value::Object(params));
                self.note(&command.method, "rewrite", why);
                Verdict::Rewrite {
                    message: Value::Object(whole).to_string(),
                    why,
                }
            }
            Judgement::Refuse(why) => {
                let reason = format!("airlock refuses {}: {why}", command.method);
                self.note(&command.method, "refuse", &reason);
                Verdict::Refuse {
                    reply: error_reply(
                        Some(&Value::from(command.id)),
                        command.session.as_deref(),
                        SERVER_ERROR,
                        &reason,
                    ),
                    reason,
                }
            }
            Judgement::Close => {
                self.closing = true;
                self.note(
                    &command.method,
                    "close",
                    "the client closed the browser: it is disposed of",
                );
                Verdict::Close {
                    reply: result_reply(
                        command.id,
                        command.session.as_deref(),
                        Value::Object(Map::new()),
                    ),
                }
            }
        }
    }

    /// Read a message from the browser, for what the guard must remember (where history entries
    /// lead). Cheap when no history was asked for: nothing is parsed.
    pub fn observe_reply(&mut self, text: &str) {
        if self.history_asked.is_empty() {
            return;
        }
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let Some(id) = message.get("id").and_then(Value::as_i64) else {
            return;
        };
        let session = message
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if !self.history_asked.remove(&(session.clone(), id)) {
            return;
        }
        let entries = message
            .get("result")
            .and_then(|result| result.get("entries"))
            .and_then(Value::as_array);
        for entry in entries.into_iter().flatten() {
            if let (Some(entry_id), Some(url)) = (
                entry.get("id").and_then(Value::as_i64),
                entry.get("url").and_then(Value::as_str),
            ) {
                self.history
                    .insert((session.clone(), entry_id), url.to_owned());
            }
        }
    }

    /// Whether a close was asked for (nothing more is forwarded).
    pub fn closing(&self) -> bool {
        self.closing
    }

    /// Begin closing for a reason of the server's own (a time limit): nothing more is forwarded.
    pub fn close(&mut self) {
        self.closing = true;
    }

    /// The first [`RECORD_LIMIT`] notable decisions.
    pub fn record(&self) -> &[Recorded] {
        &self.record
    }

    /// Notable decisions past the record's limit, counted only.
    pub fn unrecorded(&self) -> u64 {
        self.unrecorded
    }

    fn note(&mut self, method: &str, verdict: &'static str, reason: &str) {
        if self.record.len() >= RECORD_LIMIT {
            self.unrecorded += 1;
            return;
        }
        let method: String = method
            .chars()
            .filter(|c| !c.is_control())
            .take(RECORD_METHOD_CHARS)
            .collect();
        self.record.push(Recorded {
            method,
            verdict,
            reason: reason.to_owned(),
        });
    }

    fn judge(&self, command: &Command) -> Judgement {
        let params = &command.params;
        match command.method.as_str() {
            "Browser.close" | "Browser.crash" | "Browser.crashGpuProcess" => Judgement::Close,
            "Target.exposeDevToolsProtocol" => Judgement::Refuse(
                "it would give a page the DevTools protocol".to_owned(),
            ),
            "Target.sendMessageToTarget" => Judgement::Refuse(FLATTEN_ONLY.to_owned()),
            "Target.attachToTarget" if params.get("flatten") != Some(&Value::Bool(true)) => {
                Judgement::Refuse(FLATTEN_ONLY.to_owned())
            }
            "Target.setAutoAttach"
                if params.get("autoAttach") == Some(&Value::Bool(true))
                    && params.get("flatten") != Some(&Value::Bool(true)) =>
            {
                Judgement::Refuse(FLATTEN_ONLY.to_owned())
            }
            "Target.createBrowserContext"
                if present(params, "proxyServer") || present(params, "proxyBypassList") =>
            {
                Judgement::Refuse(
                    "a browser context may not set its own proxy: the egress proxy is the browser's only way out".to_owned(),
                )
            }
            "Target.setRemoteLocations" => Judgement::Refuse(
                "it opens connections of the browser's own, outside the egress proxy".to_owned(),
            ),
            "Target.openDevTools" => {
                Judgement::Refuse("the DevTools front end is one of the browser's own pages".to_owned())
            }
            "Security.setIgnoreCertificateErrors"
                if params.get("ignore") != Some(&Value::Bool(false)) =>
            {
                Judgement::Refuse(CERTIFICATES.to_owned())
            }
            "Security.setOverrideCertificateErrors"
                if params.get("override") != Some(&Value::Bool(false)) =>
            {
                Judgement::Refuse(CERTIFICATES.to_owned())
            }
            "Security.handleCertificateError" => Judgement::Refuse(CERTIFICATES.to_owned()),
            "Page.navigate" | "Target.createTarget" | "Network.loadNetworkResource" => {
                url_judgement(params.get("url"))
            }
            "Page.navigateToHistoryEntry" => {
                let entry = params.get("entryId").and_then(Value::as_i64);
                match entry.and_then(|entry| self.history.get(&(command.session.clone(), entry))) {
                    Some(url) => url_judgement(Some(&Value::String(url.clone()))),
                    // An entry the guard was never told of: only pages that passed the guard or
                    // that a page opened itself can be in the history, so Chromium decides.
                    None => Judgement::Forward,
                }
            }
            "Browser.setDownloadBehavior" | "Page.setDownloadBehavior" => {
                let mut pinned = Map::new();
                pinned.insert("behavior".to_owned(), Value::from("deny"));
                for keep in ["browserContextId", "eventsEnabled"] {
                    if let Some(value) = params.get(keep) {
                        pinned.insert(keep.to_owned(), value.clone());
                    }
                }
                Judgement::Rewrite(
                    pinned,
                    "downloads are pinned to deny: airlock keeps no files",
                )
            }
            "DOM.setFileInputFiles" => Judgement::Refuse(FILES.to_owned()),
            "Page.setInterceptFileChooserDialog"
                if params.get("enabled") != Some(&Value::Bool(false)) =>
            {
                Judgement::Refuse(FILES.to_owned())
            }
            "Input.dispatchDragEvent"
                if params
                    .get("data")
                    .and_then(|data| data.get("files"))
                    .and_then(Value::as_array)
                    .is_some_and(|files| !files.is_empty()) =>
            {
                Judgement::Refuse(FILES.to_owned())
            }
            "Extensions.loadUnpacked" => {
                Judgement::Refuse("extensions from disk are not loaded".to_owned())
            }
            method if method.starts_with("PWA.") => {
                Judgement::Refuse("installing web apps is not offered".to_owned())
            }
            _ => Judgement::Forward,
        }
    }
}

const FLATTEN_ONLY: &str =
    "only flattened sessions are served: attach with `flatten: true` and send with `sessionId`";
const CERTIFICATES: &str = "certificate checks stay on";
const FILES: &str = "the sealed browser takes no files from disk (no uploads, no file chooser)";

/// Whether a parameter is given and not null.
fn present(params: &Map<String, Value>, name: &str) -> bool {
    params.get(name).is_some_and(|value| !value.is_null())
}

/// The pages a client may open: the web (http, https), content it supplies itself (`data:`,
/// `blob:`, `javascript:`), and `about:blank` / `about:srcdoc`. Every other scheme is one of the
/// browser's own (`file:`, `chrome:`, `devtools:`, `view-source:`, other `about:` pages, …).
fn url_judgement(url: Option<&Value>) -> Judgement {
    let Some(url) = url else {
        return Judgement::Forward;
    };
    let Some(url) = url.as_str() else {
        return Judgement::Refuse("`url` must be a string".to_owned());
    };
    match page_refusal(url) {
        Some(why) => Judgement::Refuse(why),
        None => Judgement::Forward,
    }
}

/// Why a client may not open `url`, read as the browser reads it, if it may not.
pub fn page_refusal(url: &str) -> Option<String> {
    let cleaned = browser_clean(url);
    // Empty opens about:blank; text without a scheme is not a URL Chromium navigates to.
    let scheme = scheme_of(&cleaned)?;
    let rest = &cleaned[scheme.len() + 1..];
    let allowed = match scheme.as_str() {
        "http" | "https" | "data" | "blob" | "javascript" => true,
        "about" => {
            let page = rest.split(['?', '#']).next().unwrap_or_default();
            page.eq_ignore_ascii_case("blank") || page.eq_ignore_ascii_case("srcdoc")
        }
        _ => false,
    };
    (!allowed).then(|| {
        format!(
            "`{scheme}:` pages are the browser's own: open http(s), data:, blob: or about:blank pages"
        )
    })
}

/// Read a client's message as a command, or say why it is not one (with its id when readable).
fn read_command(text: &str) -> Result<Command, (Option<Value>, String)> {
    let value: Value = serde_json::from_str(text)
        .map_err(|error| (None, format!("the message is not JSON: {error}")))?;
    let Value::Object(whole) = value else {
        return Err((None, "a command is a JSON object".to_owned()));
    };
    let id = match whole.get("id") {
        Some(Value::Number(number)) if number.as_i64().is_some() => number.as_i64(),
        _ => None,
    };
    let Some(id) = id else {
        return Err((None, "a command needs an integer `id`".to_owned()));
    };
    let with_id = |reason: &str| (Some(Value::from(id)), reason.to_owned());
    let method = match whole.get("method") {
        Some(Value::String(method)) => method.clone(),
        _ => return Err(with_id("`method` must be a string")),
    };
    let params = match whole.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params.clone(),
        Some(_) => return Err(with_id("`params` must be an object")),
    };
    let session = match whole.get("sessionId") {
        None => None,
        Some(Value::String(session)) => Some(session.clone()),
        Some(_) => return Err(with_id("`sessionId` must be a string")),
    };
    Ok(Command {
        id,
        session,
        method,
        params,
        whole,
    })
}

fn result_reply(id: i64, session: Option<&str>, result: Value) -> String {
    let mut reply = Map::new();
    reply.insert("id".to_owned(), Value::from(id));
    reply.insert("result".to_owned(), result);
    if let Some(session) = session {
        reply.insert("sessionId".to_owned(), Value::from(session));
    }
    Value::Object(reply).to_string()
}

fn error_reply(id: Option<&Value>, session: Option<&str>, code: i64, message: &str) -> String {
    let mut error = Map::new();
    error.insert("code".to_owned(), Value::from(code));
    error.insert("message".to_owned(), Value::from(message));
    let mut reply = Map::new();
    reply.insert("id".to_owned(), id.cloned().unwrap_or(Value::Null));
    reply.insert("error".to_owned(), Value::Object(error));
    if let Some(session) = session {
        reply.insert("sessionId".to_owned(), Value::from(session));
    }
    Value::Object(reply).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

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
            assert!(!guard.closing());
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
            assert!(guard.closing());
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

    proptest! {
        #[test]
        fn refused_urls_are_refused_in_every_spelling(url in refused_url(), id in any::<i64>()) {
            for method in ["Page.navigate", "Target.createTarget"] {
                let mut guard = CdpGuard::new();
                let verdict = check(&mut guard, &json!({"id": id, "method": method, "params": {"url": url}}));
                prop_assert!(matches!(verdict, Verdict::Refuse { .. }), "{} {:?}: {:?}", method, url, verdict);
            }
        }

        #[test]
        fn any_text_gets_a_verdict_and_a_reply_keeps_its_id(text in any::<String>()) {
            let mut guard = CdpGuard::new();
            let verdict = guard.check(&text);
            if let Verdict::Invalid { reply, .. } = &verdict {
                let reply: Value = serde_json::from_str(reply).unwrap();
                prop_assert_eq!(&reply["error"]["code"], &json!(-32600));
            }
        }

        #[test]
        fn what_is_forwarded_is_what_was_judged(
            method in prop_oneof![Just("Page.navigate".to_owned()), Just("Runtime.evaluate".to_owned()), Just("Target.createTarget".to_owned()), "[A-Za-z.]{1,20}"],
            url in prop_oneof![refused_url(), "https?://[a-z]{1,8}\\.test/[a-z]{0,5}", any::<String>()],
            id in any::<i64>(),
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
}
