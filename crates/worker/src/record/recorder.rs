//! Writes a task's record as it runs: the run loop tells it each turn and step, and it keeps
//! them within the record's bounds.

use std::time::Instant;

use serde_json::Value;

use super::{
    FlightRecord, MAX_THUMBNAIL_BYTES, RECORD_FORMAT, RECORD_PAGE_CHARS, RECORD_PREVIEW_CHARS,
    RECORD_STDIN_CHARS, RecordedDownload, RecordedEgress, RecordedStep, RecordedTurn,
    THUMBNAIL_SIDE, Thumbnail, ThumbnailCause, Verdict,
};
use crate::fit_image::fit_for_model;
use crate::kept_output::cut;
use crate::messages::{AssistantTurn, Content, Image, ToolCall, text_of};
use crate::ports::{PageSeen, ToolFailure, ToolOutput, ToolStatus};
use crate::secrets::Secrets;
use crate::task::{TaskRequest, TaskResult};

/// The longest reason kept in a verdict, in characters.
const REASON_CHARS: usize = 400;
/// The longest command word kept, in characters (a `fill` may carry a page of text).
const WORD_CHARS: usize = 400;

/// A record in the making.
pub(crate) struct Recorder {
    began: Instant,
    started_at_unix_ms: u64,
    task: String,
    start_url: Option<String>,
    browser: airlock_policy::BrowserSettings,
    steps: Vec<RecordedStep>,
    turns: Vec<RecordedTurn>,
    thumbnail_bytes: usize,
    thumbnails_not_kept: u64,
    last_url: Option<String>,
}

impl Recorder {
    pub(crate) fn new(request: &TaskRequest) -> Self {
        let started_at_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            });
        Self {
            began: Instant::now(),
            started_at_unix_ms,
            task: request.task.clone(),
            start_url: request.url.clone(),
            browser: request.browser.clone(),
            steps: Vec::new(),
            turns: Vec::new(),
            thumbnail_bytes: 0,
            thumbnails_not_kept: 0,
            last_url: None,
        }
    }

    /// Milliseconds since the task began, at `instant`.
    pub(crate) fn at(&self, instant: Instant) -> u64 {
        millis(instant.saturating_duration_since(self.began))
    }

    /// A model turn that began at `began` and answered now.
    pub(crate) fn turn(&mut self, began: Instant, turn: &AssistantTurn, chars_shown_before: u64) {
        self.turns.push(RecordedTurn {
            turn: self.turns.len() + 1,
            at_ms: self.at(began),
            took_ms: millis(began.elapsed()),
            usage: turn.usage,
            text_chars: count(turn.text.chars().count()),
            tool_calls: turn.tool_calls.len(),
            call_read_from_text: turn.call_read_from_text,
            chars_shown_before,
        });
    }

    /// A step that began at `began`, with the verdict and what the worker was shown.
    pub(crate) fn step(
        &mut self,
        began: Instant,
        call: &ToolCall,
        verdict: Verdict,
        shown: &[Content],
    ) -> &mut RecordedStep {
        let text = text_of(shown);
        let (command, stdin) = written(call);
        self.steps.push(RecordedStep {
            step: self.steps.len() + 1,
            turn: self.turns.len(),
            at_ms: self.at(began),
            took_ms: millis(began.elapsed()),
            tool: call.name.clone(),
            command,
            stdin,
            verdict,
            output: cut(&text, RECORD_PREVIEW_CHARS),
            output_chars: count(text.chars().count()),
            page: None,
            thumbnail: None,
            help: None,
        });
        let last = self.steps.len() - 1;
        &mut self.steps[last]
    }

    /// Note the page the last step left; whether it is another page than the one before.
    pub(crate) fn page(&mut self, page: &PageSeen) -> bool {
        let page = PageSeen {
            url: cut(&page.url, RECORD_PAGE_CHARS),
            title: cut(&page.title, RECORD_PAGE_CHARS),
        };
        let moved = self.last_url.as_deref() != Some(page.url.as_str());
        self.last_url = Some(page.url.clone());
        if let Some(step) = self.steps.last_mut() {
            step.page = Some(page);
        }
        moved
    }

    /// Whether another thumbnail may still be kept.
    pub(crate) fn has_room(&mut self) -> bool {
        let room = self.thumbnail_bytes < MAX_THUMBNAIL_BYTES;
        if !room {
            self.thumbnails_not_kept += 1;
        }
        room
    }

    /// A thumbnail of `image` on the last step, made off the async threads.
    pub(crate) async fn thumbnail(&mut self, cause: ThumbnailCause, image: Image) {
        if !self.has_room() {
            return;
        }
        let Ok(small) =
            tokio::task::spawn_blocking(move || fit_for_model(image, THUMBNAIL_SIDE)).await
        else {
            return;
        };
        if self.thumbnail_bytes + small.data.len() > MAX_THUMBNAIL_BYTES {
            self.thumbnails_not_kept += 1;
            return;
        }
        self.thumbnail_bytes += small.data.len();
        if let Some(step) = self.steps.last_mut() {
            step.thumbnail = Some(Thumbnail {
                cause,
                image: small,
            });
        }
    }

    /// The record of a task that ended with `result`, scrubbed with `secrets` as they stand at
    /// the end.
    pub(crate) fn finish(self, result: &TaskResult, secrets: &Secrets) -> FlightRecord {
        let record = FlightRecord {
            format: RECORD_FORMAT,
            task: self.task,
            start_url: self.start_url,
            started_at_unix_ms: self.started_at_unix_ms,
            browser: self.browser,
            scope: result.scope.clone(),
            steps: self.steps,
            turns: self.turns,
            thumbnails_not_kept: self.thumbnails_not_kept,
            egress: RecordedEgress {
                bytes: result.egress_bytes,
                refusals: result.egress_refusals.clone(),
                refusals_not_listed: result.egress_refusals_not_listed,
                refusals_by_class: result.egress_refusals_by_class.clone(),
                failures: result.egress_failures.clone(),
                failures_not_listed: result.egress_failures_not_listed,
                allowed: result.egress_allowed.clone(),
                allowed_not_listed: result.egress_allowed_not_listed,
                bytes_by_route: result.egress_bytes_by_route.clone(),
            },
            downloads: result
                .downloads
                .iter()
                .map(RecordedDownload::from)
                .collect(),
            screenshots_kept: result.screenshots.len(),
            report: result.report.clone(),
            data: result.data.clone(),
            ended: result.ended,
            steps_used: result.steps_used,
            timings: result.timings,
            usage: result.usage,
            context: result.context,
        };
        super::scrub_all::scrubbed(record, secrets)
    }
}

/// What became of a tool call, from its outcome (before it was fitted for the worker).
pub(crate) fn verdict_of(outcome: &Result<ToolOutput, ToolFailure>) -> Verdict {
    match outcome {
        Ok(output) => verdict_of_status(&output.status, &output.text),
        // The details are in the host's log under the reference the worker was shown.
        Err(_) => Verdict::Failed {
            reason: "the tool failed unexpectedly (see the host's log)".to_owned(),
        },
    }
}

/// What became of a call whose result was `text`, as `status` tells it.
pub(crate) fn verdict_of_status(status: &ToolStatus, text: &str) -> Verdict {
    match status {
        ToolStatus::Ran => Verdict::Ran,
        ToolStatus::Refused { reason } => Verdict::Refused {
            reason: first_line(reason),
        },
        ToolStatus::Failed => Verdict::Failed {
            reason: first_line(text),
        },
    }
}

fn first_line(text: &str) -> String {
    cut(text.trim().lines().next().unwrap_or(""), REASON_CHARS)
}

/// The command as the worker wrote it: `agent_browser`'s words, or another tool's input.
fn written(call: &ToolCall) -> (Vec<String>, Option<String>) {
    let words = call.words().map(|args| {
        args.iter()
            .map(|arg| match arg {
                Value::String(word) => cut(word, WORD_CHARS),
                other => cut(&other.to_string(), WORD_CHARS),
            })
            .collect()
    });
    let stdin = call
        .input
        .get("stdin")
        .and_then(Value::as_str)
        .map(|text| cut(text, RECORD_STDIN_CHARS));
    match words {
        Some(words) => (words, stdin),
        None => (vec![cut(&call.input.to_string(), WORD_CHARS)], stdin),
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn count(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}
