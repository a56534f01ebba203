//! What the judgement leaves to the gate because it needs the daemon's or the disk's answer.

use std::path::Path;

use airlock_policy::LABEL_GATE;
use http::StatusCode;
use serde_json::Value;

use crate::upstream::{Docker, UpstreamError};

/// What the daemon says of a container or exec the client named.
#[derive(Debug)]
pub enum Ownership {
    /// Made through this gate, with Airlock's task label (and, for an exec, not root nor
    /// privileged).
    Gates,
    /// Docker knows no such container or exec.
    Missing,
    /// Something else; the reason names it.
    Foreign(String),
}

/// The egress proxies' parent directory as the gate will compare bind sources with it: absolute,
/// with no links, a directory.
pub fn egress_parent(path: &Path) -> anyhow::Result<String> {
    let real = std::fs::canonicalize(path).map_err(|error| {
        anyhow::anyhow!(
            "--egress-parent {}: {error} (give an existing directory)",
            path.display()
        )
    })?;
    if !real.is_dir() {
        anyhow::bail!("--egress-parent {} is not a directory", path.display());
    }
    real.to_str()
        .map(|text| text.trim_end_matches('/').to_owned())
        .ok_or_else(|| anyhow::anyhow!("--egress-parent must be UTF-8"))
}

/// The bind's source (`<parent>/airlock-egress-<tag>/sockets`, as judged) is a real directory
/// and so is the proxy's private directory holding it: no link for dockerd to follow elsewhere.
///
/// The private directory is its owner's alone (0700): a gate running as another user cannot see
/// into it, and then checks only the private directory itself. A link it cannot see could only
/// point the read-only bind at a directory the container's uid (which owns nothing) may read,
/// which the server's own user could read already.
pub fn bind_is_real(source: &str) -> Result<(), String> {
    let sockets = Path::new(source);
    for dir in [sockets.parent(), Some(sockets)].into_iter().flatten() {
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => return Err(format!("{} is not a plain directory", dir.display())),
            Err(error)
                if error.kind() == std::io::ErrorKind::PermissionDenied && dir == sockets => {}
            Err(error) => return Err(format!("{}: {error}", dir.display())),
        }
    }
    Ok(())
}

/// Whether container `id` was made through this gate.
pub async fn container(
    docker: &Docker,
    id: &str,
    gate_id: &str,
) -> Result<Ownership, UpstreamError> {
    Ok(container_and_user(docker, id, gate_id).await?.0)
}

/// Whether container `id` was made through this gate, and the user it runs as.
async fn container_and_user(
    docker: &Docker,
    id: &str,
    gate_id: &str,
) -> Result<(Ownership, String), UpstreamError> {
    let (status, inspect) = docker.get_json(&format!("/containers/{id}/json")).await?;
    if status == StatusCode::NOT_FOUND {
        return Ok((Ownership::Missing, String::new()));
    }
    let labels = &inspect["Config"]["Labels"];
    let user = inspect["Config"]["User"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if labels.get("airlock.task").and_then(Value::as_str).is_none() {
        return Ok((
            Ownership::Foreign(format!(
                "container {id} has no airlock.task label: the gate acts only on Airlock's containers"
            )),
            user,
        ));
    }
    if labels.get(LABEL_GATE).and_then(Value::as_str) != Some(gate_id) {
        return Ok((
            Ownership::Foreign(format!("container {id} was not made through this gate")),
            user,
        ));
    }
    Ok((Ownership::Gates, user))
}

/// Whether exec `id` runs in one of this gate's containers, as that container's own user (which
/// the gate made non-root) and not privileged.
pub async fn exec(docker: &Docker, id: &str, gate_id: &str) -> Result<Ownership, UpstreamError> {
    let (status, inspect) = docker.get_json(&format!("/exec/{id}/json")).await?;
    if status == StatusCode::NOT_FOUND {
        return Ok(Ownership::Missing);
    }
    let Some(container_id) = inspect["ContainerID"].as_str() else {
        return Ok(Ownership::Foreign(format!("exec {id} names no container")));
    };
    let (ownership, container_user) = container_and_user(docker, container_id, gate_id).await?;
    if !matches!(ownership, Ownership::Gates) {
        return Ok(ownership);
    }
    let process = &inspect["ProcessConfig"];
    let user = process["user"].as_str().unwrap_or_default();
    // Docker reports the container's user for an exec that named none.
    if !(user.is_empty() || user == container_user)
        || process["privileged"].as_bool() != Some(false)
    {
        return Ok(Ownership::Foreign(format!(
            "exec {id} runs as {user:?} or privileged: the gate starts only execs of the container's own user"
        )));
    }
    Ok(Ownership::Gates)
}
