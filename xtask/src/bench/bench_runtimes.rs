//! Variants of gVisor's runtime registered with dockerd for one part of a bench run: runsc as
//! `cargo xtask docker` registered it, plus extra arguments, under names of the bench's own.
//! dockerd's configuration is put back as it was when they are dropped; a run stopped half-way
//! leaves its entries, which the next registration removes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::docker::DAEMON_JSON;

const DOCKER_PID: &str = "/var/run/docker.pid";
/// Every runtime the bench registers is named with this, so a leftover is known as one.
const PREFIX: &str = "airlock-bench-";
/// How long dockerd may take to load its changed configuration.
const RELOAD_LIMIT: Duration = Duration::from_secs(30);

/// `check`'s first answer within `limit`, asking every 100 ms.
pub(super) fn settled<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One runtime to register: runsc's registration with `extra` arguments added, and with its
/// program replaced by `program` when given (another release of runsc).
pub(super) struct Variant<'a> {
    pub(super) name: &'a str,
    pub(super) program: Option<&'a Path>,
    pub(super) extra: Vec<String>,
}

impl<'a> Variant<'a> {
    pub(super) fn with_args(name: &'a str, extra: Vec<String>) -> Self {
        Self {
            name,
            program: None,
            extra,
        }
    }
}

/// The runtimes registered while this lives; dockerd's configuration as it was, to put back.
pub(super) struct BenchRuntimes {
    names: Vec<String>,
    restore: String,
}

impl BenchRuntimes {
    /// Register each variant: its name must start with `PREFIX`.
    pub(super) fn register(variants: &[Variant<'_>]) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(DAEMON_JSON)
            .with_context(|| format!("reading {DAEMON_JSON} (cargo xtask docker writes it)"))?;
        let mut config: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{DAEMON_JSON} is not JSON"))?;
        let runtimes = config["runtimes"]
            .as_object_mut()
            .with_context(|| format!("{DAEMON_JSON} registers no runtimes"))?;
        let before = runtimes.len();
        runtimes.retain(|name, _| !name.starts_with(PREFIX));
        let restore = if runtimes.len() == before {
            text
        } else {
            serde_json::to_string_pretty(&config)?
        };
        for Variant {
            name,
            program,
            extra,
        } in variants
        {
            anyhow::ensure!(
                name.starts_with(PREFIX),
                "{name} is not a bench runtime's name"
            );
            let mut variant = config["runtimes"]["runsc"].clone();
            let args = variant["runtimeArgs"]
                .as_array_mut()
                .with_context(|| format!("{DAEMON_JSON} registers no runsc with its arguments"))?;
            args.extend(
                extra
                    .iter()
                    .map(|arg| serde_json::Value::from(arg.as_str())),
            );
            if let Some(program) = program {
                variant["path"] = program.display().to_string().into();
            }
            config["runtimes"][*name] = variant;
        }
        std::fs::write(DAEMON_JSON, serde_json::to_string_pretty(&config)?)?;
        let registered = Self {
            names: variants
                .iter()
                .map(|variant| variant.name.to_owned())
                .collect(),
            restore,
        };
        reload_until(&registered.names, true)?;
        Ok(registered)
    }
}

impl Drop for BenchRuntimes {
    fn drop(&mut self) {
        let restored = std::fs::write(DAEMON_JSON, &self.restore);
        if let Err(error) = restored
            .map_err(anyhow::Error::from)
            .and_then(|()| reload_until(&self.names, false))
        {
            eprintln!("the bench's runtimes may still be registered with dockerd: {error:#}");
        }
    }
}

/// Ask dockerd to read its configuration again, until every one of `names` is (or is not) among
/// its runtimes.
fn reload_until(names: &[String], registered: bool) -> anyhow::Result<()> {
    let pid = std::fs::read_to_string(DOCKER_PID)
        .with_context(|| format!("reading dockerd's pid from {DOCKER_PID}"))?;
    let status = Command::new("kill")
        .args(["-HUP", pid.trim()])
        .status()
        .context("running kill")?;
    anyhow::ensure!(status.success(), "kill -HUP {} failed", pid.trim());
    settled(RELOAD_LIMIT, || {
        let out = Command::new("docker")
            .args(["info", "--format", "{{json .Runtimes}}"])
            .output()
            .ok()?;
        let listed: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        names
            .iter()
            .all(|name| listed.get(name).is_some() == registered)
            .then_some(())
    })
    .with_context(|| format!("dockerd did not load {DAEMON_JSON} again"))
}
