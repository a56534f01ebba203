//! What one session made (its container and its proxy), undone exactly once: by dispose, or by
//! drop when a start failed or was cancelled half-way.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_proxy::EgressProxy;
use airlock_worker::{BoxFuture, Dispose, TaskContext};
use bollard::Docker;
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use tokio_util::sync::CancellationToken;

use crate::runner::Commands;
use crate::sync::lock;
use crate::unseen_egress::PendingRefusals;

/// What a session made: removed on dispose, or by drop if the start never finished.
pub(crate) struct Made {
    pub(crate) docker: Docker,
    pub(crate) container: Option<String>,
    pub(crate) proxy: Option<EgressProxy>,
    pub(crate) failed_removals: Arc<Mutex<Vec<String>>>,
    /// Where the proxy's byte counts go when it stops (once a task has the session).
    pub(crate) context: Option<TaskContext>,
    /// The proxy's events since the task's last command (once a task has the session): what
    /// came after it, and the bytes of connections that close when the proxy stops, still
    /// belong in the task's record.
    pub(crate) pending: Option<PendingRefusals>,
    /// The session's first-answer signal (once a task has it): an ended task has had its say.
    pub(crate) first_answer: Option<CancellationToken>,
    /// When the task wants its final state: how to read it before the container goes.
    pub(crate) state_saver: Option<(Commands, Duration)>,
    /// A device's touch, held as long as the session (ended by its drop).
    pub(crate) touch: Option<crate::touch::Touch>,
}

impl Made {
    pub(crate) async fn undo(&mut self) {
        if let Some(first_answer) = &self.first_answer {
            first_answer.cancel();
        }
        // No new watch of a browser that is going away.
        if let Some(context) = &self.context {
            context.live.withdraw();
        }
        if let (Some((commands, timeout)), Some(context)) = (self.state_saver.take(), &self.context)
            && let Some(state) = crate::session_state::save(&commands, timeout).await
        {
            context.record_final_state(state);
        }
        if let (Some(proxy), Some(context)) = (&self.proxy, &self.context) {
            let stats = proxy.stats();
            context.record_egress_bytes(airlock_worker::EgressBytes {
                up: stats.bytes_up,
                down: stats.bytes_down,
            });
        }
        undo(
            self.docker.clone(),
            self.container.take(),
            self.proxy.take(),
            Arc::clone(&self.failed_removals),
        )
        .await;
        // The proxy has stopped: every connection has closed and reported.
        if let (Some(pending), Some(context)) = (&self.pending, &self.context) {
            crate::unseen_egress::record_into(crate::unseen_egress::take(pending), context);
        }
    }
}

/// Remove the container (remembering a failure for retry) and stop the proxy.
async fn undo(
    docker: Docker,
    container: Option<String>,
    proxy: Option<EgressProxy>,
    failed_removals: Arc<Mutex<Vec<String>>>,
) {
    if let Some(name) = container
        && !remove_container(&docker, &name).await
    {
        tracing::warn!(container = %name, "could not remove a task container; will retry at shutdown");
        lock(&failed_removals).push(name);
    }
    if let Some(proxy) = proxy {
        proxy.stop().await;
    }
}

impl Dispose for Made {
    fn dispose(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.undo().await })
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        // A start that failed or was cancelled half-way: finish the undo on the runtime. If the
        // runtime is going away, the proxy's own drop still removes its directory, and the
        // container exits at the end of its lifetime (or `airlock cleanup` removes it).
        if (self.container.is_some() || self.proxy.is_some())
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(undo(
                self.docker.clone(),
                self.container.take(),
                self.proxy.take(),
                Arc::clone(&self.failed_removals),
            ));
        }
    }
}

/// Force-remove a container; a container that is already gone counts as removed.
pub(crate) async fn remove_container(docker: &Docker, name: &str) -> bool {
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    match docker.remove_container(name, Some(options)).await {
        // Gone already counts as removed, and so does a removal auto-remove already started.
        Ok(())
        | Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => true,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        }) if message.contains("already in progress") => true,
        Err(error) => {
            tracing::warn!(%error, container = %name, "removing a task container failed");
            false
        }
    }
}
