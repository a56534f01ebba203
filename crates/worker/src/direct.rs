//! A browser session driven by its caller instead of a worker model (`airlock mcp --direct`), held
//! to the same limits as a task: a step count, a time limit after which the browser goes whether
//! or not more calls come, the output cap (long outputs kept and paged with `read_output`), the
//! image limits, and scrubbed errors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};

use airlock_policy::Scope;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant as Deadline;
use tokio_util::sync::CancellationToken;

use crate::kept_output::{self, KeptOutputs, READ_OUTPUT};
use crate::limits::TaskLimits;
use crate::messages::Content;
use crate::ports::{
    BrowserDriver, BrowserSession, DriverError, TaskContext, ToolDefinition, ToolStatus,
};
use crate::secrets::Secrets;
use crate::shown_output::shown;
use crate::task::ContextUse;

/// One sealed browser for one caller. The browser is disposed when [`DirectSession::end`] is
/// called, when the time limit passes, or when `cancel` fires, whichever comes first.
#[derive(Clone)]
pub struct DirectSession {
    inner: Arc<Inner>,
}

struct Inner {
    limits: TaskLimits,
    context: TaskContext,
    session: Mutex<Option<BrowserSession>>,
    steps: AtomicUsize,
    deadline: Deadline,
    /// Long outputs for `read_output`, and what the caller was shown. Held only briefly, never
    /// across an await.
    kept: std::sync::Mutex<(KeptOutputs, ContextUse)>,
    /// Cancelled once the browser is gone (disposed: by `end`, the watchdog or cancellation).
    gone: CancellationToken,
}

/// What one call produced, as the caller sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectOutput {
    /// Text and images, already scrubbed and cut to the limits.
    pub content: Vec<Content>,
    /// Whether the caller should treat it as an error.
    pub is_error: bool,
}

impl DirectOutput {
    fn error(text: String) -> Self {
        Self {
            content: vec![Content::text(text)],
            is_error: true,
        }
    }
}

impl std::fmt::Debug for DirectSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSession")
            .field("limits", &self.inner.limits)
            .field("steps", &self.inner.steps.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl DirectSession {
    /// Start a browser within `limits` (validated first), reaching only `scope`. The time limit
    /// starts now.
    pub async fn start(
        driver: &dyn BrowserDriver,
        limits: TaskLimits,
        scope: Scope,
        cancel: &CancellationToken,
    ) -> Result<Self, DriverError> {
        limits.validate().map_err(DriverError::new)?;
        let deadline = Deadline::now() + limits.timeout;
        let context = TaskContext::new(cancel.child_token(), limits).with_scope(scope);
        let session = tokio::select! {
            started = driver.start(context.clone()) => started?,
            () = tokio::time::sleep_until(deadline) => {
                return Err(DriverError::new(format!(
                    "the browser did not start within the {} s time limit",
                    limits.timeout.as_secs()
                )));
            }
        };
        let inner = Arc::new(Inner {
            limits,
            context,
            session: Mutex::new(Some(session)),
            steps: AtomicUsize::new(0),
            deadline,
            kept: std::sync::Mutex::new((
                KeptOutputs::new(limits.max_kept_output_bytes),
                ContextUse::default(),
            )),
            gone: CancellationToken::new(),
        });
        // The watchdog: at the time limit, or on cancellation, the browser goes, calls or not.
        let watched = Arc::clone(&inner);
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep_until(watched.deadline) => {}
                () = watched.context.cancel.cancelled() => {}
            }
            watched.end().await;
        });
        Ok(Self { inner })
    }

    /// The paging tool for long outputs, when the limits keep any (`max_kept_output_bytes`).
    pub fn read_output_definition(&self) -> Option<ToolDefinition> {
        kept_output::offered(&self.inner.limits).then(kept_output::definition)
    }

    /// Run the session's tool `tool` (or `read_output`) with `input`, within the step count and
    /// the time left.
    pub async fn call(&self, tool: &str, input: Value) -> DirectOutput {
        let limits = &self.inner.limits;
        let step = self.inner.steps.fetch_add(1, Ordering::SeqCst) + 1;
        if step > limits.max_steps {
            return DirectOutput::error(format!(
                "Step limit reached: this session has used all {} commands (max_steps).",
                limits.max_steps
            ));
        }
        if tool == READ_OUTPUT && kept_output::offered(limits) {
            let mut kept = self.kept();
            let (text, is_error) = match kept.0.read(input, limits.max_output_chars) {
                Ok(text) => (text, false),
                Err(error) => (error.to_string(), true),
            };
            let content = vec![Content::text(text)];
            kept.1.record(&content);
            return DirectOutput { content, is_error };
        }
        let guard = self.inner.session.lock().await;
        let Some(session) = guard.as_ref() else {
            return DirectOutput::error(format!(
                "This session's browser is gone: its time limit of {} s is over, or it was ended. \
                 A new session gets a new browser.",
                limits.timeout.as_secs()
            ));
        };
        let Some(found) = session
            .tools
            .iter()
            .find(|candidate| candidate.definition().name == tool)
        else {
            return DirectOutput::error(format!("There is no tool named `{tool}`."));
        };
        let outcome = tokio::select! {
            outcome = found.execute(input) => outcome,
            () = tokio::time::sleep_until(self.inner.deadline) => {
                return DirectOutput::error(format!(
                    "The session's time limit of {} s ran out during this command; its browser is gone.",
                    limits.timeout.as_secs()
                ));
            }
            () = self.inner.context.cancel.cancelled() => {
                return DirectOutput::error("The session was cancelled.".to_owned());
            }
        };
        // Sizing images and keeping text is CPU work; it is done off the session lock.
        drop(guard);
        let outcome = crate::fit_image::fit_outcome(outcome, limits.max_image_side).await;
        let mut kept = self.kept();
        let (content, status) = shown(tool, outcome, limits, &mut kept.0, &Secrets::default());
        kept.1.record(&content);
        DirectOutput {
            content,
            is_error: status != ToolStatus::Ran,
        }
    }

    /// What the caller has been shown so far.
    pub fn context_use(&self) -> ContextUse {
        let kept = self.kept();
        kept.1.with_store(&kept.0)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, (KeptOutputs, ContextUse)> {
        self.inner
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's records: kept screenshots, refusals, failures.
    pub fn context(&self) -> &TaskContext {
        &self.inner.context
    }

    /// End the session now: the browser is disposed (once, however often this is called).
    pub async fn end(&self) {
        self.inner.end().await;
    }

    /// Cancelled once the browser is gone, however it went (the time limit, cancellation,
    /// `end`): what the browser held (a capacity slot) can be let go then, not later.
    pub fn gone(&self) -> CancellationToken {
        self.inner.gone.clone()
    }
}

impl Inner {
    /// Dispose the browser once. The lock is held until the dispose is done, so every other
    /// caller of `end` (the watchdog, shutdown) returns only when the browser is really gone.
    async fn end(&self) {
        let mut session = self.session.lock().await;
        if let Some(session) = session.take() {
            session.dispose.dispose().await;
        }
        self.gone.cancel();
    }
}
