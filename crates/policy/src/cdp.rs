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
//! What each method gets is a table (`cdp_table.rs`); this file is the state machine around it,
//! without I/O: whether the connection is closing, which history entries lead where (read from the
//! browser's answers to `Page.getNavigationHistory`, so `Page.navigateToHistoryEntry` is judged by
//! the URL it opens), and the record it keeps. Everything a client can make it hold is bounded:
//! at most [`HISTORY_ASKED_LIMIT`] history requests awaiting an answer, [`HISTORY_LIMIT`] entries
//! remembered, [`RECORD_LIMIT`] decisions recorded.

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value};

use crate::cdp_message::{
    Command, INVALID_REQUEST, SERVER_ERROR, error_reply, read_command, result_reply,
};
use crate::cdp_table::{Condition, Rule, editing_key_only, rule_for};
use crate::url::{browser_clean, scheme_of};

/// How many notable decisions a connection's record keeps.
pub const RECORD_LIMIT: usize = 100;
/// The longest method name kept in the record (a client chooses it).
const RECORD_METHOD_CHARS: usize = 80;
/// History requests awaiting the browser's answer that the guard remembers; older ones are
/// forgotten (their entries are then judged by Chromium alone, as unknown ones are).
pub const HISTORY_ASKED_LIMIT: usize = 64;
/// History entries the guard remembers where they lead.
pub const HISTORY_LIMIT: usize = 1024;

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
    /// `Page.getNavigationHistory` commands sent on and not yet answered: (session, id), oldest
    /// first, at most [`HISTORY_ASKED_LIMIT`].
    history_asked: VecDeque<(Option<String>, i64)>,
    /// What each history entry the browser told of opens: (session, entry id) → URL, at most
    /// [`HISTORY_LIMIT`].
    history: HashMap<(Option<String>, i64), String>,
    record: Vec<Recorded>,
    /// Decisions past the record's limit, counted but not kept.
    unrecorded: u64,
}

/// How a command is judged.
enum Judgement {
    Forward,
    Rewrite(Map<String, Value>, &'static str),
    Refuse(String),
    Close(&'static str),
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
                let reply = error_reply(id, None, INVALID_REQUEST, &reason);
                self.note("", "invalid", &reason);
                return Verdict::Invalid { reply, reason };
            }
        };
        match self.judge(&command) {
            Judgement::Forward => {
                if command.method == "Page.getNavigationHistory" {
                    if self.history_asked.len() >= HISTORY_ASKED_LIMIT {
                        self.history_asked.pop_front();
                    }
                    self.history_asked
                        .push_back((command.session.clone(), command.id));
                }
                Verdict::Forward {
                    message: Value::Object(command.whole).to_string(),
                }
            }
            Judgement::Rewrite(params, why) => {
                self.note(&command.method, "rewrite", why);
                let mut whole = command.whole;
                whole.insert("params".to_owned(), Value::Object(params));
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
                        Some(command.id),
                        command.session.as_deref(),
                        SERVER_ERROR,
                        &reason,
                    ),
                    reason,
                }
            }
            Judgement::Close(why) => {
                self.closing = true;
                self.note(&command.method, "close", why);
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
    /// lead). Cheap for every other message: nothing is parsed unless a history answer is
    /// awaited and the text can hold one (a screenshot's base64 never holds `"entries"`).
    pub fn observe_reply(&mut self, text: &str) {
        if self.history_asked.is_empty() || !text.contains("\"entries\"") {
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
        let key = (session, id);
        let Some(position) = self.history_asked.iter().position(|asked| *asked == key) else {
            return;
        };
        self.history_asked.remove(position);
        let entries = message
            .get("result")
            .and_then(|result| result.get("entries"))
            .and_then(Value::as_array);
        for entry in entries.into_iter().flatten() {
            if self.history.len() >= HISTORY_LIMIT {
                break;
            }
            if let (Some(entry_id), Some(url)) = (
                entry.get("id").and_then(Value::as_i64),
                entry.get("url").and_then(Value::as_str),
            ) {
                self.history
                    .insert((key.0.clone(), entry_id), url.to_owned());
            }
        }
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

    /// How many history requests and entries it holds now (both bounded).
    pub fn history_held(&self) -> (usize, usize) {
        (self.history_asked.len(), self.history.len())
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
        let Some(row) = rule_for(&command.method) else {
            return Judgement::Forward;
        };
        let params = command.params();
        match row.rule {
            Rule::Close => Judgement::Close(row.reason),
            Rule::Refuse => Judgement::Refuse(row.reason.to_owned()),
            Rule::RefuseUnless(condition) => {
                if holds(condition, params) {
                    Judgement::Forward
                } else {
                    Judgement::Refuse(row.reason.to_owned())
                }
            }
            Rule::PageUrl(name) => url_judgement(params.get(name), name),
            Rule::HistoryEntry => {
                let entry = params.get("entryId").and_then(Value::as_i64);
                match entry.and_then(|entry| self.history.get(&(command.session.clone(), entry))) {
                    Some(url) => match page_refusal(url) {
                        Some(why) => Judgement::Refuse(why),
                        None => Judgement::Forward,
                    },
                    // An entry the guard was never told of: only pages that passed the guard or
                    // that a page opened itself can be in the history, so Chromium decides.
                    None => Judgement::Forward,
                }
            }
            Rule::DenyDownloads => {
                let mut pinned = Map::new();
                pinned.insert("behavior".to_owned(), Value::from("deny"));
                for keep in ["browserContextId", "eventsEnabled"] {
                    if let Some(value) = params.get(keep) {
                        pinned.insert(keep.to_owned(), value.clone());
                    }
                }
                Judgement::Rewrite(pinned, row.reason)
            }
        }
    }
}

/// Whether the parameters meet a table row's condition.
fn holds(condition: Condition, params: &Map<String, Value>) -> bool {
    let is_true = |name: &str| params.get(name) == Some(&Value::Bool(true));
    match condition {
        Condition::Flattened => is_true("flatten"),
        Condition::FlattenedIfAutoAttaching => !is_true("autoAttach") || is_true("flatten"),
        Condition::Absent(names) => names
            .iter()
            .all(|name| params.get(*name).is_none_or(Value::is_null)),
        Condition::IsFalse(name) => params.get(name) == Some(&Value::Bool(false)),
        Condition::NoDraggedFiles => params
            .get("data")
            .and_then(|data| data.get("files"))
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty),
        Condition::NoRedirectToOwnPages => {
            if params
                .get("binaryResponseHeaders")
                .is_some_and(|v| !v.is_null())
            {
                return false;
            }
            let headers = params.get("responseHeaders").and_then(Value::as_array);
            !headers.into_iter().flatten().any(|header| {
                let named_location = header
                    .get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|name| name.trim().eq_ignore_ascii_case("location"));
                let value = header.get("value").and_then(Value::as_str).unwrap_or("");
                named_location && page_refusal(value).is_some()
            })
        }
        Condition::EditingKeyOnly => editing_key_only(params),
    }
}

/// The pages a client may open: the web (http, https), content it supplies itself (`data:`,
/// `blob:`, `javascript:`), and `about:blank` / `about:srcdoc`. Every other scheme is one of the
/// browser's own (`file:`, `chrome:`, `devtools:`, `view-source:`, other `about:` pages, …).
fn url_judgement(url: Option<&Value>, name: &str) -> Judgement {
    let Some(url) = url else {
        return Judgement::Forward;
    };
    let Some(url) = url.as_str() else {
        return Judgement::Refuse(format!("`{name}` must be a string"));
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
