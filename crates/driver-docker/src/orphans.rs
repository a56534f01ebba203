//! Finding and removing what a dead owner left: task containers and proxy directories whose owning
//! process is gone (a host killed with SIGKILL never ran its cleanup).

use std::path::{Path, PathBuf};

use airlock_worker::DriverError;
use bollard::query_parameters::ListContainersOptionsBuilder;

use crate::spec::{LABEL_OWNER, LABEL_TASK};
use crate::teardown::remove_container;
use crate::{DockerDriver, DockerError, current_user, owner};

impl DockerDriver {
    /// Remove task containers whose owning process is gone. Returns their names.
    pub async fn cleanup_orphans(&self) -> Result<Vec<String>, DriverError> {
        let filters =
            std::collections::HashMap::from([("label".to_owned(), vec![LABEL_TASK.to_owned()])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(DockerError::ListContainers)?;
        let mut removed = Vec::new();
        for container in containers {
            let labels = container.labels.unwrap_or_default();
            let owner = labels.get(LABEL_OWNER).map_or("", String::as_str);
            if !self.owner_gone(owner::liveness(owner)).await {
                continue;
            }
            let Some(id) = container.id else { continue };
            let name = container
                .names
                .and_then(|names| names.first().cloned())
                .unwrap_or_else(|| id.clone());
            if remove_container(&self.docker, &id).await {
                removed.push(name.trim_start_matches('/').to_owned());
            }
        }
        Ok(removed)
    }

    /// Whether an owner is gone: asked of Docker when it ran in another container (another
    /// replica on this daemon), whose processes this one cannot see.
    async fn owner_gone(&self, liveness: owner::Liveness) -> bool {
        match liveness {
            owner::Liveness::Gone => true,
            owner::Liveness::Alive | owner::Liveness::Unknown => false,
            owner::Liveness::InContainer(container) => {
                match self.docker.inspect_container(&container, None).await {
                    Ok(info) => info.state.and_then(|state| state.running) != Some(true),
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404,
                        ..
                    }) => true,
                    // Unsure: leave it; the container's own lifetime still ends it.
                    Err(_) => false,
                }
            }
        }
    }

    /// Remove the proxy directories in `parent` whose owning process is gone (a host killed with
    /// SIGKILL never ran its proxy's cleanup). Only directories of this user whose name carries an
    /// owner tag are considered; symlinks are never followed. Returns what was removed.
    pub(crate) async fn remove_orphaned_egress_dirs(&self, parent: &Path) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        for (path, liveness) in tagged_egress_dirs(parent) {
            if !self.owner_gone(liveness).await {
                continue;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => removed.push(path),
                Err(error) => {
                    tracing::warn!(%error, path = %path.display(), "could not remove an orphaned proxy directory");
                }
            }
        }
        removed
    }
}

/// The proxy directories in `parent` that carry an owner tag and belong to this user, with what
/// is known of their owner. Symlinks are never followed.
fn tagged_egress_dirs(parent: &Path) -> Vec<(PathBuf, owner::Liveness)> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let uid = current_user().0;
    entries
        .flatten()
        .filter_map(|entry| {
            let liveness = entry.file_name().to_str().and_then(owner::dir_owner)?;
            let path = entry.path();
            let ours = std::fs::symlink_metadata(&path).is_ok_and(|meta| {
                meta.is_dir() && std::os::unix::fs::MetadataExt::uid(&meta) == uid
            });
            ours.then_some((path, liveness))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_users_tagged_directories_are_judged() {
        let parent = tempfile::tempdir().unwrap();
        let boot = owner::dir_tag().get(1..9).unwrap().to_owned();
        // This process's pid with a start time it never had: that owner is gone.
        let dead = parent.path().join(format!(
            "airlock-egress-b{boot}p{}s1-dead01",
            std::process::id()
        ));
        let alive = parent
            .path()
            .join(format!("airlock-egress-{}-live01", owner::dir_tag()));
        let untagged = parent.path().join("airlock-egress-AbC123");
        for dir in [&dead, &alive, &untagged] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("proxy.sock"), "").unwrap();
        }
        // A link named like a dead owner's directory is not followed.
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("keep"), "").unwrap();
        let link = parent.path().join(format!(
            "airlock-egress-b{boot}p{}s1-link01",
            std::process::id()
        ));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();

        let mut judged = tagged_egress_dirs(parent.path());
        judged.sort();
        let mut expected = vec![
            (dead.clone(), owner::Liveness::Gone),
            (alive.clone(), owner::Liveness::Alive),
        ];
        expected.sort();
        assert_eq!(
            judged, expected,
            "an untagged directory or a link was judged"
        );
        assert!(target.path().join("keep").exists());
    }
}
