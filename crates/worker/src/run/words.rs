//! The words a task's run writes itself: the first message (the task and what it adds to the
//! standing instructions), the results of calls not run, the
//! reports of tasks that did not finish, progress lines.

use serde_json::Value;

use crate::instructions::NO_CREDENTIALS;
use crate::kept_output::cut;
use crate::limits::TaskLimits;
use crate::messages::{Content, ToolCall, ToolResult};
use crate::task::{
    TaskRequest, download_instructions, scope_instructions, secret_instructions,
    upload_instructions,
};

/// The first message: the task, its start page (open, or where to start), its step limit, and what this task's scope,
/// secrets and files add to the standing instructions.
pub(super) fn task_message(request: &TaskRequest, max_steps: usize, start: &StartPage) -> String {
    let mut message = format!("Task: {}", request.task.trim());
    if let Some(url) = &request.url {
        message.push_str("\n\n");
        message.push_str(&told(url, start));
    }
    message.push_str(&format!(
        "\n\nSteps: you have {max_steps} tool calls for this task; the report after them is not one."
    ));
    let credentials = if request.secrets.is_empty() {
        Some(NO_CREDENTIALS.to_owned())
    } else {
        secret_instructions(&request.secrets)
    };
    for part in [
        credentials,
        scope_instructions(&request.scope),
        upload_instructions(&request.uploads),
        download_instructions(request.max_download_bytes),
        request
            .output_schema
            .as_ref()
            .map(|_| crate::answer::instructions()),
    ]
    .into_iter()
    .flatten()
    {
        message.push_str("\n\n");
        message.push_str(&part);
    }
    message
}

/// What became of the start page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StartPage {
    /// No URL, or no tool that opens one: the model is told where to start, as before.
    NotOpened,
    /// Opened; what a snapshot of its elements showed (`None` when the look failed).
    Opened { elements: Option<String> },
    /// The tool answered with an error (a refusal, a page that would not load): its words.
    Failed(String),
}

/// The first message's words about the start page.
fn told(url: &str, start: &StartPage) -> String {
    match start {
        StartPage::NotOpened => format!("Start at: {url}"),
        StartPage::Opened {
            elements: Some(elements),
        } => format!(
            "The start page {url} is open (opening it spent no step). Its elements now \
             (snapshot -i):\n{}",
            elements.trim()
        ),
        StartPage::Opened { elements: None } => format!(
            "The start page {url} is open (opening it spent no step); take a snapshot to see it."
        ),
        StartPage::Failed(said) => format!(
            "Start at: {url}. The worker tried to open it for you and the browser said:\n{}",
            said.trim()
        ),
    }
}

pub(super) fn error_result(call: &ToolCall, text: String) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        content: vec![Content::text(text)],
        is_error: true,
    }
}

pub(super) fn timed_out_report(limits: &TaskLimits, last_text: &str) -> String {
    let mut report = format!(
        "The task timed out after {} seconds.",
        limits.timeout.as_secs()
    );
    if !last_text.trim().is_empty() {
        report.push_str("\n\nThe worker's last words:\n");
        report.push_str(last_text.trim());
    }
    report
}

pub(super) fn cancelled_report(last_text: &str) -> String {
    let mut report = "The task was cancelled.".to_owned();
    if !last_text.trim().is_empty() {
        report.push_str("\n\nThe worker's last words:\n");
        report.push_str(last_text.trim());
    }
    report
}

/// `agent_browser open https://…` from a call, for progress lines.
pub(super) fn summarize(call: &ToolCall) -> String {
    let args = spoken_words(call);
    let reason = call.input.get("reason").and_then(Value::as_str);
    let summary = match (args, reason) {
        (Some(args), _) => format!("{} {args}", call.name),
        (None, Some(reason)) => format!("{}: {reason}", call.name),
        (None, None) => call.name.clone(),
    };
    cut(&summary, 120)
}

/// A call's `args` as one line of words (`click @e3`); `None` for a call without them.
pub(super) fn spoken_words(call: &ToolCall) -> Option<String> {
    call.words().map(|args| {
        args.iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The result of a call past the step limit, which was not run.
pub(super) fn step_limit_result(call: &ToolCall, max_steps: usize) -> ToolResult {
    error_result(
        call,
        format!(
            "Step limit reached: you have used all {max_steps} steps. This call was not run. Write your report now, \
             as your final message, with no tool calls."
        ),
    )
}

/// The report of a turn that ends the task.
pub(super) fn report_of(turn: &crate::messages::AssistantTurn) -> String {
    if turn.text.trim().is_empty() {
        "The worker ended without writing a report.".to_owned()
    } else {
        turn.text.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_message_shows_the_opened_page_or_says_what_failed() {
        let url = "https://example.com/";
        assert_eq!(
            told(url, &StartPage::NotOpened),
            "Start at: https://example.com/"
        );
        let opened = told(
            url,
            &StartPage::Opened {
                elements: Some("- button \"Go\" [ref=e1]\n".into()),
            },
        );
        assert!(
            opened.ends_with("(snapshot -i):\n- button \"Go\" [ref=e1]"),
            "{opened}"
        );
        assert!(opened.contains("spent no step"), "{opened}");
        let blind = told(url, &StartPage::Opened { elements: None });
        assert!(blind.contains("take a snapshot"), "{blind}");
        let failed = told(url, &StartPage::Failed("Refused: not public".into()));
        assert!(failed.ends_with("said:\nRefused: not public"), "{failed}");
    }
}
