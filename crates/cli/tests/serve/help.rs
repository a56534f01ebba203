//! A person who steps in: a scripted worker asks for help; the task waits (`waiting_for_human`
//! over `GET` and its events); a real viewer (Node's `ws`) plays the person on the live view,
//! pressing a key, clicking a link to a forbidden listener and the lab page's button; the person
//! hands back and the worker's fresh look sees the click. The seal holds for the person: the
//! forbidden listener hears nothing and the record shows the refusal. Input outside the call is refused, anything
//! but an input event closes the socket, and another token can neither watch nor hand back.
//! Cancelling a task that waits ends it (`dashboard.rs`: from the live page).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use airlock_testkit::site::{Seen, site};
use base64::Engine;

use super::followed::{Events, conforms, get, openapi, queued, until_step};
use super::live::viewer_with;
use super::support::mean_colour;
use super::*;

const OTHER_TOKEN: &str = "second-token-abcdef0123456";

/// A red page: its top half is a button that turns the page green (and blue while the pointer is
/// over it), its bottom half a link to the forbidden listener (opening in a hidden frame, so the
/// page stays); the key `y` turns it yellow. A blinking corner keeps frames coming, so a person
/// sees each change.
fn help_site(forbidden: u16) -> u16 {
    let page = help_page(forbidden);
    let (port, _) = site(|_| HashMap::from([("/", ("200 OK", String::new(), page))]));
    port
}

pub(super) fn help_page(forbidden: u16) -> String {
    format!(
        "<!doctype html><title>Help</title><style>html,body{{margin:0;height:100%;background:#ff0000}}\
         body:has(#press:hover){{background:#0000ff}}\
         @keyframes blink{{from{{opacity:0}}to{{opacity:1}}}}\
         #blink{{position:fixed;right:0;bottom:0;width:8px;height:8px;background:#fff;animation:blink .3s infinite alternate}}\
         #press{{position:fixed;left:0;top:0;width:100%;height:50%;border:0;background:transparent;font-size:30px}}\
         #away{{position:fixed;left:0;top:50%;width:100%;height:50%;display:block;color:#ff0000}}</style>\
         <button id=press onclick=\"document.body.style.background='#00ff00';this.textContent='Pressed by a person'\">Press</button>\
         <a id=away href=\"http://127.0.0.1:{forbidden}/\" target=side>away</a>\
         <iframe name=side style=\"position:fixed;left:0;top:0;width:1px;height:1px;border:0\"></iframe><div id=blink></div>\
         <script>onkeydown=e=>{{if(e.key==='y')document.body.style.background='#ffff00'}}</script>"
    )
}

pub(super) fn forbidden_site() -> (u16, Seen) {
    site(|_| {
        HashMap::from([(
            "/",
            ("200 OK", String::new(), "never to be seen".to_owned()),
        )])
    })
}

/// A person on the task's live view.
struct Person {
    child: Child,
    input: ChildStdin,
    lines: BufReader<ChildStdout>,
}

impl Person {
    fn connect(served: &Served, token: &str, id: &str) -> Self {
        let mut child = viewer_with(served, token, id, Stdio::piped());
        let input = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            input,
            lines,
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        assert!(
            self.lines.read_line(&mut line).unwrap() > 0,
            "the viewer ended"
        );
        line.trim_end().to_owned()
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}").unwrap();
        self.input.flush().unwrap();
    }

    /// A press and release at (x, y).
    fn click(&mut self, x: u32, y: u32) {
        for event in ["mousePressed", "mouseReleased"] {
            self.send(
                &json!({"type": "input_mouse", "eventType": event, "x": x, "y": y,
                "button": "left", "clickCount": 1}),
            );
        }
    }

    /// Move the pointer over the button at each frame until the page shows it (blue): the
    /// stream takes input only some time after a viewer connects, and a move is harmless.
    fn until_pointer_seen(&mut self) {
        self.until_frame(
            |(r, g, b)| b > 200 && r < 60 && g < 60,
            |person| {
                person.send(&json!({"type": "input_mouse", "eventType": "mouseMoved",
                "x": 640, "y": 180, "button": "none"}));
            },
        );
    }

    /// Read until a frame whose mean colour passes `wanted`, doing `meanwhile` at each other.
    fn until_frame(
        &mut self,
        wanted: impl Fn((u64, u64, u64)) -> bool,
        meanwhile: impl Fn(&mut Self),
    ) {
        loop {
            let line = self.line();
            assert!(
                !line.starts_with("closed") && !line.starts_with("refused"),
                "{line}"
            );
            if line == "open" || line.starts_with("text ") {
                continue;
            }
            let jpeg = base64::engine::general_purpose::STANDARD
                .decode(&line)
                .unwrap();
            if wanted(mean_colour(&jpeg)) {
                return;
            }
            meanwhile(self);
        }
    }

    /// Read until a line that is not a frame.
    fn until_said(&mut self) -> String {
        loop {
            let line = self.line();
            if line == "open" || line.starts_with("text ") || line.contains(' ') {
                return line;
            }
        }
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read a task's events until its state is `state`; that event's data.
pub(super) fn until_state(events: &mut Events, state: &str) -> Value {
    while let Some((name, data)) = events.next() {
        if name == "state" && data["state"] == state {
            return data;
        }
    }
    panic!("the events ended before the state {state}");
}

fn hand_back(served: &Served, token: &str, id: &str) -> (u16, Value) {
    let auth = format!("authorization: Bearer {token}");
    let path = format!("/v1/tasks/{id}/hand-back");
    let (status, body) = request(served.port, "POST", &path, &[&auth], "");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn asks_for_help() -> Value {
    // The worker opens the task's start page itself before the first turn (the record's step 1).
    json!({"turns": [
        {"tool_calls": [{"name": "ask_human", "input": {"reason": "Press the button"}}]},
        // Time for the test to see input refused after the hand-back; it cancels the task.
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]},
        {"text": "The person pressed it."}
    ]})
}

/// A server whose queued task waits for a person: the forbidden listener, the server, its
/// directory, the task's id, its events so far, and the `state` event that said so.
struct Waiting {
    forbidden: (u16, Seen),
    served: Served,
    _dir: tempfile::TempDir,
    id: String,
    events: Events,
    said: Value,
}

fn waiting_task() -> Waiting {
    let forbidden = forbidden_site();
    let port = help_site(forbidden.0);
    let home = format!("http://127.0.0.1:{port}/");
    let task = json!({"task": "Get the button pressed", "url": home, "wait": false});
    let (served, dir, _, id) = queued(&asks_for_help(), port, &task);
    let mut events = Events::open(&served, TOKEN, &id);
    let said = until_state(&mut events, "waiting_for_human");
    Waiting {
        forbidden,
        served,
        _dir: dir,
        id,
        events,
        said,
    }
}

/// `DELETE` the task (`202`: it was running) and read its events to the end: the `done` event.
fn cancel_until_done(served: &Served, id: &str, events: &mut Events) -> Value {
    let auth = format!("authorization: Bearer {TOKEN}");
    let path = format!("/v1/tasks/{id}");
    assert_eq!(request(served.port, "DELETE", &path, &[&auth], "").0, 202);
    let mut done = None;
    while let Some((name, data)) = events.next() {
        if name == "done" {
            done = Some(data);
        }
    }
    done.unwrap()
}

#[test]
fn a_person_steps_in_through_the_live_view_and_the_worker_sees_what_they_did() {
    if !docker_ready() {
        return;
    }
    let Waiting {
        forbidden: (forbidden, forbidden_seen),
        served,
        _dir,
        id,
        mut events,
        said: waiting,
    } = waiting_task();
    assert_eq!(waiting["help"]["reason"], "Press the button", "{waiting}");
    let (status, body) = get(&served, TOKEN, &format!("/v1/tasks/{id}"));
    assert_eq!(status, 200, "{body}");
    let status_body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status_body["state"], "waiting_for_human");
    assert_eq!(status_body["help"]["timeout_secs"], 600);
    conforms(&openapi(&served), "TaskStatus", &status_body);

    // Another token: neither the view nor the hand-back, told as a missing task is.
    assert_eq!(hand_back(&served, OTHER_TOKEN, &id).0, 404);
    let mut stranger = Person::connect(&served, OTHER_TOKEN, &id);
    assert_eq!(stranger.until_said(), "refused 404");

    let mut person = Person::connect(&served, TOKEN, &id);
    person.until_pointer_seen();
    for event in ["keyDown", "keyUp"] {
        person.send(
            &json!({"type": "input_keyboard", "eventType": event, "key": "y",
            "code": "KeyY", "text": "y", "windowsVirtualKeyCode": 89}),
        );
    }
    person.until_frame(|(r, g, b)| r > 200 && g > 200 && b < 60, |_| {});
    person.click(640, 540);
    person.click(640, 180);
    person.until_frame(|(r, g, b)| g > 200 && r < 60 && b < 60, |_| {});
    let (status, handed) = hand_back(&served, TOKEN, &id);
    assert_eq!(status, 200, "{handed}");
    assert_eq!(handed["state"], "running");
    assert_eq!(
        hand_back(&served, TOKEN, &id).0,
        409,
        "nothing left to hand back"
    );

    // The call is closed: input is refused and reaches nothing.
    person.click(640, 180);
    for _ in ["press", "release"] {
        let said = person.until_said();
        assert!(said.contains("not waiting for a person"), "{said}");
    }
    // Anything but an input event closes the socket.
    person.send(&json!({"type": "config", "maxFps": 120}));
    assert_eq!(person.until_said(), "closed 1008");

    // The worker took its look and went on: the task is cancelled in its next step.
    // The model's step 2, its `wait` (the worker's opening is no step of the model's).
    until_step(&mut events, 2);
    let done = cancel_until_done(&served, &id, &mut events);
    assert_eq!(done["ended"], "cancelled");

    let (status, body) = get(&served, TOKEN, &format!("/v1/tasks/{id}/record"));
    assert_eq!(status, 200, "{body}");
    let record: Value = serde_json::from_str(&body).unwrap();
    let step = &record["steps"][1];
    assert_eq!(step["tool"], "ask_human", "{}", record["steps"][0]["tool"]);
    assert_eq!(step["help"]["outcome"], "handed_back");
    assert_eq!(step["help"]["actions"]["clicks"], 2, "{step}");
    assert_eq!(step["help"]["actions"]["keys"], 1, "{step}");
    // The worker's fresh look after the hand-back saw the person's click.
    let output = step["output"].as_str().unwrap();
    assert!(
        output.contains("A person acted in the browser (2 clicks, 1 key)"),
        "{output}"
    );
    assert!(output.contains("Pressed by a person"), "{output}");
    // The person's click on the forbidden link went nowhere.
    let refused = record["egress"]["refusals"].to_string();
    assert!(refused.contains(&forbidden.to_string()), "{refused}");
    assert!(forbidden_seen.lock().unwrap().is_empty());
    // The server's log has the refusal's one line, worded as a CDP lease's: target, class, reason.
    let log = served.log.lock().unwrap().clone();
    assert!(
        log.lines()
            .any(|line| line.contains("the egress proxy refused a request")
                && line.contains(&format!("127.0.0.1:{forbidden}"))
                && line.contains("class=")
                && line.contains("reason=")),
        "{log}"
    );
}

/// The Python MCP SDK's client, answering elicitations with `answer` (`accept` or `decline`;
/// `task` takes none), against a server started with `extra`.
fn mcp_task_answering(answer: &str, extra: &[&str]) -> (Value, Served, tempfile::TempDir) {
    let (forbidden, _) = forbidden_site();
    let port = help_site(forbidden);
    let home = format!("http://127.0.0.1:{port}/");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "ask_human", "input": {"reason": "Press the button"}}]},
        {"text": "Done."}
    ]});
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("127.0.0.1:{port}");
    let mut args = vec!["--allow", &allow];
    args.extend_from_slice(extra);
    let served = serve(&script, dir.path(), &args);
    let headers = json!({"Authorization": format!("Bearer {TOKEN}")});
    let task = json!({"task": "Get the button pressed", "url": home}).to_string();
    let result = sdk(&served, &headers, &[&task, answer]);
    (result, served, dir)
}

#[test]
fn an_mcp_client_is_asked_by_elicitation_and_accepting_hands_back() {
    if !docker_ready() {
        return;
    }
    let (result, served, _dir) = mcp_task_answering("accept", &[]);
    let asked = result["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{result}");
    let message = asked[0].as_str().unwrap();
    assert!(
        message.contains("Press the button")
            && message.contains("/live")
            && message.contains("/ui/tasks/task_"),
        "{message}"
    );
    assert_eq!(result["structured"]["ended"], "completed", "{result}");
    let record = result["structured"]["links"]["record"].as_str().unwrap();
    let (status, body) = get(&served, TOKEN, record);
    assert_eq!(status, 200, "{body}");
    let record: Value = serde_json::from_str(&body).unwrap();
    // Step 1 is the worker's opening of the start page.
    assert_eq!(
        record["steps"][1]["help"]["outcome"], "handed_back",
        "{record}"
    );
}

#[test]
fn declining_the_elicitation_ends_the_task() {
    if !docker_ready() {
        return;
    }
    let (result, _served, _dir) = mcp_task_answering("decline", &[]);
    assert_eq!(
        result["elicitations"].as_array().unwrap().len(),
        1,
        "{result}"
    );
    assert_eq!(result["structured"]["ended"], "cancelled", "{result}");
}

#[test]
fn an_mcp_client_without_elicitation_is_told_by_progress_and_the_call_ends_at_the_human_timeout() {
    if !docker_ready() {
        return;
    }
    let (result, _served, _dir) = mcp_task_answering("task", &["--human-timeout", "10"]);
    let told = result["progress"].to_string();
    assert!(
        told.contains("needs a person: Press the button") && told.contains("/hand-back"),
        "{result}"
    );
    assert_eq!(result["structured"]["ended"], "completed", "{result}");
    assert_eq!(result["texts"][0], "Done.", "{result}");
}
