//! The run's side of a call for a person's help: wait at the task's help desk with the task's
//! own time standing still (bounded by the human timeout), then show the worker the page as the
//! person left it.

use std::sync::Arc;
use std::time::Instant;

use super::{Bounded, Run, millis};
use crate::help::{AskHumanInput, HelpCall, HelpOutcome, MAX_HELP_REASON_CHARS, RecordedHelp};
use crate::messages::{Content, ToolCall, ToolResult, text_of};
use crate::ports::{Tool, ToolFailure, ToolOutput, ToolStatus};
use crate::record::verdict_of_status;
use crate::shown_output::shown;

impl Run<'_> {
    /// Run one `ask_human` call.
    pub(super) async fn ask_human(
        &mut self,
        tools: &[Arc<dyn Tool>],
        call: &ToolCall,
    ) -> Bounded<ToolResult> {
        let began = Instant::now();
        let Some(reason) = self.reason_of(call) else {
            let text = format!(
                "Pass {{\"reason\": \"…\"}}: one short sentence (at most {MAX_HELP_REASON_CHARS} characters) saying what the person should do."
            );
            return Bounded::Done(self.help_failed(began, call, None, text));
        };
        let timeout = self.human_left;
        if timeout.is_zero() {
            let text = format!(
                "No time is left for a person in this task (its {} seconds for help are spent). Carry on without it, or end the task with a report saying what a person must do.",
                self.runner.limits.human_timeout.as_secs()
            );
            return Bounded::Done(self.help_failed(began, call, None, text));
        }
        let asked = HelpCall {
            reason: reason.clone(),
            step: self.steps,
            timeout_secs: timeout.as_secs(),
        };
        // Tokio's clock, the one the task's deadline is on.
        let waiting = tokio::time::Instant::now();
        // `Err`: cancelled while it waited.
        let answered = tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(()),
            () = tokio::time::sleep(timeout) => Ok(None),
            actions = self.help.ask(asked) => Ok(Some(actions)),
        };
        let waited = waiting.elapsed().min(timeout);
        let Ok(answered) = answered else {
            // The record keeps the call, and what the person did before the task ended.
            let help = RecordedHelp {
                reason,
                waited_ms: millis(waited),
                outcome: HelpOutcome::Cancelled,
                actions: self.help.last_actions(),
            };
            let content = vec![Content::text(
                "The task was cancelled while it waited for a person.",
            )];
            self.help_result(began, call, Some(help), content, &ToolStatus::Failed);
            return Bounded::Cancelled;
        };
        // The task's own time stood still while it waited; the person's time is spent.
        self.deadline += waited;
        self.human_left = timeout.saturating_sub(waited);
        let help = RecordedHelp {
            reason,
            waited_ms: millis(waited),
            outcome: HelpOutcome::NobodyCame,
            // Someone may have acted without handing back.
            actions: answered.unwrap_or_else(|| self.help.last_actions()),
        };
        let Some(actions) = answered else {
            let text = format!(
                "Nobody came to help within {} seconds. Carry on without it if you can; otherwise end the task with a report saying what a person must do.",
                timeout.as_secs()
            );
            return Bounded::Done(self.help_failed(began, call, Some(help), text));
        };
        let help = RecordedHelp {
            outcome: HelpOutcome::HandedBack,
            actions,
            ..help
        };
        self.after_hand_back(tools, began, call, help).await
    }

    /// The call's reason, if it has a fitting one (secrets stay placeholders).
    fn reason_of(&self, call: &ToolCall) -> Option<String> {
        let input = serde_json::from_value::<AskHumanInput>(call.input.clone()).ok()?;
        let reason = input.reason.trim();
        let fits = !reason.is_empty() && reason.chars().count() <= MAX_HELP_REASON_CHARS;
        fits.then(|| self.context.secrets.scrub(reason).into_owned())
    }

    /// After a person handed back: the worker's fresh look at the page, with what they did.
    async fn after_hand_back(
        &mut self,
        tools: &[Arc<dyn Tool>],
        began: Instant,
        call: &ToolCall,
        help: RecordedHelp,
    ) -> Bounded<ToolResult> {
        let note = format!(
            "A person acted in the browser ({}) and handed back. The page as they left it:\n\n",
            help.actions.words()
        );
        let looked = match self.bounded(look(tools)).await {
            Bounded::Done(looked) => looked,
            // What the person did is recorded however the task ends.
            ended @ (Bounded::TimedOut | Bounded::Cancelled) => {
                let text = format!("{note}(the task ended before the page was read)");
                self.help_result(
                    began,
                    call,
                    Some(help),
                    vec![Content::text(text)],
                    &ToolStatus::Ran,
                );
                return match ended {
                    Bounded::TimedOut => Bounded::TimedOut,
                    _ => Bounded::Cancelled,
                };
            }
        };
        let (output, browser) = match looked {
            Some((Ok(mut output), tool)) => {
                output.text.insert_str(0, &note);
                (output, Some(tool))
            }
            Some((Err(failure), tool)) => {
                tracing::warn!(error = %failure, "the page could not be read after a person acted");
                let text = format!("{note}(the page could not be read; take a snapshot)");
                (ToolOutput::text(text), Some(tool))
            }
            None => (
                ToolOutput::text(format!("{note}(take a snapshot to see it)")),
                None,
            ),
        };
        let limits = self.runner.limits;
        let secrets = self.context.secrets.clone();
        let (content, status) = shown(&call.name, Ok(output), &limits, &mut self.kept, &secrets);
        let result = self.help_result(began, call, Some(help), content, &status);
        if let (Some(_), Some(tool)) = (&self.recorder, browser) {
            match self.record_page(tool.as_ref(), None).await {
                Bounded::Done(()) => {}
                Bounded::TimedOut => return Bounded::TimedOut,
                Bounded::Cancelled => return Bounded::Cancelled,
            }
        }
        Bounded::Done(result)
    }

    /// A call that did not get a person's help, with why.
    fn help_failed(
        &mut self,
        began: Instant,
        call: &ToolCall,
        help: Option<RecordedHelp>,
        text: String,
    ) -> ToolResult {
        let content = vec![Content::text(text)];
        self.help_result(began, call, help, content, &ToolStatus::Failed)
    }

    /// The call's result, counted and recorded.
    fn help_result(
        &mut self,
        began: Instant,
        call: &ToolCall,
        help: Option<RecordedHelp>,
        content: Vec<Content>,
        status: &ToolStatus,
    ) -> ToolResult {
        self.context_use.record(&content);
        if let Some(recorder) = &mut self.recorder {
            let verdict = verdict_of_status(status, &text_of(&content));
            recorder.step(began, call, verdict, &content).help = help;
        }
        ToolResult {
            call_id: call.id.clone(),
            content,
            is_error: *status != ToolStatus::Ran,
        }
    }
}

/// A fresh look at the page from the first tool that drives a browser, with that tool.
pub(super) async fn look(
    tools: &[Arc<dyn Tool>],
) -> Option<(Result<ToolOutput, ToolFailure>, Arc<dyn Tool>)> {
    for tool in tools {
        if let Some(looked) = tool.look().await {
            return Some((looked, Arc::clone(tool)));
        }
    }
    None
}
