//! A browser session driven by its caller instead of a worker model (`airlock mcp --direct`). An
//! agent that drives a browser itself expects it to last its MCP session, so a direct session has
//! limits of its own ([`DirectLimits`]): it ends when left idle, at a long lifetime the operator
//! bounds, and after a step count only if one is set. Outputs are held to the task limits (long
//! ones kept and paged with `read_output`), images sized, errors scrubbed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

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

/// How long a direct session's browser lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectLimits {
    /// It ends after this long with no command running or asked for.
    pub idle: Duration,
    /// It ends this long after it started, whatever it does.
    pub lifetime: Duration,
    /// It refuses commands past this many; `None`: no step limit.
    pub max_steps: Option<usize>,
}

impl Default for DirectLimits {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(300),
            lifetime: Duration::from_secs(4 * 3600),
            max_steps: None,
        }
    }
}

/// Why a direct session's browser went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    Idle,
    Lifetime,
    Ended,
}

/// One sealed browser for one caller. The browser is disposed when [`DirectSession::end`] is
/// called, when it has been idle too long, at its lifetime, or when `cancel` fires, whichever
/// comes first.
#[derive(Clone)]
pub struct DirectSession {
    inner: Arc<Inner>,
}

struct Inner {
    limits: TaskLimits,
    direct: DirectLimits,
    context: TaskContext,
    session: Mutex<Option<BrowserSession>>,
    steps: AtomicUsize,
    deadline: Deadline,
    /// Commands running now (the session is not idle while one runs), and when the last one
    /// began or ended.
    running: AtomicUsize,
    last_active: std::sync::Mutex<Deadline>,
    command_ended: tokio::sync::Notify,
    why_gone: std::sync::Mutex<Option<Gone>>,
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
    /// Start a browser whose outputs are held to `limits` (validated first) and whose life is
    /// held to `direct`, reaching only `scope`. Its lifetime starts now.
    pub async fn start(
        driver: &dyn BrowserDriver,
        limits: TaskLimits,
        direct: DirectLimits,
        scope: Scope,
        cancel: &CancellationToken,
    ) -> Result<Self, DriverError> {
        limits.validate().map_err(DriverError::new)?;
        let deadline = Deadline::now() + direct.lifetime;
        // The driver keeps the container for the context's time limit: the session's lifetime.
        let held = TaskLimits {
            timeout: direct.lifetime,
            ..limits
        };
        let context = TaskContext::new(cancel.child_token(), held).with_scope(scope);
        let session = tokio::select! {
            started = driver.start(context.clone()) => started?,
            () = tokio::time::sleep_until(deadline) => {
                return Err(DriverError::new(format!(
                    "the browser did not start within the session's {} s lifetime",
                    direct.lifetime.as_secs()
                )));
            }
        };
        let inner = Arc::new(Inner {
            limits,
            direct,
            context,
            session: Mutex::new(Some(session)),
            steps: AtomicUsize::new(0),
            deadline,
            running: AtomicUsize::new(0),
            last_active: std::sync::Mutex::new(Deadline::now()),
            command_ended: tokio::sync::Notify::new(),
            why_gone: std::sync::Mutex::new(None),
            kept: std::sync::Mutex::new((
                KeptOutputs::new(limits.max_kept_output_bytes),
                ContextUse::default(),
            )),
            gone: CancellationToken::new(),
        });
        tokio::spawn(Arc::clone(&inner).watch());
        Ok(Self { inner })
    }

    /// The paging tool for long outputs, when the limits keep any (`max_kept_output_bytes`).
    pub fn read_output_definition(&self) -> Option<ToolDefinition> {
        kept_output::offered(&self.inner.limits).then(kept_output::definition)
    }

    /// Run the session's tool `tool` (or `read_output`) with `input`, within the step count and
    /// the time left.
    pub async fn call(&self, tool: &str, input: Value) -> DirectOutput {
        let _active = Active::begin(&self.inner);
        let limits = &self.inner.limits;
        let step = self.inner.steps.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(max_steps) = self.inner.direct.max_steps
            && step > max_steps
        {
            return DirectOutput::error(format!(
                "Step limit reached: this session has used all {max_steps} commands (direct_max_steps)."
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
            return DirectOutput::error(self.inner.gone_words());
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
                    "The session's lifetime of {} s ran out during this command; its browser is gone.",
                    self.inner.direct.lifetime.as_secs()
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
        self.inner
            .why_gone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(Gone::Ended);
        self.inner.end().await;
    }

    /// Cancelled once the browser is gone, however it went (the time limit, cancellation,
    /// `end`): what the browser held (a capacity slot) can be let go then, not later.
    pub fn gone(&self) -> CancellationToken {
        self.inner.gone.clone()
    }
}

/// A command in progress: the session is not idle until it is dropped.
struct Active<'a>(&'a Inner);

impl<'a> Active<'a> {
    fn begin(inner: &'a Inner) -> Self {
        inner.running.fetch_add(1, Ordering::SeqCst);
        inner.touch();
        Self(inner)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.command_ended.notify_waiters();
    }
}

impl Inner {
    fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Deadline::now();
    }

    /// The watchdog: the browser goes when the session has been idle for its idle time, at its
    /// lifetime, or on cancellation, calls or not.
    async fn watch(self: Arc<Self>) {
        let why = loop {
            // Made before the check, so a command ending meanwhile still wakes it.
            let command_ended = self.command_ended.notified();
            let running = self.running.load(Ordering::SeqCst) > 0;
            let last = *self
                .last_active
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let idle_over = async {
                if running {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep_until(last + self.direct.idle).await;
            };
            tokio::select! {
                () = tokio::time::sleep_until(self.deadline) => break Gone::Lifetime,
                () = self.context.cancel.cancelled() => break Gone::Ended,
                () = command_ended => {}
                () = idle_over => {
                    // A command that began meanwhile touched the clock: look again.
                    let since = *self.last_active.lock().unwrap_or_else(PoisonError::into_inner);
                    if since == last && self.running.load(Ordering::SeqCst) == 0 {
                        break Gone::Idle;
                    }
                }
            }
        };
        self.why_gone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(why);
        self.end().await;
    }

    fn gone_words(&self) -> String {
        let why = *self.why_gone.lock().unwrap_or_else(PoisonError::into_inner);
        let because = match why {
            Some(Gone::Idle) => format!(
                "it was left idle for {} s (direct_idle_timeout)",
                self.direct.idle.as_secs()
            ),
            Some(Gone::Lifetime) => format!(
                "its lifetime of {} s is over (direct_lifetime)",
                self.direct.lifetime.as_secs()
            ),
            Some(Gone::Ended) | None => "it was ended".to_owned(),
        };
        format!("This session's browser is gone: {because}. A new session gets a new browser.")
    }

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
