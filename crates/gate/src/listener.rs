//! The gate's socket: made with the mode and group that say who may use it, connections bounded
//! in number and in how long their headers may take, removed when the gate stops.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::UnixListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Semaphore;

use crate::handle::{Gate, Peer, handle};

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The listening socket, removed on drop.
pub(crate) struct Listener {
    path: PathBuf,
    listener: UnixListener,
}

impl Listener {
    /// Listen at `path` (a stale socket there is replaced; any other file is refused), mode 0660
    /// with `group`, else 0600.
    pub(crate) fn bind(path: &Path, group: Option<&str>) -> anyhow::Result<Self> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                anyhow::bail!(
                    "--listen {} exists and is not a socket: remove it or choose another path",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing the stale {}", path.display()))?;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("making {}", parent.display()))?;
        }
        let listener =
            UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
        let bound = Self {
            path: path.to_owned(),
            listener,
        };
        let mode = if let Some(group) = group {
            let gid = group_id(group)?;
            std::os::unix::fs::chown(path, None, Some(gid))
                .with_context(|| format!("giving {} to group {group}", path.display()))?;
            0o660
        } else {
            0o600
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        Ok(bound)
    }

    /// Serve until SIGTERM or SIGINT.
    pub(crate) async fn serve(self, gate: Arc<Gate>, max_connections: usize) -> anyhow::Result<()> {
        let slots = Arc::new(Semaphore::new(max_connections.max(1)));
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        loop {
            let (stream, _) = tokio::select! {
                accepted = self.listener.accept() => accepted?,
                _ = terminate.recv() => break,
                _ = interrupt.recv() => break,
            };
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                tracing::warn!("refused a connection: {max_connections} are open already");
                continue;
            };
            let peer = Peer {
                uid: stream.peer_cred().ok().map(|cred| cred.uid()),
            };
            let gate = Arc::clone(&gate);
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let gate = Arc::clone(&gate);
                    async move { Ok::<_, std::convert::Infallible>(handle(gate, peer, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
                drop(slot);
            });
        }
        tracing::info!("airlock-gate: stopping");
        Ok(())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A group's id, from `/etc/group`.
fn group_id(name: &str) -> anyhow::Result<u32> {
    let groups = std::fs::read_to_string("/etc/group").context("reading /etc/group")?;
    groups
        .lines()
        .find_map(|line| {
            let mut fields = line.split(':');
            (fields.next() == Some(name))
                .then(|| fields.nth(1).and_then(|gid| gid.parse().ok()))
                .flatten()
        })
        .with_context(|| format!("--group {name}: no such group in /etc/group"))
}
