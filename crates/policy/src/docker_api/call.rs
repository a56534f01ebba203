//! Which Docker Engine API call a request is, read strictly: an optional version prefix
//! (`/v1.41`), then a path of plain segments (no `%`, no `.` or `..`, no empty segment, no
//! backslash), and a query of distinct `name=value` pairs decoded as Go decodes them (`+` is a
//! space). Anything with a second reading is refused, so what is judged is what dockerd serves.

use percent_encoding::percent_decode_str;

use super::GateRefusal;

/// The calls the gate knows. Container and exec ids are plain names or hex ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `GET`/`HEAD /_ping`.
    Ping,
    /// `GET /version`.
    Version,
    /// `GET /info`, answered by the gate with the daemon's runtimes alone.
    Info,
    /// `GET /images/{name}/json`.
    ImageInspect(String),
    /// `POST /containers/create`.
    Create,
    /// `GET /containers/json`.
    List,
    /// `GET /events`.
    Events,
    /// A call on one container.
    Container(String, ContainerCall),
    /// `POST /exec/{id}/start`.
    ExecStart(String),
    /// `GET /exec/{id}/json`.
    ExecInspect(String),
}

/// What is asked of one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerCall {
    /// `GET /containers/{id}/json`.
    Inspect,
    /// `POST /containers/{id}/start`.
    Start,
    /// `POST /containers/{id}/pause`.
    Pause,
    /// `POST /containers/{id}/unpause`.
    Unpause,
    /// `POST /containers/{id}/kill`.
    Kill,
    /// `POST /containers/{id}/wait`.
    Wait,
    /// `POST /containers/{id}/update`.
    Update,
    /// `POST /containers/{id}/exec`.
    Exec,
    /// `DELETE /containers/{id}`.
    Remove,
}

/// A request target taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `/v1.41`, or empty.
    pub version: String,
    /// The call.
    pub call: Call,
    /// The query's pairs, decoded, in the order given.
    pub query: Vec<(String, String)>,
}

/// The most bytes of a request target.
const MAX_TARGET_BYTES: usize = 8 * 1024;

/// Read `method` and `target` (path and query, as on the request line).
pub(crate) fn read(method: &str, target: &str) -> Result<Target, GateRefusal> {
    if target.len() > MAX_TARGET_BYTES {
        return Err(path_refusal(target, "it is longer than 8 KiB"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path.contains(['%', '\\']) || !path.starts_with('/') || path.ends_with('/') {
        return Err(path_refusal(
            path,
            "a path must start with `/`, not end with one, and hold no `%` or `\\`",
        ));
    }
    let mut segments: Vec<&str> = path[1..].split('/').collect();
    if segments
        .iter()
        .any(|segment| segment.is_empty() || *segment == "." || *segment == "..")
    {
        return Err(path_refusal(
            path,
            "empty, `.` and `..` segments are refused",
        ));
    }
    let version = match segments.first() {
        Some(first) if is_version(first) => {
            let version = format!("/{first}");
            segments.remove(0);
            version
        }
        _ => String::new(),
    };
    let call = call(method, &segments).ok_or_else(|| GateRefusal::Call {
        method: method.to_owned(),
        path: path.to_owned(),
    })?;
    Ok(Target {
        version,
        call,
        query: read_query(query)?,
    })
}

fn call(method: &str, segments: &[&str]) -> Option<Call> {
    let call = match (method, segments) {
        ("GET" | "HEAD", ["_ping"]) => Call::Ping,
        ("GET", ["version"]) => Call::Version,
        ("GET", ["info"]) => Call::Info,
        ("GET", ["images", name @ .., "json"]) if !name.is_empty() => {
            Call::ImageInspect(name.join("/"))
        }
        ("POST", ["containers", "create"]) => Call::Create,
        ("GET", ["containers", "json"]) => Call::List,
        ("GET", ["events"]) => Call::Events,
        ("GET", ["containers", id, "json"]) => Call::Container(id_of(id)?, ContainerCall::Inspect),
        ("DELETE", ["containers", id]) => Call::Container(id_of(id)?, ContainerCall::Remove),
        ("POST", ["containers", id, action]) => {
            let action = match *action {
                "start" => ContainerCall::Start,
                "pause" => ContainerCall::Pause,
                "unpause" => ContainerCall::Unpause,
                "kill" => ContainerCall::Kill,
                "wait" => ContainerCall::Wait,
                "update" => ContainerCall::Update,
                "exec" => ContainerCall::Exec,
                _ => return None,
            };
            Call::Container(id_of(id)?, action)
        }
        ("POST", ["exec", id, "start"]) => Call::ExecStart(id_of(id)?),
        ("GET", ["exec", id, "json"]) => Call::ExecInspect(id_of(id)?),
        _ => return None,
    };
    Some(call)
}

/// A container or exec id as Docker names them: a letter or digit, then letters, digits, `_`,
/// `.` and `-`, at most 128.
pub(crate) fn id_of(segment: &str) -> Option<String> {
    let mut bytes = segment.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|byte| byte.is_ascii_alphanumeric());
    let rest_ok =
        bytes.all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-'));
    (first_ok && rest_ok && segment.len() <= 128).then(|| segment.to_owned())
}

fn is_version(segment: &str) -> bool {
    segment.strip_prefix('v').is_some_and(|rest| {
        rest.split_once('.').is_some_and(|(major, minor)| {
            [major, minor].iter().all(|part| {
                !part.is_empty() && part.len() <= 3 && part.bytes().all(|b| b.is_ascii_digit())
            })
        })
    })
}

fn read_query(query: &str) -> Result<Vec<(String, String)>, GateRefusal> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    if query.is_empty() {
        return Ok(pairs);
    }
    if query.contains(';') {
        return Err(query_refusal("?", "`;` is not a separator the gate reads"));
    }
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(name)?;
        let value = decode(value)?;
        if pairs.iter().any(|(seen, _)| *seen == name) {
            return Err(query_refusal(&name, "it is given twice"));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// Go's query decoding: `+` is a space, `%XX` a byte; a stray `%` is an error, as in Go.
fn decode(text: &str) -> Result<String, GateRefusal> {
    let bytes = text.as_bytes();
    for (at, byte) in bytes.iter().enumerate() {
        if *byte == b'%'
            && !(bytes.get(at + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(at + 2).is_some_and(u8::is_ascii_hexdigit))
        {
            return Err(query_refusal(text, "a `%` not followed by two hex digits"));
        }
    }
    let spaced = text.replace('+', " ");
    percent_decode_str(&spaced)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| query_refusal(text, "it does not decode to UTF-8"))
}

fn path_refusal(path: &str, why: &str) -> GateRefusal {
    GateRefusal::Path {
        path: path.chars().take(200).collect(),
        why: why.to_owned(),
    }
}

pub(super) fn query_refusal(name: &str, why: &str) -> GateRefusal {
    GateRefusal::Query {
        name: name.chars().take(100).collect(),
        why: why.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_calls_airlock_makes() {
        let target = read("POST", "/v1.41/containers/airlock-task-t1/exec").unwrap();
        assert_eq!(target.version, "/v1.41");
        assert_eq!(
            target.call,
            Call::Container("airlock-task-t1".into(), ContainerCall::Exec)
        );
        let list = read(
            "GET",
            "/containers/json?all=true&filters=%7B%22label%22%3A%5B%22airlock.task%22%5D%7D",
        )
        .unwrap();
        assert_eq!(list.query[1].1, r#"{"label":["airlock.task"]}"#);
        assert_eq!(
            read("GET", "/v1.41/images/airlock-browser:0.1.0/json")
                .unwrap()
                .call,
            Call::ImageInspect("airlock-browser:0.1.0".into())
        );
    }

    #[test]
    fn refuses_every_second_reading() {
        for (method, target) in [
            ("POST", "/containers/x/../y/start"),
            ("POST", "/containers//x/start"),
            ("POST", "/containers/x/start/"),
            ("POST", "/containers/x%2Fy/start"),
            ("POST", "/containers/x\\y/start"),
            ("POST", "/v1.41/v1.41/containers/x/start"),
            ("POST", "/containers/.x/start"),
            ("GET", "/containers/json?all=1&all=0"),
            ("GET", "/containers/json?all=1;filters=x"),
            ("GET", "/containers/json?filters=%zz"),
            ("POST", "/containers/x/attach"),
            ("POST", "/containers/x/archive"),
            ("PUT", "/containers/x/archive"),
            ("POST", "/images/create"),
            ("POST", "/build"),
            ("POST", "/swarm/init"),
            ("GET", "/containers/x/export"),
            ("POST", "/exec/x/resize"),
            ("DELETE", "/images/airlock-browser:0.1.0"),
        ] {
            assert!(read(method, target).is_err(), "{method} {target}");
        }
    }
}
