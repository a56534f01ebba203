//! Watching a CDP lease's page without its client seeing the watch.
//!
//! A lease's browser has one DevTools pipe, and the client's messages share it. The watch adds
//! its own: it lists the targets, attaches to the page with a session of its own (flat mode),
//! starts a screencast there, and acknowledges each frame when the caller says so (the ack is
//! what lets Chromium send the next, so the caller's pace bounds the rate). Everything it sends
//! carries an id from [`SERVER_ID_BASE`] up, which the guard refuses to clients, and everything
//! the browser says about the watch (answers to those ids, events of its session, the
//! attach and detach events naming that session) is taken out before the client could read it.
//! This is a state machine without I/O: it says what to send and reads what arrives.
//!
//! A page at rest sends a screencast one frame when it starts, if Chromium's copy of the surface
//! succeeds; on a busy machine it can fail, and then nothing comes until the page changes. So the
//! watch also asks for one screenshot when it starts, shown unless a screencast frame came first.
//!
//! Telling the watch's messages apart costs nearly nothing for the client's: Chromium writes an
//! answer's `id` first and a session's `sessionId` last, so an answer is read by its first bytes
//! and an event by its last; only the rare `Target.attachedToTarget`/`detachedFromTarget` events
//! are parsed whole.

use std::collections::VecDeque;

use serde_json::{Value, json};

use crate::cdp_ids::{SERVER_ID_BASE, WATCH_IDS, leading_id, next_in};

/// The largest screencast frame kept, as base64 (a 1280×720 JPEG is about 100 KB).
pub const MAX_FRAME_BASE64: usize = 6 * 1024 * 1024;
/// Frames per second a watch of a page asks for (a task's or a lease's): enough to follow a
/// page, little to carry.
pub const LIVE_MAX_FPS: u32 = 5;
/// Watches of one page at once (each costs its browser a screencast client).
pub const MAX_LIVE_WATCHES: usize = 4;
/// The frame size asked for: the lease's default viewport, at most.
const FRAME_WIDTH: u32 = 1280;
const FRAME_HEIGHT: u32 = 720;
/// Sessions the watch has left but whose detach event has not arrived yet.
const RETIRED_LIMIT: usize = 8;
/// Attach events held while the watch's own attach is under way; past this they pass on.
const HELD_LIMIT: usize = 8;

/// Where the watch is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Idle,
    /// `Target.getTargets` is asked (its id).
    Listing(i64),
    /// `Target.attachToTarget` is asked: its id, the target, and whether the watch ended since
    /// (then the session is left as soon as it is known).
    Attaching {
        id: i64,
        target: String,
        abandon: bool,
    },
    /// Attached, the screencast asked for.
    Watching(String),
}

/// What the caller does with a message the watch took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchAction {
    /// Send this to the browser now.
    Send(String),
    /// A frame arrived: show it, then send `ack` to the browser when the next frame is due.
    Frame {
        /// The JPEG, in base64 as Chromium sent it.
        jpeg_base64: String,
        /// The acknowledgement that lets Chromium send the next frame.
        ack: String,
    },
    /// There is no page to watch (none open, or the watched one went): try again later.
    NoPage,
    /// Pass this on to the client after all: an attach event the watch held while its own
    /// attach was under way, which turned out to be the client's.
    ToClient(String),
    /// The page as it was when the watch started (a screenshot, JPEG in base64): show it; no
    /// acknowledgement is due.
    Still(String),
}

/// One lease's watch.
#[derive(Debug)]
pub struct CdpWatch {
    next_id: i64,
    state: State,
    /// Sessions left behind, until the browser says they are gone (oldest first, bounded).
    retired: VecDeque<String>,
    /// Attach events for the watched target that came while its attach was under way: the
    /// watch's own is one of them, and which one is known only from the attach's answer.
    held: Vec<String>,
    /// The id of the starting screenshot, until it is answered or a screencast frame comes.
    still: Option<i64>,
}

impl Default for CdpWatch {
    fn default() -> Self {
        Self {
            next_id: SERVER_ID_BASE,
            state: State::Idle,
            retired: VecDeque::new(),
            held: Vec::new(),
            still: None,
        }
    }
}

impl CdpWatch {
    /// A watch that is not watching yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether it is watching or on its way to.
    pub fn active(&self) -> bool {
        self.state != State::Idle
    }

    /// Start watching: the command to send, or `None` when already started.
    pub fn begin(&mut self) -> Option<String> {
        if let State::Attaching { abandon, .. } = &mut self.state {
            // Ended and begun again before the attach answered: keep that attach.
            *abandon = false;
            return None;
        }
        if self.active() {
            return None;
        }
        let id = self.take_id();
        self.state = State::Listing(id);
        Some(json!({"id": id, "method": "Target.getTargets"}).to_string())
    }

    /// Stop watching: the command to send, if there is one. An attach still under way is left
    /// when its answer comes.
    pub fn end(&mut self) -> Option<String> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Watching(session) => Some(self.detach(session)),
            State::Attaching { id, target, .. } => {
                self.state = State::Attaching {
                    id,
                    target,
                    abandon: true,
                };
                None
            }
            State::Idle | State::Listing(_) => None,
        }
    }

    /// Read one message from the browser: `None` when it is the client's (pass it on), or what
    /// to do for the watch's own (never passed on).
    pub fn read(&mut self, text: &str) -> Option<Vec<WatchAction>> {
        if let Some(id) = leading_id(text) {
            return (id >= SERVER_ID_BASE).then(|| self.answer(id, text));
        }
        if !self.active() && self.retired.is_empty() {
            return None;
        }
        if let State::Attaching { target, .. } = &self.state
            && self.held.len() < HELD_LIMIT
            && text.starts_with("{\"method\":\"Target.attachedToTarget\"")
            && attached_target(text).as_deref() == Some(target.as_str())
        {
            self.held.push(text.to_owned());
            return Some(Vec::new());
        }
        if self.is_ours(session_suffix(text)?) {
            return Some(self.event(text));
        }
        None
    }

    /// The session a message ends with, if any is the watch's (current or retired).
    fn is_ours(&self, session: &str) -> bool {
        matches!(&self.state, State::Watching(ours) if ours == session)
            || self.retired.iter().any(|retired| retired == session)
    }

    fn take_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id = next_in(id, &WATCH_IDS);
        id
    }

    fn detach(&mut self, session: String) -> String {
        let id = self.take_id();
        let command = json!({
            "id": id,
            "method": "Target.detachFromTarget",
            "params": {"sessionId": session},
        })
        .to_string();
        if self.retired.len() >= RETIRED_LIMIT {
            self.retired.pop_front();
        }
        self.retired.push_back(session);
        command
    }

    /// An answer to one of the watch's commands.
    fn answer(&mut self, id: i64, text: &str) -> Vec<WatchAction> {
        match &self.state {
            State::Listing(asked) if *asked == id => {
                let Some(target) = parse(text).as_ref().and_then(page_to_watch) else {
                    self.state = State::Idle;
                    return vec![WatchAction::NoPage];
                };
                let id = self.take_id();
                let attach = json!({
                    "id": id,
                    "method": "Target.attachToTarget",
                    "params": {"targetId": target, "flatten": true},
                });
                self.state = State::Attaching {
                    id,
                    target,
                    abandon: false,
                };
                vec![WatchAction::Send(attach.to_string())]
            }
            State::Attaching {
                id: asked, abandon, ..
            } if *asked == id => {
                let abandon = *abandon;
                let session = parse(text).as_ref().and_then(answered_session);
                let mut actions = self.release_held(session.as_deref());
                match session {
                    Some(session) if abandon => {
                        self.state = State::Idle;
                        actions.push(WatchAction::Send(self.detach(session)));
                    }
                    Some(session) => {
                        let id = self.take_id();
                        let start = json!({
                            "id": id,
                            "method": "Page.startScreencast",
                            "params": {"format": "jpeg", "quality": 70, "maxWidth": FRAME_WIDTH, "maxHeight": FRAME_HEIGHT},
                            "sessionId": session,
                        });
                        let still = self.take_id();
                        let capture = json!({
                            "id": still,
                            "method": "Page.captureScreenshot",
                            "params": {"format": "jpeg", "quality": 70},
                            "sessionId": session,
                        });
                        self.still = Some(still);
                        self.state = State::Watching(session);
                        actions.push(WatchAction::Send(start.to_string()));
                        actions.push(WatchAction::Send(capture.to_string()));
                    }
                    None => {
                        self.state = State::Idle;
                        if !abandon {
                            actions.push(WatchAction::NoPage);
                        }
                    }
                }
                actions
            }
            State::Watching(_) if self.still == Some(id) => {
                self.still = None;
                let data = parse(text).and_then(|answer| {
                    Some(answer.get("result")?.get("data")?.as_str()?.to_owned())
                });
                match data {
                    Some(data) if data.len() <= MAX_FRAME_BASE64 => vec![WatchAction::Still(data)],
                    _ => Vec::new(),
                }
            }
            // Answers to the screencast's start, acks and detaches, and a screenshot a frame
            // overtook: nothing to do.
            _ => Vec::new(),
        }
    }

    /// The held attach events back to the client, but for the one naming the watch's session.
    fn release_held(&mut self, ours: Option<&str>) -> Vec<WatchAction> {
        std::mem::take(&mut self.held)
            .into_iter()
            .filter(|held| ours.is_none() || session_suffix(held) != ours)
            .map(WatchAction::ToClient)
            .collect()
    }

    /// An event of the watch's session, or about it.
    fn event(&mut self, text: &str) -> Vec<WatchAction> {
        let Some(event) = parse(text) else {
            return Vec::new();
        };
        let method = event.get("method").and_then(Value::as_str).unwrap_or("");
        let params = event.get("params");
        match method {
            "Page.screencastFrame" => {
                let (State::Watching(session), Some(params)) = (&self.state, params) else {
                    return Vec::new();
                };
                let session = session.clone();
                // A frame is newer than the starting screenshot could be.
                self.still = None;
                let Some(frame) = params.get("sessionId").and_then(Value::as_i64) else {
                    return Vec::new();
                };
                let ack = json!({
                    "id": self.take_id(),
                    "method": "Page.screencastFrameAck",
                    "params": {"sessionId": frame},
                    "sessionId": session,
                })
                .to_string();
                match params.get("data").and_then(Value::as_str) {
                    Some(data) if data.len() <= MAX_FRAME_BASE64 => vec![WatchAction::Frame {
                        jpeg_base64: data.to_owned(),
                        ack,
                    }],
                    // Too large to keep: skip it, but let the next one come.
                    _ => vec![WatchAction::Send(ack)],
                }
            }
            "Target.detachedFromTarget" => {
                let gone = params
                    .and_then(|params| params.get("sessionId"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.retired.retain(|retired| retired != gone);
                if matches!(&self.state, State::Watching(ours) if ours == gone) {
                    self.state = State::Idle;
                    return vec![WatchAction::NoPage];
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

fn parse(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

/// The session an attach's answer names.
fn answered_session(answer: &Value) -> Option<String> {
    Some(answer.get("result")?.get("sessionId")?.as_str()?.to_owned())
}

/// The target an attach event is about.
fn attached_target(text: &str) -> Option<String> {
    let event = parse(text)?;
    Some(
        event
            .get("params")?
            .get("targetInfo")?
            .get("targetId")?
            .as_str()?
            .to_owned(),
    )
}

/// The session a message is about: the `sessionId` it ends with (Chromium writes a session's
/// id last), or for the browser's attach and detach events, the session they name.
fn session_suffix(text: &str) -> Option<&str> {
    if text.starts_with("{\"method\":\"Target.attachedToTarget\"")
        || text.starts_with("{\"method\":\"Target.detachedFromTarget\"")
    {
        let start = text.find("\"sessionId\":\"")? + "\"sessionId\":\"".len();
        let length = text[start..].find('"')?;
        return Some(&text[start..start + length]);
    }
    let inner = text.strip_suffix("\"}")?;
    let start = inner.rfind("\"sessionId\":\"")? + "\"sessionId\":\"".len();
    Some(&inner[start..])
}

/// Which page to watch from a `Target.getTargets` answer: the last page the client is attached
/// to (the one it opened last, as Chromium lists them), else the last page.
fn page_to_watch(answer: &Value) -> Option<String> {
    let targets = answer.get("result")?.get("targetInfos")?.as_array()?;
    let pages: Vec<&Value> = targets
        .iter()
        .filter(|target| target.get("type").and_then(Value::as_str) == Some("page"))
        .collect();
    let attached = pages
        .iter()
        .rev()
        .find(|page| page.get("attached").and_then(Value::as_bool) == Some(true));
    let page = attached.or_else(|| pages.last())?;
    Some(page.get("targetId")?.as_str()?.to_owned())
}

#[cfg(test)]
mod tests;
