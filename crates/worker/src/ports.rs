//! The two ports the worker knows: the browser driver (which supplies the worker's tools) and the
//! model (which plays the worker). Neither knows Docker or any model vendor.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_policy::Scope;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::downloads::Downloads;
use crate::egress_record::{
    EgressAllowed, EgressBytes, EgressFailure, EgressRecord, EgressRefusal,
};
use crate::limits::TaskLimits;
use crate::live::LiveSlot;
use crate::messages::{AssistantTurn, Image, Message};
use crate::secrets::Secrets;
use crate::state::SessionState;
use crate::uploads::Uploads;

/// A boxed future, so the ports stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
}

impl ToolDefinition {
    /// A definition whose schema is derived from `T` with schemars.
    pub fn for_input<T: schemars::JsonSchema>(name: &str, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null),
        }
    }
}

/// What a tool call produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// Text for the worker.
    pub text: String,
    /// Images for the worker (screenshots).
    pub images: Vec<Image>,
    /// Whether it ran, was refused, or failed in a way the worker should know about.
    pub status: ToolStatus,
}

/// What became of a call, as the tool tells it. The task's record and the worker's error flag
/// are read from this, never from the text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolStatus {
    /// It ran.
    #[default]
    Ran,
    /// The driver's policy would not run it; nothing happened in the browser.
    Refused {
        /// Why, in the words the worker is shown after `Refused: `.
        reason: String,
    },
    /// It ran and failed (a command that exited non-zero, a bad input); the text says why.
    Failed,
}

impl ToolOutput {
    /// A plain text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A call the driver's policy would not run, shown to the worker as `Refused: <reason>`.
    pub fn refused(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            text: format!("Refused: {reason}"),
            status: ToolStatus::Refused { reason },
            ..Self::default()
        }
    }

    /// A call that failed in a way the worker should act on; `text` says why.
    pub fn failed(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            status: ToolStatus::Failed,
            ..Self::default()
        }
    }

    /// Whether the worker is told this call went wrong (refused or failed).
    pub fn is_error(&self) -> bool {
        self.status != ToolStatus::Ran
    }
}

/// A failure the tool did not expect. The worker sees only a neutral message; the host's log gets
/// this error in full.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailure(pub Box<dyn std::error::Error + Send + Sync>);

impl ToolFailure {
    /// Wrap any error.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(error.into())
    }
}

/// A page as the browser shows it, for the task's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PageSeen {
    /// Its URL.
    pub url: String,
    /// Its title.
    pub title: String,
}

/// One tool the worker may call.
pub trait Tool: Send + Sync {
    /// Its definition for the model.
    fn definition(&self) -> ToolDefinition;
    /// Run it. Cancellation drops the returned future; a tool that starts work outside it (a
    /// process in a container) must bound that work by itself. A refusal is
    /// [`ToolOutput::refused`].
    fn execute(&self, input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>>;
    /// The page this tool's browser shows now, for a recorded task; `None` from a tool that
    /// drives no browser (the default) or when the page cannot be read.
    fn page(&self) -> BoxFuture<'_, Option<PageSeen>> {
        Box::pin(async { None })
    }
    /// A screenshot of the page now, for a recorded task's thumbnail; `None` from a tool that
    /// drives no browser (the default) or may not take one now (a secret shows on the page).
    fn page_screenshot(&self) -> BoxFuture<'_, Option<Image>> {
        Box::pin(async { None })
    }
    /// A fresh look at the page, as the worker would see it after a snapshot, for the worker
    /// after a person acted on it; `None` from a tool that drives no browser (the default).
    fn look(&self) -> BoxFuture<'_, Option<Result<ToolOutput, ToolFailure>>> {
        Box::pin(async { None })
    }
    /// The input that makes this tool open `url`, so the worker can open a task's start page
    /// before the model's first turn; `None` from a tool that drives no browser (the default).
    fn opening(&self, url: &str) -> Option<Value> {
        let _ = url;
        None
    }
}

/// Ends a browser session: called exactly once, however the task ends.
pub trait Dispose: Send {
    /// Release everything the session holds (container, proxy, directories).
    fn dispose(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// What a driver hands the worker for one task.
pub struct BrowserSession {
    /// The worker's only tools.
    pub tools: Vec<Arc<dyn Tool>>,
    /// How to use the browser (agent-browser's own guide, for example).
    pub guide: String,
    /// The driver's own notes for the worker.
    pub prompt: String,
    /// Ends the session.
    pub dispose: Box<dyn Dispose>,
    /// Whether the browser was started before the task asked (a warm pool's session).
    pub warm: bool,
}

impl std::fmt::Debug for BrowserSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserSession")
            .field("tools", &self.tools.len())
            .field("guide_chars", &self.guide.len())
            .finish_non_exhaustive()
    }
}

/// Why the worker may not keep a screenshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeepRefusal {
    /// `max_screenshots` are kept already.
    #[error("not kept: {kept} screenshots are kept already, the most this task may keep")]
    Count {
        /// How many are kept.
        kept: usize,
    },
    /// The image is larger than `max_screenshot_bytes`.
    #[error(
        "not kept: the screenshot is {bytes} bytes, over the {limit}-byte limit; take a smaller one (a selector, or no --full)"
    )]
    Size {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

/// Everything a driver gets for one task: cancellation, limits, and the task's shared records.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// Cancelled when the task ends early (time-out, cancellation).
    pub cancel: CancellationToken,
    /// The task's limits.
    pub limits: TaskLimits,
    /// The named sites the task may reach: a driver must enforce it where the browser's traffic
    /// leaves (the Docker driver sets it on the task's egress proxy) or refuse to start.
    pub scope: Scope,
    /// The operator's route (by name) the browser's traffic leaves by (`None`: the default):
    /// a driver with routes picks it before the task's first command, or refuses to start.
    pub route: Option<String>,
    /// How the browser is set: a driver applies it before the task's first command and keeps
    /// the worker from changing what it fixes, or refuses to start.
    pub browser: airlock_policy::BrowserSettings,
    /// The task's secrets: the driver types them on their sites; every record this context
    /// keeps is scrubbed of them.
    pub secrets: Secrets,
    /// A state to load into the browser before the task's first command.
    pub state_in: Option<Arc<SessionState>>,
    /// Whether the driver saves the browser's final state (before it removes the browser).
    pub return_state: bool,
    final_state: Arc<Mutex<Option<SessionState>>>,
    /// Files the driver places in the browser's reach and the worker may upload by name.
    pub uploads: Uploads,
    /// What the worker may download, and what it has: the driver saves and keeps them here.
    pub downloads: Downloads,
    /// Where the driver offers the task's live view while its session runs.
    pub live: LiveSlot,
    /// The longest the task may wait for a person, in all (zero where nobody can be reached):
    /// its time limit stands still meanwhile, so its browser must outlive the limit by this.
    pub human_wait: Duration,
    screenshots: Arc<Mutex<Vec<Image>>>,
    egress: Arc<Mutex<EgressRecord>>,
    egress_bytes: Arc<Mutex<EgressBytes>>,
    /// The step running now (0 before the first): what the egress proxy reports is stamped
    /// with it.
    step: Arc<AtomicUsize>,
}

impl TaskContext {
    /// A context for a task with these limits.
    pub fn new(cancel: CancellationToken, limits: TaskLimits) -> Self {
        Self {
            cancel,
            limits,
            scope: Scope::default(),
            route: None,
            browser: airlock_policy::BrowserSettings::default(),
            secrets: Secrets::default(),
            state_in: None,
            return_state: false,
            final_state: Arc::default(),
            uploads: Uploads::default(),
            downloads: Downloads::default(),
            live: LiveSlot::default(),
            human_wait: Duration::ZERO,
            screenshots: Arc::default(),
            egress: Arc::default(),
            egress_bytes: Arc::default(),
            step: Arc::default(),
        }
    }

    /// The same context confined to `scope`.
    #[must_use]
    pub fn with_scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// The same context with its browser set so.
    #[must_use]
    pub fn with_browser(mut self, browser: airlock_policy::BrowserSettings) -> Self {
        self.browser = browser;
        self
    }

    /// The same context leaving by the route named `route` (`None`: the operator's default).
    #[must_use]
    pub fn with_route(mut self, route: Option<String>) -> Self {
        self.route = route;
        self
    }

    /// The same context holding `secrets`.
    #[must_use]
    pub fn with_secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// The same context starting from `state` and saving the final one if `return_state`.
    #[must_use]
    pub fn with_state(mut self, state: Option<SessionState>, return_state: bool) -> Self {
        self.state_in = state.map(Arc::new);
        self.return_state = return_state;
        self
    }

    /// The same context allowing downloads up to `limit` bytes in all (`None`: off).
    #[must_use]
    pub fn with_downloads(mut self, limit: Option<u64>) -> Self {
        self.downloads = Downloads::new(limit);
        self
    }

    /// The same context offering its live view in `slot` (the caller's).
    #[must_use]
    pub fn with_live(mut self, slot: LiveSlot) -> Self {
        self.live = slot;
        self
    }

    /// The same context whose task may wait for a person up to `wait` in all.
    #[must_use]
    pub fn with_human_wait(mut self, wait: Duration) -> Self {
        self.human_wait = wait;
        self
    }

    /// The same context carrying `uploads`.
    #[must_use]
    pub fn with_uploads(mut self, uploads: Uploads) -> Self {
        self.uploads = uploads;
        self
    }

    /// Record the browser's final state (the driver does, before it removes the browser).
    pub fn record_final_state(&self, state: SessionState) {
        *lock(&self.final_state) = Some(state);
    }

    /// The final state, if one was recorded.
    pub fn final_state(&self) -> Option<SessionState> {
        lock(&self.final_state).clone()
    }

    /// Record what the egress proxy carried (the driver does, when it stops the proxy).
    pub fn record_egress_bytes(&self, bytes: EgressBytes) {
        *lock(&self.egress_bytes) = bytes;
    }

    /// What the egress proxy carried, as last recorded.
    pub fn egress_bytes(&self) -> EgressBytes {
        *lock(&self.egress_bytes)
    }

    /// Keep a screenshot for the task's result, within the count and size limits.
    pub fn keep_screenshot(&self, image: Image) -> Result<(), KeepRefusal> {
        let limit = self.limits.max_screenshot_bytes;
        if image.data.len() > limit {
            return Err(KeepRefusal::Size {
                bytes: image.data.len(),
                limit,
            });
        }
        let mut kept = lock(&self.screenshots);
        if kept.len() >= self.limits.max_screenshots {
            return Err(KeepRefusal::Count { kept: kept.len() });
        }
        kept.push(image);
        Ok(())
    }

    /// The task's step `step` begins.
    pub fn set_step(&self, step: usize) {
        self.step.store(step, Ordering::Relaxed);
    }

    fn step_now(&self) -> Option<usize> {
        Some(self.step.load(Ordering::Relaxed)).filter(|step| *step > 0)
    }

    /// Record a refusal the egress proxy reported (bounded: see [`EgressRecord`]), with the
    /// step running now.
    pub fn record_refusal(&self, mut refusal: EgressRefusal) {
        // A page can put what was typed into a URL it then asks for.
        refusal.target = self.secrets.scrub(&refusal.target).into_owned();
        refusal.reason = self.secrets.scrub(&refusal.reason).into_owned();
        refusal.step = self.step_now();
        let line = (
            refusal.target.clone(),
            refusal.class.clone(),
            refusal.reason.clone(),
        );
        let mut egress = lock(&self.egress);
        let listed = egress.refusals.len();
        egress.refused(refusal);
        if egress.refusals.len() > listed {
            crate::egress_record::log_refusal(&line.0, &line.1, &line.2);
        }
    }

    /// Record a destination the egress proxy could not reach (bounded likewise).
    pub fn record_failure(&self, mut failure: EgressFailure) {
        failure.target = self.secrets.scrub(&failure.target).into_owned();
        failure.reason = self.secrets.scrub(&failure.reason).into_owned();
        failure.step = self.step_now();
        lock(&self.egress).failed(failure);
    }

    /// Count refusals the driver could not hold one by one (past its own bound).
    pub fn record_unlisted_refusals(&self, class: &str, count: u64) {
        lock(&self.egress).refused_unlisted(class, count);
    }

    /// Count failures the driver could not hold one by one.
    pub fn record_unlisted_failures(&self, count: u64) {
        lock(&self.egress).failed_unlisted(count);
    }

    /// Add connections and bytes to an allowed destination (bounded likewise), with the step
    /// running now if it is new.
    pub fn record_allowed(&self, mut allowed: EgressAllowed) {
        allowed.destination = self.secrets.scrub(&allowed.destination).into_owned();
        allowed.step = self.step_now();
        lock(&self.egress).allowed(allowed);
    }

    /// Record what connections on `route` carried (every one, listed or not).
    pub fn record_route_bytes(&self, route: &str, bytes: EgressBytes) {
        lock(&self.egress).route_bytes(route, bytes);
    }

    /// Count connections to allowed destinations the driver could not hold one by one.
    pub fn record_unlisted_allowed(&self, connections: u64) {
        lock(&self.egress).allowed_unlisted(connections);
    }

    /// The failures listed so far.
    pub fn failures(&self) -> Vec<EgressFailure> {
        lock(&self.egress).failures.clone()
    }

    /// The screenshots kept so far.
    pub fn kept_screenshots(&self) -> Vec<Image> {
        lock(&self.screenshots).clone()
    }

    /// The refusals listed so far.
    pub fn refusals(&self) -> Vec<EgressRefusal> {
        lock(&self.egress).refusals.clone()
    }

    /// The whole egress record: the lists and the counts of what they leave out.
    pub fn egress_record(&self) -> EgressRecord {
        lock(&self.egress).clone()
    }
}

/// The records are plain lists; a panic elsewhere while holding the lock leaves them usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a driver cannot run tasks, or could not start one. It carries the driver's own typed
/// error, whose message names the fix; [`DriverError::downcast_ref`] tells which condition it was.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DriverError(Box<dyn std::error::Error + Send + Sync>);

impl DriverError {
    /// Wrap a driver's error (or a message, for drivers with no error type of their own).
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(error.into())
    }

    /// The driver's own error, if it is of type `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }
}

/// Supplies a sealed browser for each task.
pub trait BrowserDriver: Send + Sync {
    /// Whether tasks can run at all (daemon up, image present, not root, …).
    fn check(&self) -> BoxFuture<'_, Result<(), DriverError>>;
    /// Start a browser session for one task.
    fn start(&self, context: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>>;
}

/// What the model is asked each turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The standing instructions, the driver's guide and prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools it may call.
    pub tools: Vec<ToolDefinition>,
    /// The most output tokens this turn may spend, when a token budget leaves less than the
    /// backend's own cap; a backend answers with at most the smaller of the two.
    pub max_output_tokens: Option<u32>,
}

/// Why the model could not produce a turn. It carries the backend's own typed error, whose message
/// names the fix and never a key; [`ModelError::downcast_ref`] tells which condition it was.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ModelError(Box<dyn std::error::Error + Send + Sync>);

impl ModelError {
    /// Wrap a backend's error.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(error.into())
    }

    /// The backend's own error, if it is of type `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }
}

/// The worker's mind: given the conversation, return the next assistant turn.
pub trait Model: Send + Sync {
    /// The next turn. Cancellation drops the returned future.
    fn next_turn(&self, request: ModelRequest) -> BoxFuture<'_, Result<AssistantTurn, ModelError>>;
}
