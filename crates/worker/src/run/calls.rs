//! One turn's tool calls: each run within the step limit (or answered as not run past it), and
//! the notes that follow their results.

use std::sync::Arc;
use std::time::Instant;

use super::words::{cancelled_report, step_limit_result, timed_out_report};
use super::{Bounded, Run, millis, nudges};
use crate::kept_output::cut;
use crate::messages::{AssistantTurn, Content, Message, ToolCall};
use crate::ports::{Tool, ToolDefinition, ToolFailure, ToolOutput};
use crate::task::Ended;

impl Run<'_> {
    /// Run `turn`'s calls in order: the messages that follow the turn (its results, and with
    /// `remind_of` a reminder of that task); `Err` with how the task ended and its report when
    /// its time ran out or it was cancelled mid-call. A call past the step limit sets
    /// `final_turn`.
    pub(super) async fn run_calls(
        &mut self,
        tools: &[Arc<dyn Tool>],
        definitions: &[ToolDefinition],
        remind_of: Option<&str>,
        turn: &AssistantTurn,
        final_turn: &mut Option<Ended>,
        kept: &mut nudges::Kept,
    ) -> Result<Vec<Message>, (Ended, String)> {
        let limits = self.runner.limits;
        let mut results = Vec::with_capacity(turn.tool_calls.len());
        for call in &turn.tool_calls {
            if self.steps >= limits.max_steps {
                *final_turn = Some(Ended::StepLimit);
                let result = step_limit_result(call, limits.max_steps);
                self.record_not_run(call, &result, "the step limit was spent");
                results.push(result);
                continue;
            }
            self.steps += 1;
            self.context.set_step(self.worker_steps + self.steps);
            self.report_progress(call);
            let began = Instant::now();
            let outcome = self.call_tool(tools, definitions, call).await;
            self.timings.tools_ms += millis(began.elapsed());
            match outcome {
                Bounded::Done(mut result) => {
                    kept.done.ran(call, result.is_error);
                    if let Some(note) = kept.repeats.note(call) {
                        nudges::add(&mut result, note);
                    }
                    results.push(result);
                }
                Bounded::TimedOut => {
                    return Err((Ended::TimedOut, timed_out_report(&limits, &self.last_text)));
                }
                Bounded::Cancelled => {
                    return Err((Ended::Cancelled, cancelled_report(&self.last_text)));
                }
            }
        }
        if final_turn.is_some() {
            return Ok(vec![Message::ToolResults { results }]);
        }
        if self.steps == limits.max_steps {
            let note = nudges::last_step(limits.max_steps);
            self.context_use.record(&[Content::text(note.clone())]);
            if let Some(last) = results.last_mut() {
                nudges::add(last, note);
            }
            return Ok(vec![Message::ToolResults { results }]);
        }
        let mut messages = vec![Message::ToolResults { results }];
        if let Some(task) = remind_of {
            // A message of its own after the results: inside the last result, Qwen2.5-Coder-1.5B
            // answered by copying it back, as if it were writing the tool's output.
            let page = self.page_now(tools, turn).await?;
            let note = nudges::reminder(
                task,
                &kept.done,
                self.steps,
                limits.max_steps,
                page.as_deref(),
            );
            let content = vec![Content::text(note)];
            self.context_use.record(&content);
            messages.push(Message::User { content });
        }
        Ok(messages)
    }

    /// The page's elements after a turn that did not end with a snapshot, for a model that needs
    /// to be shown the page (it answered nothing, or invented refs, when it had to ask), scrubbed
    /// and cut like any output; `None` when nothing drives a browser or the look failed.
    async fn page_now(
        &mut self,
        tools: &[Arc<dyn Tool>],
        turn: &AssistantTurn,
    ) -> Result<Option<String>, (Ended, String)> {
        let looked_already = turn
            .tool_calls
            .last()
            .and_then(ToolCall::words)
            .is_some_and(|words| {
                words.first().and_then(serde_json::Value::as_str) == Some("snapshot")
            });
        if looked_already {
            return Ok(None);
        }
        let limits = self.runner.limits;
        match self.bounded(super::human::look(tools)).await {
            Bounded::Done(looked) => Ok(self.elements_seen(looked.map(|(looked, _)| looked))),
            Bounded::TimedOut => Err((Ended::TimedOut, timed_out_report(&limits, &self.last_text))),
            Bounded::Cancelled => Err((Ended::Cancelled, cancelled_report(&self.last_text))),
        }
    }

    /// What a look at the page showed, scrubbed and cut like any output; `None` when nothing
    /// looked or the look failed.
    pub(super) fn elements_seen(
        &self,
        looked: Option<Result<ToolOutput, ToolFailure>>,
    ) -> Option<String> {
        match looked {
            Some(Ok(output)) if !output.is_error() => {
                let text = self.context.secrets.scrub(&output.text).into_owned();
                Some(cut(&text, self.runner.limits.max_output_chars))
            }
            _ => None,
        }
    }
}
