//! Execs: made only with the commands the driver runs, as the container's own (non-root) user,
//! never privileged, always attached; started attached, never with a terminal.

use serde_json::{Map, Value, json};

use super::GateRefusal;
use super::strict_json::{field, unknown_keys};

/// The long-lived programs the driver starts by exec.
const LONG_LIVED: &[&str] = &[
    "/usr/local/bin/airlock-runner",
    "/usr/local/bin/airlock-cdp-browser",
];
/// The live view's exec, exactly: the relay copying its stdio to agent-browser's stream server
/// on the container's loopback (the image's `AGENT_BROWSER_STREAM_PORT`). The driver runs this
/// command; the gate admits the relay only in this shape, to a port on the container's loopback
/// ([`loopback_relay_exec`]).
pub const LIVE_VIEW_EXEC: [&str; 3] = [
    "/usr/local/bin/airlock-relay",
    "--stdio-to",
    "127.0.0.1:9223",
];

/// The relay's exec to `port` on the container's loopback: the live view's, and the one to the
/// browser's DevTools port (Chromium chooses it at launch), through which the driver holds the
/// session that gives a device touch. It reaches nothing a server could not already drive: the
/// browser answers agent-browser's commands, which the server runs, and the relay's own port
/// leads to the task's egress proxy. Pages cannot reach these ports (loopback goes through the
/// egress proxy, which refuses it), and the relay takes no other address.
#[must_use]
pub fn loopback_relay_exec(port: u16) -> [String; 3] {
    [
        LIVE_VIEW_EXEC[0].to_owned(),
        LIVE_VIEW_EXEC[1].to_owned(),
        format!("127.0.0.1:{port}"),
    ]
}

/// Whether `words` is [`loopback_relay_exec`] of some port, spelled as it spells it.
fn is_loopback_relay(words: &[String]) -> bool {
    let [program, flag, target] = words else {
        return false;
    };
    let port = target
        .strip_prefix("127.0.0.1:")
        .and_then(|port| port.parse::<u16>().ok())
        .filter(|port| *port != 0);
    program == LIVE_VIEW_EXEC[0]
        && flag == LIVE_VIEW_EXEC[1]
        && port.is_some_and(|port| *target == format!("127.0.0.1:{port}"))
}
/// The programs a one-off exec may run, always under `timeout --kill-after=2 <seconds>`.
const ONE_OFF: &[&str] = &[
    "agent-browser",
    "sh",
    "base64",
    "cat",
    "rm",
    "stat",
    "pdftotext",
    "true",
];

/// Judge an exec's creation body; the body to forward.
pub(crate) fn judge_create(body: &Value) -> Result<Value, GateRefusal> {
    let object = body
        .as_object()
        .ok_or_else(|| refused("the body", "must be an object"))?;
    if let Some(key) = unknown_keys(
        object,
        &["AttachStdin", "AttachStdout", "AttachStderr", "Tty", "Cmd"],
    )
    .first()
    {
        return Err(refused(
            key,
            "is not part of an exec Airlock makes (no User, Privileged, Env or WorkingDir)",
        ));
    }
    let flag = |key: &str| match field(object, key) {
        None => Ok(false),
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(refused(key, "must be true or false")),
    };
    let stdin = flag("AttachStdin")?;
    if !flag("AttachStdout")? || !flag("AttachStderr")? {
        return Err(refused(
            "AttachStdout",
            "an exec's output is always attached",
        ));
    }
    if flag("Tty")? {
        return Err(refused("Tty", "an exec never has a terminal"));
    }
    let command = command(object)?;
    Ok(json!({
        "AttachStdin": stdin,
        "AttachStdout": true,
        "AttachStderr": true,
        "Tty": false,
        "Cmd": command,
    }))
}

/// Judge an exec start's body: attached, no terminal.
pub(crate) fn judge_start(body: &Value) -> Result<Value, GateRefusal> {
    let object = body
        .as_object()
        .ok_or_else(|| refused("the body", "must be an object"))?;
    // `OutputCapacity` is bollard's own setting, sent along and ignored by dockerd; not forwarded.
    if let Some(key) =
        unknown_keys(object, &["Detach", "Tty", "ConsoleSize", "OutputCapacity"]).first()
    {
        return Err(refused(key, "is not part of an exec start Airlock makes"));
    }
    let detached = field(object, "Detach").is_some_and(|value| value != &json!(false));
    let tty = field(object, "Tty").is_some_and(|value| value != &json!(false));
    let console = field(object, "ConsoleSize").is_some_and(|value| !value.is_null());
    if detached || tty || console {
        return Err(refused(
            "Detach",
            "an exec is started attached, without a terminal",
        ));
    }
    Ok(json!({"Detach": false, "Tty": false}))
}

fn command(object: &Map<String, Value>) -> Result<Vec<String>, GateRefusal> {
    let why = "must be airlock-runner, airlock-cdp-browser, `airlock-relay --stdio-to 127.0.0.1:<port>` (the live view, a device's touch), or `timeout --kill-after=2 <seconds>` before one of the image's programs Airlock runs";
    let Some(Value::Array(items)) = field(object, "Cmd") else {
        return Err(refused("Cmd", why));
    };
    let words: Vec<String> = items
        .iter()
        .map(|item| item.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(|| refused("Cmd", why))?;
    let admitted = match words.as_slice() {
        [program] => LONG_LIVED.contains(&program.as_str()),
        [_, _, _] => is_loopback_relay(&words),
        [timeout, kill_after, seconds, program, ..] => {
            timeout == "timeout"
                && kill_after == "--kill-after=2"
                && !seconds.is_empty()
                && seconds.len() <= 6
                && seconds.bytes().all(|b| b.is_ascii_digit())
                && ONE_OFF.contains(&program.as_str())
        }
        _ => false,
    };
    if admitted && words.len() <= 4096 {
        Ok(words)
    } else {
        Err(refused("Cmd", why))
    }
}

fn refused(field: &str, why: &str) -> GateRefusal {
    GateRefusal::Field {
        field: format!("exec {field}"),
        why: why.to_owned(),
    }
}
