//! A mobile device's touch. agent-browser's `set device` gives pages the device's viewport, scale
//! and user agent, not touch; Chromium's touch emulation (`Emulation.setTouchEmulationEnabled`:
//! `navigator.maxTouchPoints`, `(pointer: coarse)`, `(hover: none)`, touch events) lasts only as
//! long as the DevTools session that set it. So the driver holds one for the task: a WebSocket to
//! the browser's DevTools port over an exec of the relay
//! ([`airlock_policy::loopback_relay_exec`]),
//! attached to every page and every frame in a process of its own, those open now and those
//! opened later (each held at its start until touch is set), and ended with the session. The
//! worker never reaches it; it asks Chromium for nothing else.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::exec_socket::{self, ExecSocket, Unconnected};

/// Touch points the page is told the device has (phones report 5).
const MAX_TOUCH_POINTS: u32 = 5;
/// The largest DevTools message taken. This session enables no domain, so it hears only the
/// answers to its own commands and `Target` events, all small.
const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// How the browser's DevTools address starts; the rest is the browser's id.
const BROWSER_PATH: &str = "/devtools/browser/";

/// The held session; dropping it ends the session, and with it touch.
pub(crate) struct Touch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Touch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Hold touch for the browser in `container`, whose DevTools address agent-browser printed as
/// `cdp_url` (`get cdp-url`). Returns once every page open now has touch, within `timeout`.
pub(crate) async fn hold(
    docker: &Docker,
    container: &str,
    cdp_url: &str,
    timeout: Duration,
) -> Result<Touch, String> {
    let (port, url) = browser_url(cdp_url)?;
    let relay = airlock_policy::loopback_relay_exec(port);
    let relay = relay.each_ref().map(String::as_str);
    let started = tokio::time::timeout(timeout, async {
        let mut socket =
            match exec_socket::connect(docker, container, &relay, &url, MAX_MESSAGE_BYTES).await {
                Ok(socket) => socket,
                Err(Unconnected::NoRelay) => {
                    return Err("Docker did not start the relay".to_owned());
                }
                Err(Unconnected::NoHandshake(why)) => {
                    return Err(format!("the browser's DevTools did not answer: {why}"));
                }
            };
        let mut emulating = Emulating::default();
        let first = emulating.start();
        send(&mut socket, first).await?;
        while !emulating.settled() {
            let message = next(&mut socket)
                .await?
                .ok_or("the browser's DevTools closed the session")?;
            let (out, failure) = emulating.on_message(&message);
            if let Some(failure) = failure {
                return Err(failure);
            }
            send(&mut socket, out).await?;
        }
        Ok((socket, emulating))
    })
    .await
    .map_err(|_| format!("touch was not set within {} s", timeout.as_secs()))?;
    let (socket, emulating) = started?;
    Ok(Touch {
        task: tokio::spawn(keep(socket, emulating)),
    })
}

/// The port and the browser's own DevTools address, from agent-browser's `get cdp-url`: a port on
/// the container's loopback, and the browser's path on it (nothing else is taken).
fn browser_url(cdp_url: &str) -> Result<(u16, String), String> {
    let printed = crate::runner::printed_value(cdp_url);
    let parsed = printed.strip_prefix("ws://127.0.0.1:").and_then(|rest| {
        let (port, id) = rest.split_once(BROWSER_PATH)?;
        let port = port.parse::<u16>().ok().filter(|port| *port != 0)?;
        let id_ok = !id.is_empty()
            && id.len() <= 64
            && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
        id_ok.then(|| (port, format!("ws://127.0.0.1:{port}{BROWSER_PATH}{id}")))
    });
    parsed.ok_or_else(|| {
        format!(
            "agent-browser gave the browser's DevTools address as {:?}, not a browser's address on the container's loopback",
            printed.chars().take(120).collect::<String>()
        )
    })
}

/// Set touch on each page or frame attached from here on, until the session ends.
async fn keep(mut socket: ExecSocket, mut emulating: Emulating) {
    loop {
        let message = match next(&mut socket).await {
            Ok(Some(message)) => message,
            Ok(None) => return,
            Err(why) => {
                tracing::debug!(%why, "a device's DevTools session ended");
                return;
            }
        };
        let (out, failure) = emulating.on_message(&message);
        if let Some(failure) = failure {
            tracing::warn!(%failure, "a page of a task emulating a device may have no touch");
        }
        if let Err(why) = send(&mut socket, out).await {
            tracing::debug!(%why, "a device's DevTools session ended");
            return;
        }
    }
}

async fn send(socket: &mut ExecSocket, messages: Vec<Value>) -> Result<(), String> {
    for message in messages {
        socket
            .send(Message::Text(message.to_string().into()))
            .await
            .map_err(|error| format!("the browser's DevTools session failed: {error}"))?;
    }
    Ok(())
}

/// The next DevTools message; `None` once the session has ended.
async fn next(socket: &mut ExecSocket) -> Result<Option<Value>, String> {
    loop {
        match socket.next().await {
            None | Some(Ok(Message::Close(_))) => return Ok(None),
            Some(Err(error)) => {
                return Err(format!("the browser's DevTools session failed: {error}"));
            }
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(text.as_str())
                    .map(Some)
                    .map_err(|error| {
                        format!("the browser's DevTools sent what is not JSON: {error}")
                    });
            }
            Some(Ok(_)) => {}
        }
    }
}

/// What the session has asked and is waiting for: a protocol state with no I/O.
#[derive(Default)]
struct Emulating {
    next_id: u64,
    /// Commands sent and not answered yet, each with what it asked.
    waiting: HashMap<u64, Asked>,
}

/// What a command asked, so that its failure is told in its own words.
#[derive(Clone, Copy)]
enum Asked {
    /// To attach to pages (the browser's) or to frames of other sites (a page's).
    Attach,
    /// To set touch on a page.
    PageTouch,
    /// To set touch on a frame of another site: it may fail, its page has touch.
    FrameTouch,
    /// To let a target held at its start go on.
    Resume,
}

impl Emulating {
    /// The first command: attach to every page, holding each new one at its start.
    fn start(&mut self) -> Vec<Value> {
        vec![self.command(
            None,
            Asked::Attach,
            "Target.setAutoAttach",
            auto_attach("page"),
        )]
    }

    /// Whether every command sent so far has its answer (touch is set on every page the
    /// browser had when the session began: they are attached before the first answer).
    fn settled(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Take one message: the commands it calls for, and a failure to report.
    fn on_message(&mut self, message: &Value) -> (Vec<Value>, Option<String>) {
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            let asked = self.waiting.remove(&id);
            let Some(error) = message.get("error") else {
                return (Vec::new(), None);
            };
            let why = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            let what = match asked {
                Some(Asked::PageTouch) => "setting touch on a page",
                Some(Asked::FrameTouch) => {
                    tracing::debug!(%why, "a frame of its own took no touch emulation");
                    return (Vec::new(), None);
                }
                Some(Asked::Attach) => "attaching to the browser's pages",
                Some(Asked::Resume) => "letting a new page go on",
                None => "an unasked answer",
            };
            return (Vec::new(), Some(format!("{what} failed: {why}")));
        }
        if message.get("method").and_then(Value::as_str) != Some("Target.attachedToTarget") {
            return (Vec::new(), None);
        }
        let params = &message["params"];
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return (Vec::new(), None);
        };
        let kind = params["targetInfo"]["type"].as_str().unwrap_or_default();
        if kind != "page" && kind != "iframe" {
            return (Vec::new(), None);
        }
        let session = Some(session.to_owned());
        let touch = self.command(
            session.clone(),
            if kind == "page" {
                Asked::PageTouch
            } else {
                Asked::FrameTouch
            },
            "Emulation.setTouchEmulationEnabled",
            json!({"enabled": true, "maxTouchPoints": MAX_TOUCH_POINTS}),
        );
        let mut out = vec![
            touch,
            // Frames of other sites run in processes of their own, and are targets of their own.
            self.command(
                session.clone(),
                Asked::Attach,
                "Target.setAutoAttach",
                auto_attach("iframe"),
            ),
        ];
        if params["waitingForDebugger"].as_bool() == Some(true) {
            out.push(self.command(
                session,
                Asked::Resume,
                "Runtime.runIfWaitingForDebugger",
                json!({}),
            ));
        }
        (out, None)
    }

    fn command(
        &mut self,
        session: Option<String>,
        asked: Asked,
        method: &str,
        params: Value,
    ) -> Value {
        self.next_id += 1;
        self.waiting.insert(self.next_id, asked);
        let mut message = serde_json::Map::new();
        message.insert("id".to_owned(), json!(self.next_id));
        message.insert("method".to_owned(), json!(method));
        message.insert("params".to_owned(), params);
        if let Some(session) = session {
            message.insert("sessionId".to_owned(), Value::String(session));
        }
        Value::Object(message)
    }
}

/// Attach to targets of `kind` only, each new one held at its start until it is resumed.
fn auto_attach(kind: &str) -> Value {
    json!({
        "autoAttach": true,
        "waitForDebuggerOnStart": true,
        "flatten": true,
        "filter": [{"type": kind, "exclude": false}],
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Emulating, browser_url};

    #[test]
    fn only_a_browser_address_on_the_containers_loopback_is_taken() {
        assert_eq!(
            browser_url("ws://127.0.0.1:41235/devtools/browser/0f3c-9a\n").unwrap(),
            (
                41235,
                "ws://127.0.0.1:41235/devtools/browser/0f3c-9a".to_owned()
            )
        );
        for printed in [
            "ws://10.0.0.1:41235/devtools/browser/0f3c",
            "ws://127.0.0.1:41235/devtools/page/0f3c",
            "ws://127.0.0.1:0/devtools/browser/0f3c",
            "ws://127.0.0.1:41235/devtools/browser/",
            "ws://127.0.0.1:41235/devtools/browser/../x",
            "✗ Browser not launched",
        ] {
            assert!(browser_url(printed).is_err(), "{printed}");
        }
    }

    #[test]
    fn each_page_gets_touch_and_its_frames_then_goes_on() {
        let mut emulating = Emulating::default();
        let first = emulating.start();
        assert_eq!(first[0]["method"], "Target.setAutoAttach");
        assert_eq!(first[0]["params"]["filter"][0]["type"], "page");
        assert!(!emulating.settled());

        // A page open before the session: not held, so not resumed.
        let (out, failure) = emulating.on_message(&json!({
            "method": "Target.attachedToTarget",
            "params": {"sessionId": "S1", "targetInfo": {"type": "page"}, "waitingForDebugger": false}
        }));
        assert!(failure.is_none());
        let methods: Vec<_> = out.iter().map(|m| m["method"].as_str().unwrap()).collect();
        assert_eq!(
            methods,
            ["Emulation.setTouchEmulationEnabled", "Target.setAutoAttach"]
        );
        assert!(out.iter().all(|m| m["sessionId"] == "S1"));
        assert_eq!(out[0]["params"]["maxTouchPoints"], 5);
        assert_eq!(out[1]["params"]["filter"][0]["type"], "iframe");

        // Answers to all three: settled.
        for id in 1..=3 {
            let (out, failure) = emulating.on_message(&json!({"id": id, "result": {}}));
            assert!(out.is_empty() && failure.is_none());
        }
        assert!(emulating.settled());

        // A tab the page opens later is held at its start, then resumed after touch.
        let (out, _) = emulating.on_message(&json!({
            "method": "Target.attachedToTarget",
            "params": {"sessionId": "S2", "targetInfo": {"type": "page"}, "waitingForDebugger": true}
        }));
        let methods: Vec<_> = out.iter().map(|m| m["method"].as_str().unwrap()).collect();
        assert_eq!(
            methods,
            [
                "Emulation.setTouchEmulationEnabled",
                "Target.setAutoAttach",
                "Runtime.runIfWaitingForDebugger"
            ]
        );
    }

    #[test]
    fn a_failed_touch_is_told_and_other_targets_are_left_alone() {
        let mut emulating = Emulating::default();
        emulating.start();
        let (out, _) = emulating.on_message(&json!({
            "method": "Target.attachedToTarget",
            "params": {"sessionId": "W", "targetInfo": {"type": "worker"}, "waitingForDebugger": true}
        }));
        assert!(out.is_empty());
        let (out, _) = emulating.on_message(&json!({
            "method": "Target.attachedToTarget",
            "params": {"sessionId": "S", "targetInfo": {"type": "page"}}
        }));
        let touch_id = out[0]["id"].as_u64().unwrap();
        let (_, failure) = emulating.on_message(
            &json!({"id": touch_id, "error": {"code": -32000, "message": "Not supported"}}),
        );
        assert_eq!(
            failure.as_deref(),
            Some("setting touch on a page failed: Not supported")
        );
    }
}
