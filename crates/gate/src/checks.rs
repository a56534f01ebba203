//! What the judgement leaves to the gate because it needs the daemon's or the disk's answer.

use std::path::Path;

use airlock_policy::LABEL_GATE;
use http::StatusCode;
use serde_json::Value;

use crate::upstream::{Docker, UpstreamError};

/// What the daemon says of a container or exec the client named.
#[derive(Debug)]
pub(crate) enum Ownership {
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
pub(crate) fn egress_parent(path: &Path) -> anyhow::Result<String> {
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
pub(crate) fn bind_is_real(source: &str) -> Result<(), String> {
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

/// What dockerd says of a container: whose it is, its user, its full id.
struct Container {
    ownership: Ownership,
    user: String,
    id: String,
}

/// Whether container `reference` (a name or an id) was made through this gate, and its full id.
pub(crate) async fn container(
    docker: &Docker,
    reference: &str,
    gate_id: &str,
) -> Result<(Ownership, String), UpstreamError> {
    let container = inspect_container(docker, reference, gate_id).await?;
    Ok((container.ownership, container.id))
}

async fn inspect_container(
    docker: &Docker,
    reference: &str,
    gate_id: &str,
) -> Result<Container, UpstreamError> {
    let (status, inspect) = docker
        .get_json(&format!("/containers/{reference}/json"))
        .await?;
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let mut container = Container {
        ownership: Ownership::Gates,
        user: text(&inspect["Config"]["User"]),
        id: text(&inspect["Id"]),
    };
    let labels = &inspect["Config"]["Labels"];
    if status == StatusCode::NOT_FOUND {
        container.ownership = Ownership::Missing;
    } else if labels.get("airlock.task").and_then(Value::as_str).is_none() {
        container.ownership = Ownership::Foreign(format!(
            "container {reference} has no airlock.task label: the gate acts only on Airlock's containers"
        ));
    } else if labels.get(LABEL_GATE).and_then(Value::as_str) != Some(gate_id) {
        container.ownership = Ownership::Foreign(format!(
            "container {reference} was not made through this gate"
        ));
    } else if container.id.is_empty() {
        container.ownership =
            Ownership::Foreign(format!("dockerd named no id for container {reference}"));
    }
    Ok(container)
}

/// Whether exec `id` runs in one of this gate's containers, as that container's own user (which
/// the gate made non-root) and not privileged.
pub(crate) async fn exec(
    docker: &Docker,
    id: &str,
    gate_id: &str,
) -> Result<Ownership, UpstreamError> {
    let (status, inspect) = docker.get_json(&format!("/exec/{id}/json")).await?;
    if status == StatusCode::NOT_FOUND {
        return Ok(Ownership::Missing);
    }
    let Some(container_id) = inspect["ContainerID"].as_str() else {
        return Ok(Ownership::Foreign(format!("exec {id} names no container")));
    };
    let container = inspect_container(docker, container_id, gate_id).await?;
    if !matches!(container.ownership, Ownership::Gates) {
        return Ok(container.ownership);
    }
    let process = &inspect["ProcessConfig"];
    let user = process["user"].as_str().unwrap_or_default();
    // Docker reports the container's user for an exec that named none.
    if !(user.is_empty() || user == container.user)
        || process["privileged"].as_bool() != Some(false)
    {
        return Ok(Ownership::Foreign(format!(
            "exec {id} runs as {user:?} or privileged: the gate starts only execs of the container's own user"
        )));
    }
    Ok(Ownership::Gates)
}
