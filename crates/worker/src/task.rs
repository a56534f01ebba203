//! What a task is asked, and everything it returns: how it ended, where the time went, what the
//! worker was shown, what the egress proxy refused.

use std::sync::Arc;

use airlock_policy::Scope;
use serde::{Deserialize, Serialize};

use crate::downloads::{Download, MAX_DOWNLOAD_BYTES_CEILING, MAX_DOWNLOAD_FILES};
use crate::egress_record::{EgressAllowed, EgressBytes, EgressFailure, EgressRefusal};
use crate::kept_output::KeptOutputs;
use crate::limits::LimitError;
use crate::messages::{Content, Image, Usage};
use crate::secrets::{SecretError, Secrets};
use crate::state::{SessionState, StateError};
use crate::uploads::Uploads;

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRequest {
    /// The task, in the user's words.
    pub task: String,
    /// Where to start, if anywhere.
    pub url: Option<String>,
    /// The named sites the browser may reach (unlimited by default). The driver enforces it in
    /// the egress proxy; the worker is told it.
    pub scope: Scope,
    /// Named secrets the worker may have typed (by placeholder) on their sites; it never sees
    /// a value. The scope must cover every secret's sites.
    pub secrets: Secrets,
    /// A session state to start from (loaded before the first command), inside the scope.
    pub state: Option<SessionState>,
    /// Hand the final state back in the result (restricted to the scope), never to the worker.
    pub return_state: bool,
    /// Files the worker may upload, by name, into a file input on a page inside the scope.
    pub uploads: Uploads,
    /// Let the worker download files, up to this many bytes in all (at most
    /// [`crate::MAX_DOWNLOAD_BYTES_CEILING`]); `None` (the default) keeps downloads, and so
    /// reading PDFs, off.
    pub max_download_bytes: Option<u64>,
    /// The operator's route (by name) the browser's traffic leaves by, where no route's own
    /// sites say otherwise; `None`: the operator's default. The driver refuses a name it does
    /// not have.
    pub route: Option<String>,
    /// A JSON Schema the answer must match: the worker hands it to `give_answer`, the result
    /// carries it as `data`; `None`: a report only.
    pub output_schema: Option<crate::answer::OutputSchema>,
    /// How the browser is set (viewport or device, locale, time zone, geolocation, colour
    /// scheme), checked by the caller against its ceiling; the driver applies it before the first
    /// command and the worker cannot change what it fixes. Default: the browser's own.
    pub browser: airlock_policy::BrowserSettings,
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The worker wrote its report.
    Completed,
    /// The worker used every step (its report is the turn after the last step).
    StepLimit,
    /// The worker's token budget could not pay for another turn with tools (its report is the
    /// turn after, when one fits; otherwise the report is the worker's last words).
    TokenBudget,
    /// The time limit ran out.
    TimedOut,
    /// The task was cancelled.
    Cancelled,
    /// The browser or the model failed.
    Failed,
    /// The task asked for an answer matching a schema and the worker gave none that did within
    /// its tries (its report says what the last one missed).
    NoValidAnswer,
}

/// How long the parts of the task took, in milliseconds.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Timings {
    /// From request to result.
    pub total_ms: u64,
    /// Starting the browser session (or taking a warm one).
    pub browser_start_ms: u64,
    /// Whether the session came warm from a pool, started before the task asked.
    pub browser_warm: bool,
    /// Waiting for the model.
    pub model_ms: u64,
    /// Running tools.
    pub tools_ms: u64,
    /// Ending the browser session.
    pub dispose_ms: u64,
}

/// What the worker was shown of its tools' outputs, to weigh what a task cost its context.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ContextUse {
    /// Characters of tool output shown (previews and pages included).
    pub chars_shown: u64,
    /// Images shown.
    pub images_shown: u64,
    /// Bytes of those images, as sent to the model.
    pub image_bytes_shown: u64,
    /// Long outputs kept for paging.
    pub outputs_kept: u64,
    /// `read_output` calls answered.
    pub output_reads: u64,
}

impl ContextUse {
    /// Count what one tool result showed.
    pub(crate) fn record(&mut self, content: &[Content]) {
        for block in content {
            match block {
                Content::Text { text } => {
                    self.chars_shown = self.chars_shown.saturating_add(count(text.chars().count()));
                }
                Content::Image { image } => {
                    self.images_shown += 1;
                    self.image_bytes_shown = self
                        .image_bytes_shown
                        .saturating_add(count(image.data.len()));
                }
            }
        }
    }
}

impl ContextUse {
    /// This record with the store's counts of outputs kept and pages read.
    pub(crate) fn with_store(self, kept: &KeptOutputs) -> Self {
        Self {
            outputs_kept: count(kept.kept_count()),
            output_reads: count(kept.read_count()),
            ..self
        }
    }
}

/// A kept screenshot as a task's JSON carries it.
#[derive(Serialize, schemars::JsonSchema)]
struct InlineScreenshot<'a> {
    /// `image/png`.
    media_type: &'a str,
    /// Its size.
    bytes: u64,
    /// The image, in base64.
    data: String,
}

fn inline_screenshots<S: serde::Serializer>(images: &[Image], to: S) -> Result<S::Ok, S::Error> {
    to.collect_seq(images.iter().map(|image| InlineScreenshot {
        media_type: &image.media_type,
        bytes: count(image.data.len()),
        data: image.base64(),
    }))
}

fn count(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// Everything a task returns.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TaskResult {
    /// The worker's report (capped at `max_output_chars`), or why there is none.
    pub report: String,
    /// The screenshots the worker kept (in JSON each inline, with its size).
    #[serde(serialize_with = "inline_screenshots")]
    #[schemars(with = "Vec<InlineScreenshot>")]
    pub screenshots: Vec<Image>,
    /// Tool calls made.
    pub steps_used: usize,
    /// How it ended.
    pub ended: Ended,
    /// Destinations the egress proxy refused: the first 100 distinct ones (by class), each with
    /// how often.
    pub egress_refusals: Vec<EgressRefusal>,
    /// Refusals of further destinations, counted but not listed.
    pub egress_refusals_not_listed: u64,
    /// Every refusal, by class.
    pub egress_refusals_by_class: std::collections::BTreeMap<String, u64>,
    /// Destinations the egress proxy allowed but could not reach, with what it saw (the first
    /// 100 distinct ones, each with how often).
    pub egress_failures: Vec<EgressFailure>,
    /// Failures of further destinations, counted but not listed.
    pub egress_failures_not_listed: u64,
    /// Bytes the egress proxy carried.
    pub egress_bytes: EgressBytes,
    /// Destinations the egress proxy allowed: the first 100 distinct ones, each with its
    /// connections and the bytes they carried.
    pub egress_allowed: Vec<EgressAllowed>,
    /// Connections to further allowed destinations, counted but not listed.
    pub egress_allowed_not_listed: u64,
    /// What each route carried, by the route's name (`direct`, or the operator's parents'):
    /// every connection, listed or not.
    pub egress_bytes_by_route: std::collections::BTreeMap<String, EgressBytes>,
    /// Where the time went.
    pub timings: Timings,
    /// Tokens the worker's model used, summed over the task's turns.
    pub usage: Usage,
    /// What the worker was shown.
    pub context: ContextUse,
    /// The sites the task was confined to (empty lists: no limit of that kind).
    pub scope: ScopeReport,
    /// The browser's final state (cookies, `localStorage`) inside the scope, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<SessionState>,
    /// The files the worker downloaded (when the task allowed downloads), in order.
    pub downloads: Vec<Download>,
    /// The answer, matching the task's output schema (scrubbed of its secrets like the report);
    /// absent when the task asked for none or ended without one that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

/// A task's scope as the caller reads it back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScopeReport {
    /// The names and `*.` wildcards the browser could reach (empty: any public site).
    pub allowed_domains: Vec<String>,
    /// The names and wildcards refused even when allowed.
    pub blocked_domains: Vec<String>,
}

impl From<&Scope> for ScopeReport {
    fn from(scope: &Scope) -> Self {
        let list = |patterns: &[airlock_policy::DomainPattern]| {
            patterns.iter().map(ToString::to_string).collect()
        };
        Self {
            allowed_domains: list(scope.allowed()),
            blocked_domains: list(scope.blocked()),
        }
    }
}

/// What the worker is told of its secrets, if it holds any.
pub(crate) fn secret_instructions(secrets: &Secrets) -> Option<String> {
    if secrets.is_empty() {
        return None;
    }
    let list: Vec<String> = secrets
        .iter()
        .map(|secret| {
            let sites: Vec<String> = secret.domains().iter().map(ToString::to_string).collect();
            format!("- `{}` (for {})", secret.name(), sites.join(", "))
        })
        .collect();
    Some(format!(
        "Secrets: for this task you may sign in with these named secrets, and only on their \
         sites. You never see a value: to type one, write its placeholder as the whole text of a \
         fill or type command, for example [\"fill\", \"#password\", \"{}\"]. It is typed only \
         if the page is on that secret's site. Commands that would read a field back (eval, get \
         value, get attr, get html, network requests) are refused while secrets are held.\n{}",
        crate::secrets::placeholder(secrets.iter().next().map_or("NAME", |s| s.name())),
        list.join("\n")
    ))
}

/// What the worker is told of the files it may upload, if any.
pub(crate) fn upload_instructions(uploads: &Uploads) -> Option<String> {
    (!uploads.is_empty()).then(|| {
        format!(
            "Files: you may upload these files, by name, into a file input on a page inside the \
             task's scope: [\"upload\", SELECTOR, NAME]. They are: {}. No other file can be \
             uploaded.",
            uploads.listed()
        )
    })
}

/// What the worker is told of downloads, if the task allows them.
pub(crate) fn download_instructions(limit: Option<u64>) -> Option<String> {
    limit.map(|limit| {
        format!(
            "Downloads: you may download up to {MAX_DOWNLOAD_FILES} files ({limit} bytes in all) \
             by clicking what starts the download: [\"download\", SELECTOR, NAME], where NAME is \
             a plain file name you choose (letters, digits, `.`, `_`, `-`). A PDF link is \
             downloaded the same way; the browser does not show PDFs. Read a downloaded PDF, \
             text, CSV or HTML file as text with the read_document tool. The files go to the \
             person who asked for the task."
        )
    })
}

/// What the worker is told of its scope, if it has one.
pub(crate) fn scope_instructions(scope: &Scope) -> Option<String> {
    if scope.is_unlimited() {
        return None;
    }
    Some(format!(
        "Scope: this task may reach {scope}. A `*.name` entry covers every name under it, not the \
         bare name. Anything else, including any address written as numbers, is refused by the \
         egress proxy; do not try to reach it another way."
    ))
}

/// Why a task was not run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `max_concurrent_tasks` tasks are running already.
    #[error(
        "{running} tasks are running already, the most this runner allows (max_concurrent_tasks); try again when one ends"
    )]
    Busy {
        /// How many run now.
        running: usize,
    },
    /// A limit is out of range.
    #[error(transparent)]
    Limits(#[from] LimitError),
    /// The task text is empty.
    #[error("the task is empty: say what the browser worker should do")]
    EmptyTask,
    /// The task's secrets do not fit its scope.
    #[error(transparent)]
    Secrets(#[from] SecretError),
    /// The task's starting state does not fit its scope.
    #[error(transparent)]
    State(#[from] StateError),
    /// `max_download_bytes` is 0 or over the ceiling.
    #[error(
        "max_download_bytes is {given}: give 1 to {MAX_DOWNLOAD_BYTES_CEILING} bytes, or leave it out to keep downloads off"
    )]
    DownloadLimit {
        /// The value given.
        given: u64,
    },
}

/// One step of progress, for whoever shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// This step's number, from 1.
    pub step: usize,
    /// The step limit.
    pub max_steps: usize,
    /// What the step does, briefly (`agent_browser open https://…`).
    pub summary: String,
}

/// Receives progress; called on the task's own task, so keep it quick.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;
