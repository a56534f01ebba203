//! Small helpers shared by tasks: the workspace root and running commands loudly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The workspace root (xtask lives one level below it).
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Print a command, run it with inherited output, and fail with its exit status.
pub(crate) fn run_loud(command: &mut Command) -> anyhow::Result<()> {
    eprintln!("$ {}", display(command));
    let status = command
        .status()
        .with_context(|| format!("could not start {}", display(command)))?;
    if !status.success() {
        bail!("{} failed ({status})", display(command));
    }
    Ok(())
}

/// Run a command quietly and report whether it succeeded.
pub(crate) fn succeeds(command: &mut Command) -> bool {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Run a command and return its stdout.
pub(crate) fn output(command: &mut Command) -> anyhow::Result<String> {
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not start {}", display(command)))?;
    if !out.status.success() {
        bail!("{} failed ({})", display(command), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command as a shell line, for logs.
pub(crate) fn display(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| {
            let part = part.to_string_lossy();
            if part.contains([' ', '<', '>', '*']) {
                format!("'{part}'")
            } else {
                part.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

/// The proxy directories (`airlock-egress-*`) in the temp dir now, to tell which a run left.
pub(crate) fn egress_dirs() -> std::collections::BTreeSet<String> {
    std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("airlock-egress-"))
        .collect()
}

/// A port on 127.0.0.1 that nothing listens on right now.
/// curl printing nothing but the answer's HTTP status (`000` when no answer came).
pub(crate) fn curl_status() -> Command {
    let mut curl = Command::new("curl");
    curl.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"]);
    curl
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
