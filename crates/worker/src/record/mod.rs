//! A task's flight record: every step (the command as the worker wrote it, the verdict, what it
//! showed, the page it left, a thumbnail where the page was seen), every model turn's tokens, every
//! egress decision, and how the task ended. Everything in it is bounded, and it is scrubbed of the
//! task's secrets and of the values the browser stored once the task is over, so a value learned
//! late is gone from early steps too.

mod recorder;
mod scrub_all;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::downloads::Download;
use crate::egress_record::{EgressAllowed, EgressBytes, EgressFailure, EgressRefusal};
use crate::messages::{Image, Usage};
use crate::ports::PageSeen;
use crate::task::{ContextUse, Ended, ScopeReport, Timings};

pub(crate) use recorder::{Recorder, verdict_of, verdict_of_status};

/// The record format's version; it changes when a field changes meaning or goes away.
pub const RECORD_FORMAT: u32 = 1;
/// Characters of a step's output kept in its record (the worker may have read more).
pub(crate) const RECORD_PREVIEW_CHARS: usize = 600;
/// Characters of a command's standard input (an `eval` script) kept.
pub(crate) const RECORD_STDIN_CHARS: usize = 2_000;
/// The longest side of a thumbnail, in pixels.
pub const THUMBNAIL_SIDE: u32 = 480;
/// The bytes of thumbnails one record holds; later thumbnails are counted, not kept.
pub(crate) const MAX_THUMBNAIL_BYTES: usize = 8 * 1024 * 1024;
/// Characters of a page's URL or title kept.
pub(crate) const RECORD_PAGE_CHARS: usize = 500;

/// One task, step by step, for a person to audit afterwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlightRecord {
    /// [`RECORD_FORMAT`].
    pub format: u32,
    /// The task as it was asked.
    pub task: String,
    /// Where it started, if anywhere.
    pub start_url: Option<String>,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// The sites it was confined to (empty lists: no limit of that kind).
    pub scope: ScopeReport,
    /// How the browser was set for the task (omitted: the browser's defaults).
    #[serde(
        default,
        skip_serializing_if = "airlock_policy::BrowserSettings::is_default"
    )]
    pub browser: airlock_policy::BrowserSettings,
    /// Every step (tool call), in order.
    pub steps: Vec<RecordedStep>,
    /// Every model turn, in order.
    pub turns: Vec<RecordedTurn>,
    /// Thumbnails left out because the record's thumbnail bytes were spent.
    pub thumbnails_not_kept: u64,
    /// What the egress proxy allowed, refused and could not reach.
    pub egress: RecordedEgress,
    /// The files the worker downloaded (names and sizes; the files go to the caller).
    pub downloads: Vec<RecordedDownload>,
    /// Screenshots the worker kept for its report.
    pub screenshots_kept: usize,
    /// The worker's report.
    pub report: String,
    /// The answer matching the task's output schema, as the result carries it (scrubbed there
    /// with the same secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// How the task ended.
    pub ended: Ended,
    /// Tool calls made.
    pub steps_used: usize,
    /// Where the time went.
    pub timings: Timings,
    /// Tokens used, summed over the turns.
    pub usage: Usage,
    /// What the worker was shown, summed.
    pub context: ContextUse,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordedStep {
    /// Its number, from 1.
    pub step: usize,
    /// The model turn that asked for it, from 1.
    pub turn: usize,
    /// When it began, in milliseconds since the task began.
    pub at_ms: u64,
    /// How long it ran.
    pub took_ms: u64,
    /// The tool called.
    pub tool: String,
    /// The command as the worker wrote it (`agent_browser`'s `args`; for other tools, the input
    /// as JSON): secrets appear as their placeholders.
    pub command: Vec<String>,
    /// What the command fed to standard input (an `eval` script), cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// What became of it.
    pub verdict: Verdict,
    /// The start of what the worker was shown.
    pub output: String,
    /// The length of what the worker was shown, in characters.
    pub output_chars: u64,
    /// The page after the step, where the tool drives a browser.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<PageSeen>,
    /// A small picture of the page: at a screenshot the worker took, or where the page changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbnail: Option<Thumbnail>,
    /// For a call for a person's help: the reason, the wait, and what the person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<crate::help::RecordedHelp>,
}

/// What became of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// It ran and succeeded.
    Ran,
    /// The driver's policy refused it before it ran.
    Refused {
        /// The policy's reason.
        reason: String,
    },
    /// It ran and failed, or could not run (the first line of why).
    Failed {
        /// Why.
        reason: String,
    },
    /// It was not run (the step limit was spent, or no such tool).
    NotRun {
        /// Why.
        reason: String,
    },
}

/// Why a thumbnail was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThumbnailCause {
    /// The worker took a screenshot.
    Screenshot,
    /// The page's URL changed.
    Navigation,
}

/// A small picture of the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Thumbnail {
    /// Why it was taken.
    pub cause: ThumbnailCause,
    /// The picture (`image/png` or `image/jpeg`; base64 in JSON), at most
    /// [`THUMBNAIL_SIDE`] pixels on its longest side.
    pub image: Image,
}

/// One model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordedTurn {
    /// Its number, from 1.
    pub turn: usize,
    /// When the model was asked, in milliseconds since the task began.
    pub at_ms: u64,
    /// How long the model took.
    pub took_ms: u64,
    /// Tokens it used.
    pub usage: Usage,
    /// Characters of text it wrote.
    pub text_chars: u64,
    /// Tool calls it asked for.
    pub tool_calls: usize,
    /// The call was read from the turn's text: the model wrote it there instead of in the
    /// API's tool-call field.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub call_read_from_text: bool,
    /// Characters of tool output it was shown before this turn.
    pub chars_shown_before: u64,
}

/// Every egress decision, within bounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordedEgress {
    /// Bytes carried to and from allowed destinations.
    pub bytes: EgressBytes,
    /// Refused destinations (the first 100 distinct, by class), each with its count.
    pub refusals: Vec<EgressRefusal>,
    /// Refusals of destinations past that list.
    pub refusals_not_listed: u64,
    /// Every refusal, by class.
    pub refusals_by_class: BTreeMap<String, u64>,
    /// Allowed destinations that could not be reached.
    pub failures: Vec<EgressFailure>,
    /// Failures past that list.
    pub failures_not_listed: u64,
    /// Allowed destinations (the first 100 distinct), each with its connections and the bytes
    /// they carried.
    #[serde(default)]
    pub allowed: Vec<EgressAllowed>,
    /// Connections to allowed destinations past that list.
    #[serde(default)]
    pub allowed_not_listed: u64,
    /// What each route carried, by the route's name (every connection, listed or not).
    #[serde(default)]
    pub bytes_by_route: BTreeMap<String, EgressBytes>,
}

/// A file the worker downloaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordedDownload {
    /// The name the worker gave it.
    pub name: String,
    /// Its type, from its first bytes.
    pub media_type: String,
    /// Its size.
    pub bytes: u64,
}

impl From<&Download> for RecordedDownload {
    fn from(download: &Download) -> Self {
        Self {
            name: download.name.clone(),
            media_type: download.media_type.clone(),
            bytes: download.bytes,
        }
    }
}
