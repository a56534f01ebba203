//! Airlock's task runner: one browser task, within its limits, ending in a written report and the
//! screenshots the worker chose to keep.
//!
//! The worker knows two ports and nothing behind them: a [`BrowserDriver`] that supplies the
//! worker's only tools (the Docker driver, in Airlock), and a [`Model`] that plays the worker (a
//! model backend, or the [`ScriptedModel`] for reproducible runs and tests).
//!
//! ```
//! use std::sync::Arc;
//! use airlock_worker::*;
//! use tokio_util::sync::CancellationToken;
//!
//! /// A driver whose session has no tools.
//! struct Empty;
//! struct Nothing;
//! impl Dispose for Nothing {
//!     fn dispose(self: Box<Self>) -> BoxFuture<'static, ()> { Box::pin(async {}) }
//! }
//! impl BrowserDriver for Empty {
//!     fn check(&self) -> BoxFuture<'_, Result<(), DriverError>> { Box::pin(async { Ok(()) }) }
//!     fn start(&self, _: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>> {
//!         Box::pin(async {
//!             Ok(BrowserSession { tools: vec![], guide: String::new(), prompt: String::new(), dispose: Box::new(Nothing), warm: false })
//!         })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = ScriptedModel::new(Script {
//!     turns: vec![ScriptedTurn { text: "Nothing to browse.".into(), ..Default::default() }],
//! });
//! let runner = TaskRunner::new(Arc::new(Empty), Arc::new(model), TaskLimits::default()).unwrap();
//! let request = TaskRequest { task: "Say hello".into(), url: None, scope: Default::default(), secrets: Default::default(), state: None, return_state: false, uploads: Default::default(), max_download_bytes: None, route: None, output_schema: None, browser: Default::default() };
//! let result = runner.run(request, CancellationToken::new()).await.unwrap();
//! assert_eq!(result.ended, Ended::Completed);
//! assert_eq!(result.report, "Nothing to browse.");
//! # });
//! ```

mod answer;
mod direct;
mod downloads;
mod egress_record;
mod fit_image;
mod help;
mod instructions;
mod kept_output;
mod limits;
mod live;
mod messages;
mod ports;
mod record;
mod run;
mod scripted;
mod scrub;
mod secrets;
mod shown_output;
mod state;
mod task;
mod token_budget;
mod token_estimate;
mod uploads;
mod window;

pub use airlock_policy::{BrowserSettings, DomainPattern, HumanInput, Scope, ScopeError};
pub use answer::{
    GIVE_ANSWER, MAX_ANSWER_BYTES, MAX_ANSWER_TRIES, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH,
    OutputSchema, OutputSchemaError,
};
pub use direct::{DirectLimits, DirectOutput, DirectSession};
pub use downloads::{Download, DownloadRefusal, Downloads, MAX_DOWNLOAD_BYTES_CEILING};
pub use egress_record::{
    EGRESS_LIST_LIMIT, EgressAllowed, EgressBytes, EgressFailure, EgressRecord, EgressRefusal,
    log_refusal, tally_allowed,
};
pub use fit_image::fit_for_model;
pub use help::{DeskState, HelpCall, HelpDesk, HelpOutcome, HumanActions, RecordedHelp};
pub use instructions::STANDING_INSTRUCTIONS;
pub use kept_output::cut;
pub use kept_output::{READ_OUTPUT, READ_OUTPUT_DESCRIPTION, ReadOutputError, ReadOutputInput};
pub use limits::{DEFAULT_MAX_IMAGE_SIDE, LimitError, TaskLimits};
pub use live::{LiveError, LiveFeed, LiveFrame, LiveSlot, LiveSource, WatchFuture};
pub use messages::{AssistantTurn, Content, Image, Message, ToolCall, ToolResult, Usage};
pub use ports::{
    BoxFuture, BrowserDriver, BrowserSession, Dispose, DriverError, KeepRefusal, Model, ModelError,
    ModelRequest, PageSeen, TaskContext, Tool, ToolDefinition, ToolFailure, ToolOutput, ToolStatus,
};
pub use record::{
    FlightRecord, RECORD_FORMAT, RecordedDownload, RecordedEgress, RecordedStep, RecordedTurn,
    THUMBNAIL_SIDE, Thumbnail, ThumbnailCause, Verdict,
};
pub use run::TaskRunner;
pub use scripted::{
    Expectation, ReplayError, Script, ScriptError, ScriptedCall, ScriptedModel, ScriptedTurn,
};
pub use scrub::scrub;
pub use secrets::{
    MAX_SECRET_BYTES, Secret, SecretError, SecretValue, Secrets, mentions_placeholder, placeholder,
    placeholder_name,
};
pub use state::{
    MAX_STATE_BYTES, OriginState, SessionState, StateCookie, StateError, StorageEntry,
};
pub use task::{
    ContextUse, Ended, Progress, ProgressSink, RunError, ScopeReport, TaskRequest, TaskResult,
    Timings,
};
pub use tokio_util::sync::CancellationToken;
pub use uploads::{MAX_UPLOAD_BYTES, MAX_UPLOAD_TOTAL_BYTES, Upload, UploadError, Uploads};
pub use window::TaskWindow;
