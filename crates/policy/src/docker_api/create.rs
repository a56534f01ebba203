//! `POST /containers/create`: admitted only when the body is Airlock's sealed container exactly
//! as the driver builds it, then re-written from what was read (the client's bytes never pass).
//!
//! Every key is on a list; a key that is not (`Privileged`, `Devices`, `PidMode`, `Mounts`,
//! `CapAdd`, `Sysctls`, `VolumesFrom`, …, in any spelling) refuses the call, naming it.

use serde_json::{Map, Value, json};

use super::strict_json::{field, unknown_keys};
use super::{GateRefusal, GateRules, LABEL_GATE};

/// A create call the gate will forward.
#[derive(Debug, Clone, PartialEq)]
pub struct SealedCreate {
    /// The container's name (`airlock-task-<task>`).
    pub name: String,
    /// The body to send dockerd, written by the gate.
    pub body: Value,
    /// The bind's host directory, for the gate to check on disk (a real directory, no links).
    pub bind_source: String,
    /// Whether Chromium's sandbox is on (Airlock's seccomp profile); off is the explicit
    /// `--no-browser-sandbox` variant, under Docker's default profile, which the gate logs.
    pub browser_sandbox: bool,
}

const TOP_KEYS: &[&str] = &[
    "Image",
    "User",
    "Env",
    "Labels",
    "NetworkDisabled",
    "HostConfig",
];
const HOST_KEYS: &[&str] = &[
    "AutoRemove",
    "Binds",
    "CapDrop",
    "Init",
    "IpcMode",
    "Memory",
    "MemorySwap",
    "NanoCpus",
    "NetworkMode",
    "PidsLimit",
    "ReadonlyRootfs",
    "Runtime",
    "SecurityOpt",
    "ShmSize",
    "Tmpfs",
    "Ulimits",
];
/// The environment the image's entrypoint reads, and the values each may take.
const ENV: &[(&str, &[&str])] = &[
    ("BROWSER_LIFETIME_SECONDS", &[]),
    ("AIRLOCK_BROWSER_SANDBOX", &["on", "off"]),
    ("AIRLOCK_RELAY_MODE", &["handoff", "copy"]),
    ("AIRLOCK_DEV_SHM", &["on", "off"]),
];

/// Judge a create call's query and parsed body.
pub(crate) fn judge(
    query: &[(String, String)],
    body: &Value,
    rules: &GateRules,
) -> Result<SealedCreate, GateRefusal> {
    // bollard sends an empty `platform` along: the daemon's own platform, as without it.
    let query: Vec<&(String, String)> = query
        .iter()
        .filter(|(key, value)| !(key == "platform" && value.is_empty()))
        .collect();
    let name = match query.as_slice() {
        [(key, name)] if key == "name" => name.clone(),
        _ => {
            return Err(super::call::query_refusal(
                "name",
                "a create takes exactly one query parameter, `name=airlock-task-<task>`",
            ));
        }
    };
    let top = object(body, "the body")?;
    refuse_unknown(top, TOP_KEYS, "")?;
    let image = string(top, "Image")?;
    if image != rules.image {
        return Err(refused(
            "Image",
            format!("only {} is made here", rules.image),
        ));
    }
    let user = user(&string(top, "User")?)?;
    let (env, env_sandbox) = environment(top)?;
    let labels = labels(top, &name, rules)?;
    if field(top, "NetworkDisabled") != Some(&Value::Bool(true)) {
        return Err(refused("NetworkDisabled", "must be true"));
    }
    let host = object(
        field(top, "HostConfig").ok_or_else(|| refused("HostConfig", "is missing"))?,
        "HostConfig",
    )?;
    let (host, bind_source, browser_sandbox) = host_config(host, rules)?;
    // The entrypoint reads the environment and the kernel enforces the profile: they must tell
    // one story. Sandbox off under the profile that opens user namespaces for it would be weaker
    // than either variant the driver builds.
    if env_sandbox != Some(browser_sandbox) {
        let wanted = if browser_sandbox { "on" } else { "off" };
        return Err(refused(
            "Env",
            format!(
                "AIRLOCK_BROWSER_SANDBOX must be {wanted} with this HostConfig.SecurityOpt (on with Airlock's seccomp profile, off with Docker's default)"
            ),
        ));
    }
    if !browser_sandbox && !rules.allow_no_browser_sandbox {
        return Err(refused(
            "HostConfig.SecurityOpt",
            "the no-sandbox variant (Chromium without its own sandbox) is refused by this gate: run Airlock with the browser sandbox, or start airlock-gate with --allow-no-browser-sandbox",
        ));
    }
    let body = json!({
        "Image": image,
        "User": user,
        "Env": env,
        "Labels": labels,
        "NetworkDisabled": true,
        "HostConfig": host,
    });
    Ok(SealedCreate {
        name,
        body,
        bind_source,
        browser_sandbox,
    })
}

fn host_config(
    host: &Map<String, Value>,
    rules: &GateRules,
) -> Result<(Value, String, bool), GateRefusal> {
    refuse_unknown(host, HOST_KEYS, "HostConfig.")?;
    for (key, expected) in [
        ("AutoRemove", json!(true)),
        ("Init", json!(true)),
        ("ReadonlyRootfs", json!(true)),
        ("NetworkMode", json!("none")),
        ("IpcMode", json!("private")),
        ("CapDrop", json!(["ALL"])),
    ] {
        if field(host, key) != Some(&expected) {
            return Err(refused(
                &format!("HostConfig.{key}"),
                format!("must be {expected}"),
            ));
        }
    }
    let limits = &rules.limits;
    let memory = bounded(host, "Memory", 1, limits.memory_bytes)?;
    if field(host, "MemorySwap") != Some(&json!(memory)) {
        return Err(refused(
            "HostConfig.MemorySwap",
            "must equal Memory (no swap)",
        ));
    }
    let nano_cpus = bounded(host, "NanoCpus", 1, limits.nano_cpus)?;
    let pids = bounded(host, "PidsLimit", 1, limits.pids)?;
    let runtime =
        string(host, "Runtime").map_err(|_| refused("HostConfig.Runtime", "is missing"))?;
    if !rules.runtimes.contains(&runtime) {
        return Err(refused(
            "HostConfig.Runtime",
            format!("{runtime:?} is not one of {:?}", rules.runtimes),
        ));
    }
    let (security, browser_sandbox) = security_options(host, rules)?;
    let tmpfs = tmpfs(host, limits.tmp_mib)?;
    let nofile = ulimit(host, limits.nofile)?;
    let bind_source = bind(host, rules)?;
    let mut written = json!({
        "AutoRemove": true,
        "Binds": [format!("{bind_source}:/egress:ro")],
        "CapDrop": ["ALL"],
        "Init": true,
        "IpcMode": "private",
        "Memory": memory,
        "MemorySwap": memory,
        "NanoCpus": nano_cpus,
        "NetworkMode": "none",
        "PidsLimit": pids,
        "ReadonlyRootfs": true,
        "Runtime": runtime,
        "SecurityOpt": security,
        "Tmpfs": {"/tmp": tmpfs},
        "Ulimits": [{"Name": "nofile", "Soft": nofile, "Hard": nofile}],
    });
    if field(host, "ShmSize").is_some() {
        let shm = bounded(host, "ShmSize", 1, limits.shm_bytes)?;
        written["ShmSize"] = json!(shm);
    }
    Ok((written, bind_source, browser_sandbox))
}

/// `no-new-privileges`, then Airlock's seccomp profile exactly, or nothing more (the no-sandbox
/// variant: Docker's default profile).
fn security_options(
    host: &Map<String, Value>,
    rules: &GateRules,
) -> Result<(Vec<String>, bool), GateRefusal> {
    let options = strings(host, "SecurityOpt", "HostConfig.SecurityOpt")?;
    let profile = format!("seccomp={}", rules.seccomp_profile);
    match options.as_slice() {
        [first] if first == "no-new-privileges" => Ok((options, false)),
        [first, second] if first == "no-new-privileges" && *second == profile => {
            Ok((options, true))
        }
        _ => Err(refused(
            "HostConfig.SecurityOpt",
            "must be [\"no-new-privileges\"] followed by Airlock's seccomp profile exactly (or by nothing, for the no-sandbox variant)",
        )),
    }
}

fn tmpfs(host: &Map<String, Value>, max_mib: u64) -> Result<String, GateRefusal> {
    let tmpfs = object(
        field(host, "Tmpfs").ok_or_else(|| refused("HostConfig.Tmpfs", "is missing"))?,
        "HostConfig.Tmpfs",
    )?;
    let shape = "must be {\"/tmp\": \"rw,nosuid,nodev,size=<N>m,mode=1777\"}";
    let [(path, Value::String(options))] = tmpfs.iter().collect::<Vec<_>>()[..] else {
        return Err(refused("HostConfig.Tmpfs", shape));
    };
    let size = options
        .strip_prefix("rw,nosuid,nodev,size=")
        .and_then(|rest| rest.strip_suffix("m,mode=1777"))
        .and_then(|mib| mib.parse::<u64>().ok())
        .filter(|mib| (1..=max_mib).contains(mib) && path.as_str() == "/tmp");
    match size {
        Some(mib) => Ok(format!("rw,nosuid,nodev,size={mib}m,mode=1777")),
        None => Err(refused(
            "HostConfig.Tmpfs",
            format!("{shape}, with N from 1 to {max_mib}"),
        )),
    }
}

fn ulimit(host: &Map<String, Value>, max: u64) -> Result<u64, GateRefusal> {
    let why = format!("must be one nofile limit, soft equal to hard, from 1 to {max}");
    let Some(Value::Array(limits)) = field(host, "Ulimits") else {
        return Err(refused("HostConfig.Ulimits", why));
    };
    let [Value::Object(limit)] = limits.as_slice() else {
        return Err(refused("HostConfig.Ulimits", why));
    };
    if !unknown_keys(limit, &["Name", "Soft", "Hard"]).is_empty()
        || field(limit, "Name") != Some(&json!("nofile"))
    {
        return Err(refused("HostConfig.Ulimits", why));
    }
    let soft = field(limit, "Soft").and_then(Value::as_u64);
    match soft {
        Some(soft) if (1..=max).contains(&soft) && field(limit, "Hard") == Some(&json!(soft)) => {
            Ok(soft)
        }
        _ => Err(refused("HostConfig.Ulimits", why)),
    }
}

/// The one bind: `<egress parent>/airlock-egress-<tag>/sockets:/egress:ro`.
fn bind(host: &Map<String, Value>, rules: &GateRules) -> Result<String, GateRefusal> {
    let binds = strings(host, "Binds", "HostConfig.Binds")?;
    let why = format!(
        "must be one bind, `{}/airlock-egress-<tag>/sockets:/egress:ro`",
        rules.egress_parent
    );
    let [bind] = binds.as_slice() else {
        return Err(refused("HostConfig.Binds", why));
    };
    let source = bind
        .strip_suffix(":/egress:ro")
        .filter(|source| {
            source
                .strip_prefix(rules.egress_parent.as_str())
                .and_then(|rest| rest.strip_prefix("/airlock-egress-"))
                .and_then(|rest| rest.strip_suffix("/sockets"))
                .is_some_and(|tag| {
                    !tag.is_empty()
                        && tag.len() <= 100
                        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        })
        .ok_or_else(|| refused("HostConfig.Binds", why))?;
    Ok(source.to_owned())
}

fn user(user: &str) -> Result<String, GateRefusal> {
    let numeric = |part: &str| {
        !part.is_empty()
            && part.len() <= 10
            && part.bytes().all(|b| b.is_ascii_digit())
            && part.parse::<u32>().is_ok_and(|id| id != 0)
    };
    match user.split_once(':') {
        Some((uid, gid)) if numeric(uid) && numeric(gid) => Ok(format!(
            "{}:{}",
            uid.parse::<u32>().unwrap_or_default(),
            gid.parse::<u32>().unwrap_or_default()
        )),
        _ => Err(refused(
            "User",
            "must be `uid:gid`, both numbers other than 0 (never root, never a name)",
        )),
    }
}

/// The environment, and what it says of Chromium's sandbox (`None` when it does not say).
fn environment(top: &Map<String, Value>) -> Result<(Vec<String>, Option<bool>), GateRefusal> {
    let entries = strings(top, "Env", "Env")?;
    let mut seen = Vec::new();
    let mut sandbox = None;
    for entry in &entries {
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| refused("Env", format!("{entry:?} is not NAME=value")))?;
        let Some((_, values)) = ENV.iter().find(|(known, _)| *known == name) else {
            return Err(refused("Env", format!("{name} is not one the image reads")));
        };
        let fits = if values.is_empty() {
            !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit())
        } else {
            values.contains(&value)
        };
        if !fits || seen.contains(&name) {
            return Err(refused("Env", format!("{name}={value:?} is refused")));
        }
        if name == "AIRLOCK_BROWSER_SANDBOX" {
            sandbox = Some(value == "on");
        }
        seen.push(name);
    }
    Ok((entries, sandbox))
}

fn labels(top: &Map<String, Value>, name: &str, rules: &GateRules) -> Result<Value, GateRefusal> {
    let labels = object(
        field(top, "Labels").ok_or_else(|| refused("Labels", "are missing"))?,
        "Labels",
    )?;
    let known = ["airlock.task", "airlock.owner", "airlock.version"];
    // Label keys are a map's keys, which Go matches exactly: compare them exactly too.
    if let Some(other) = labels.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(refused(
            "Labels",
            format!("{other:?} is not one of {known:?} (the gate sets {LABEL_GATE} itself)"),
        ));
    }
    let mut written = Map::new();
    for key in known {
        let value = match labels.get(key) {
            Some(Value::String(value))
                if !value.is_empty()
                    && value.len() <= 200
                    && value.bytes().all(|b| (0x20..0x7f).contains(&b)) =>
            {
                value.clone()
            }
            _ => {
                return Err(refused(
                    "Labels",
                    format!("{key} must be short printable text"),
                ));
            }
        };
        written.insert(key.to_owned(), Value::String(value));
    }
    let task = written["airlock.task"].as_str().unwrap_or_default();
    if name != format!("airlock-task-{task}") || super::call::id_of(name).is_none() {
        return Err(super::call::query_refusal(
            "name",
            "must be `airlock-task-<the airlock.task label>`, of letters, digits, `_`, `.` and `-`",
        ));
    }
    written.insert(LABEL_GATE.to_owned(), Value::String(rules.gate_id.clone()));
    Ok(Value::Object(written))
}

fn bounded(host: &Map<String, Value>, key: &str, min: u64, max: u64) -> Result<u64, GateRefusal> {
    field(host, key)
        .and_then(Value::as_u64)
        .filter(|value| (min..=max).contains(value))
        .ok_or_else(|| {
            refused(
                &format!("HostConfig.{key}"),
                format!("must be a whole number from {min} to {max}"),
            )
        })
}

fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, GateRefusal> {
    value
        .as_object()
        .ok_or_else(|| refused(what, "must be an object"))
}

fn string(object: &Map<String, Value>, key: &str) -> Result<String, GateRefusal> {
    match field(object, key) {
        Some(Value::String(value)) => Ok(value.clone()),
        _ => Err(refused(key, "must be a string")),
    }
}

fn strings(object: &Map<String, Value>, key: &str, what: &str) -> Result<Vec<String>, GateRefusal> {
    let Some(Value::Array(items)) = field(object, key) else {
        return Err(refused(what, "must be a list of strings"));
    };
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| refused(what, "must be a list of strings"))
        })
        .collect()
}

fn refuse_unknown(
    object: &Map<String, Value>,
    known: &[&str],
    prefix: &str,
) -> Result<(), GateRefusal> {
    match unknown_keys(object, known).first() {
        None => Ok(()),
        Some(key) => Err(refused(
            &format!("{prefix}{key}"),
            "is not part of Airlock's sealed container",
        )),
    }
}

fn refused(field: &str, why: impl Into<String>) -> GateRefusal {
    GateRefusal::Field {
        field: field.to_owned(),
        why: why.into(),
    }
}
