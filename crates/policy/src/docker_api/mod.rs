//! The Docker gate's judgement: which Docker Engine API requests a client that should only ever
//! make Airlock's sealed browsers may send, and the exact request to send dockerd in their place.
//!
//! Pure: the gate (`airlock-gate`) brings the method, the target and the body, and gets a
//! [`Forward`] (written by this module, never the client's bytes) or a [`GateRefusal`] naming the
//! refused call or field. What needs the daemon's or the disk's answer (is this container one the
//! gate made? is the bind a real directory?) is named in the [`Forward`] for the gate to check.

mod call;
mod create;
mod exec;
mod filters;
mod strict_json;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

pub(crate) use call::Target;
pub use call::{Call, ContainerCall};
pub use create::SealedCreate;
pub use exec::{LIVE_VIEW_EXEC, loopback_relay_exec};
pub use strict_json::MAX_BODY_BYTES;

/// The label the gate puts on every container it makes (its value: the gate's id); every later
/// call on a container needs it.
pub const LABEL_GATE: &str = "airlock.gate";

/// What the gate admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRules {
    /// The one image containers are made from.
    pub image: String,
    /// The OCI runtimes a container may ask for (`runc`, `runsc`).
    pub runtimes: Vec<String>,
    /// The directory holding the egress proxies' private directories (`/tmp` by default):
    /// the one bind must be `<this>/airlock-egress-<tag>/sockets`.
    pub egress_parent: String,
    /// The `airlock.gate` label's value on the containers this gate makes.
    pub gate_id: String,
    /// Airlock's seccomp profile, as the driver sends it.
    pub seccomp_profile: String,
    /// Whether the explicit no-sandbox variant (Chromium's own sandbox off, Docker's default
    /// seccomp profile: `--no-browser-sandbox`) is admitted. Off unless the gate's operator turns
    /// it on, since it takes away the browser's inner wall.
    pub allow_no_browser_sandbox: bool,
    /// The largest resources a container may ask for.
    pub limits: GateLimits,
}

/// The largest resources one container may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateLimits {
    /// Memory (and memory plus swap), bytes.
    pub memory_bytes: u64,
    /// CPUs, in billionths.
    pub nano_cpus: u64,
    /// Host pids (a gVisor sandbox needs eight per guest task).
    pub pids: u64,
    /// Open files.
    pub nofile: u64,
    /// The `/tmp` tmpfs, MiB.
    pub tmp_mib: u64,
    /// `/dev/shm`, bytes.
    pub shm_bytes: u64,
}

impl Default for GateLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 8 << 30,
            nano_cpus: 8_000_000_000,
            pids: 8 * 4096,
            nofile: 65_536,
            tmp_mib: 4096,
            shm_bytes: 4 << 30,
        }
    }
}

/// Why the gate refused a request; the text is what the client reads with the `403`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateRefusal {
    /// A call outside the list Airlock makes.
    #[error(
        "{method} {path} is not a call Airlock makes: the gate forwards only the sealed browser's calls"
    )]
    Call {
        /// The request's method.
        method: String,
        /// Its path.
        path: String,
    },
    /// A path with a second reading.
    #[error("the path {path:?} is refused: {why}")]
    Path {
        /// The path, cut to 200 characters.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// A query parameter the call does not take, or takes differently.
    #[error("the query parameter {name:?} is refused: {why}")]
    Query {
        /// The parameter.
        name: String,
        /// What it must be instead.
        why: String,
    },
    /// A body field that is not Airlock's.
    #[error("{field} is refused: {why}")]
    Field {
        /// The field, with its parents (`HostConfig.Privileged`).
        field: String,
        /// What it must be instead.
        why: String,
    },
    /// A body that cannot be read one way only.
    #[error("{0}")]
    Body(String),
}

/// The request the gate sends in the client's place, and what it must check first.
#[derive(Debug, Clone, PartialEq)]
pub struct Forward {
    /// The method.
    pub method: &'static str,
    /// The target: the version prefix, the path and a query written by the gate.
    pub target: String,
    /// The body, written by the gate.
    pub body: Option<Vec<u8>>,
    /// The call as read.
    pub call: Call,
    /// For a create: what was admitted, with the bind the gate checks on disk.
    pub create: Option<SealedCreate>,
}

/// Judge one request.
pub fn judge(
    method: &str,
    target: &str,
    body: &[u8],
    rules: &GateRules,
) -> Result<Forward, GateRefusal> {
    let Target {
        version,
        call,
        query,
    } = call::read(method, target)?;
    let method = match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        _ => "DELETE",
    };
    let body_value = || strict_json::parse(body).map_err(GateRefusal::Body);
    let no_body = || {
        if body.is_empty() {
            Ok(())
        } else {
            Err(GateRefusal::Body(format!(
                "{method} {target} takes no body"
            )))
        }
    };
    let (path, query, body, create) = match &call {
        Call::Ping => (
            no_body().map(|()| "/_ping".to_owned())?,
            Vec::new(),
            None,
            None,
        ),
        Call::Info => (
            no_body().map(|()| "/info".to_owned())?,
            no_query(&query)?,
            None,
            None,
        ),
        Call::Version => (
            no_body().map(|()| "/version".to_owned())?,
            Vec::new(),
            None,
            None,
        ),
        Call::ImageInspect(image) => {
            no_body()?;
            if *image != rules.image {
                return Err(GateRefusal::Field {
                    field: "image".into(),
                    why: format!("only {} may be inspected", rules.image),
                });
            }
            (
                format!("/images/{image}/json"),
                no_query(&query)?,
                None,
                None,
            )
        }
        Call::Create => {
            let admitted = create::judge(&query, &body_value()?, rules)?;
            let body = serde_json::to_vec(&admitted.body).ok();
            let query = vec![("name".to_owned(), admitted.name.clone())];
            ("/containers/create".to_owned(), query, body, Some(admitted))
        }
        Call::List => {
            no_body()?;
            let query = filters::list_query(&query, rules)?;
            ("/containers/json".to_owned(), query, None, None)
        }
        Call::Events => {
            no_body()?;
            let query = filters::events_query(&query, rules)?;
            ("/events".to_owned(), query, None, None)
        }
        Call::Container(id, action) => {
            let (path, query, body) = container_call(id, *action, &query, body)?;
            (path, query, body, None)
        }
        Call::ExecStart(id) => {
            let written = exec::judge_start(&body_value()?)?;
            let body = serde_json::to_vec(&written).ok();
            (format!("/exec/{id}/start"), no_query(&query)?, body, None)
        }
        Call::ExecInspect(id) => {
            no_body()?;
            (format!("/exec/{id}/json"), no_query(&query)?, None, None)
        }
    };
    Ok(Forward {
        method,
        target: format!("{version}{path}{}", encode_query(&query)),
        body,
        call,
        create,
    })
}

type Pairs = Vec<(String, String)>;

/// Whether a query parameter's value is one Airlock sends.
type ValueTest = fn(&str) -> bool;

fn container_call(
    id: &str,
    action: ContainerCall,
    query: &[(String, String)],
    body: &[u8],
) -> Result<(String, Pairs, Option<Vec<u8>>), GateRefusal> {
    let body_value = || strict_json::parse(body).map_err(GateRefusal::Body);
    let bare = |path: &str| -> Result<(String, Pairs, Option<Vec<u8>>), GateRefusal> {
        if !body.is_empty() {
            return Err(GateRefusal::Body(format!("{path} takes no body")));
        }
        Ok((path.to_owned(), no_query(query)?, None))
    };
    match action {
        ContainerCall::Inspect => {
            let query = only(query, &[("size", is_false)])?;
            Ok((format!("/containers/{id}/json"), query, None))
        }
        ContainerCall::Start => bare(&format!("/containers/{id}/start")),
        ContainerCall::Pause => bare(&format!("/containers/{id}/pause")),
        ContainerCall::Unpause => bare(&format!("/containers/{id}/unpause")),
        ContainerCall::Kill => {
            let query = only(query, &[("signal", is_signal)])?;
            Ok((format!("/containers/{id}/kill"), query, None))
        }
        ContainerCall::Wait => {
            let query = only(
                query,
                &[("condition", |value| {
                    ["not-running", "next-exit", "removed"].contains(&value)
                })],
            )?;
            Ok((format!("/containers/{id}/wait"), query, None))
        }
        ContainerCall::Remove => {
            let query = only(
                query,
                &[("force", is_bool), ("v", is_bool), ("link", is_false)],
            )?;
            Ok((format!("/containers/{id}"), query, None))
        }
        ContainerCall::Update => {
            let shares = filters::cpu_shares(&body_value()?)?;
            let body = serde_json::to_vec(&serde_json::json!({"CpuShares": shares})).ok();
            Ok((format!("/containers/{id}/update"), no_query(query)?, body))
        }
        ContainerCall::Exec => {
            let written = exec::judge_create(&body_value()?)?;
            let body = serde_json::to_vec(&written).ok();
            Ok((format!("/containers/{id}/exec"), no_query(query)?, body))
        }
    }
}

fn no_query(query: &[(String, String)]) -> Result<Pairs, GateRefusal> {
    only(query, &[])
}

/// The pairs of `query`, each of a known name and a value its test accepts.
fn only(query: &[(String, String)], known: &[(&str, ValueTest)]) -> Result<Pairs, GateRefusal> {
    query
        .iter()
        .map(
            |(name, value)| match known.iter().find(|(known, _)| known == name) {
                Some((_, fits)) if fits(value) => Ok((name.clone(), value.clone())),
                Some(_) => Err(call::query_refusal(
                    name,
                    "its value is not one Airlock sends",
                )),
                None => Err(call::query_refusal(
                    name,
                    "this call takes no such parameter here",
                )),
            },
        )
        .collect()
}

fn is_false(value: &str) -> bool {
    ["false", "0"].contains(&value)
}

fn is_bool(value: &str) -> bool {
    ["true", "false", "1", "0"].contains(&value)
}

fn is_signal(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 12
        && value
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// Everything but letters, digits and `-._~` is escaped.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn encode_query(query: &[(String, String)]) -> String {
    if query.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = query
        .iter()
        .map(|(name, value)| {
            format!(
                "{}={}",
                utf8_percent_encode(name, QUERY_VALUE),
                utf8_percent_encode(value, QUERY_VALUE)
            )
        })
        .collect();
    format!("?{}", pairs.join("&"))
}
