//! Reading a client's CDP message as a command, and shaping the guard's own answers in
//! Chromium's form. A command is parsed once and moved, never cloned: a client's largest message
//! costs its parsed size once, not twice.

use serde_json::{Map, Value};

/// Chromium's error code for a command it could not carry out.
pub(crate) const SERVER_ERROR: i64 = -32000;
/// JSON-RPC's code for a message that is not a command.
pub(crate) const INVALID_REQUEST: i64 = -32600;

/// A command read from the client.
pub(crate) struct Command {
    pub(crate) id: i64,
    pub(crate) session: Option<String>,
    pub(crate) method: String,
    /// The whole message, so a forward keeps every field the client sent.
    pub(crate) whole: Map<String, Value>,
}

impl Command {
    /// Its parameters (none given reads as empty).
    pub(crate) fn params(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        match self.whole.get("params") {
            Some(Value::Object(params)) => params,
            _ => &EMPTY,
        }
    }
}

/// The most JSON elements (values, keys) a command may hold. Real commands hold a few hundred;
/// a string costs one however long it is (a file's base64, a script). Parsing is refused past
/// this, before any value is built: 32 MiB of `[0,0,…]` would be sixteen million values, half a
/// gigabyte of memory for one message.
pub const MAX_JSON_ELEMENTS: usize = 100_000;

/// How many elements `text` would parse into, at most, counted from its structure (brackets,
/// commas, colons outside strings) without building anything; stops counting past `limit`.
fn elements_within(text: &str, limit: usize) -> bool {
    let mut count = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' | b',' | b':' => {
                count += 1;
                if count > limit {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// Read a client's message as a command, or say why it is not one (with its id when readable).
pub(crate) fn read_command(text: &str) -> Result<Command, (Option<i64>, String)> {
    if !elements_within(text, MAX_JSON_ELEMENTS) {
        return Err((
            None,
            format!(
                "the message holds more than {MAX_JSON_ELEMENTS} JSON elements; send large data as one string (base64)"
            ),
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|error| (None, format!("the message is not JSON: {error}")))?;
    let Value::Object(whole) = value else {
        return Err((None, "a command is a JSON object".to_owned()));
    };
    let id = match whole.get("id") {
        Some(Value::Number(number)) => number.as_i64(),
        _ => None,
    };
    let Some(id) = id else {
        return Err((None, "a command needs an integer `id`".to_owned()));
    };
    let with_id = |reason: &str| (Some(id), reason.to_owned());
    if id >= crate::cdp_ids::SERVER_ID_BASE {
        return Err(with_id(
            "ids from 2000000000 up are the server's own (its live view's commands): number commands below it",
        ));
    }
    let method = match whole.get("method") {
        Some(Value::String(method)) => method.clone(),
        _ => return Err(with_id("`method` must be a string")),
    };
    match whole.get("params") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(_) => return Err(with_id("`params` must be an object")),
    }
    let session = match whole.get("sessionId") {
        None => None,
        Some(Value::String(session)) => Some(session.clone()),
        Some(_) => return Err(with_id("`sessionId` must be a string")),
    };
    Ok(Command {
        id,
        session,
        method,
        whole,
    })
}

/// A successful answer.
pub(crate) fn result_reply(id: i64, session: Option<&str>, result: Value) -> String {
    let mut reply = Map::new();
    reply.insert("id".to_owned(), Value::from(id));
    reply.insert("result".to_owned(), result);
    if let Some(session) = session {
        reply.insert("sessionId".to_owned(), Value::from(session));
    }
    Value::Object(reply).to_string()
}

/// An error answer (`id` null when the message had none the guard could read).
pub(crate) fn error_reply(
    id: Option<i64>,
    session: Option<&str>,
    code: i64,
    message: &str,
) -> String {
    let mut error = Map::new();
    error.insert("code".to_owned(), Value::from(code));
    error.insert("message".to_owned(), Value::from(message));
    let mut reply = Map::new();
    reply.insert("id".to_owned(), id.map_or(Value::Null, Value::from));
    reply.insert("error".to_owned(), Value::Object(error));
    if let Some(session) = session {
        reply.insert("sessionId".to_owned(), Value::from(session));
    }
    Value::Object(reply).to_string()
}
