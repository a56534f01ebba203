//! The session's dispose, run exactly once however the task ends.

use crate::ports::Dispose;

/// Holds the session's dispose until it runs; if the task future is dropped first, dispose is
/// spawned so the container is still removed.
pub(super) struct DisposeGuard(pub(super) Option<Box<dyn Dispose>>);

impl DisposeGuard {
    pub(super) async fn dispose(&mut self) {
        if let Some(dispose) = self.0.take() {
            dispose.dispose().await;
        }
    }
}

impl Drop for DisposeGuard {
    fn drop(&mut self) {
        if let Some(dispose) = self.0.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(dispose.dispose());
            } else {
                tracing::error!(
                    "a task was dropped outside a Tokio runtime; its browser session could not be disposed"
                );
            }
        }
    }
}
