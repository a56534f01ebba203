//! One turn's tool calls: each run within the step limit (or answered as not run past it), and
//! the notes that follow their results.

use std::sync::Arc;
use std::time::Instant;

use super::words::{cancelled_report, error_result, step_limit_result, timed_out_report};
use super::{Bounded, Run, millis, nudges};
use crate::fit_image;
use crate::help::ASK_HUMAN;
use crate::kept_output::{self, READ_OUTPUT, cut};
use crate::messages::{AssistantTurn, Content, Message, ToolCall, ToolResult, text_of};
use crate::ports::{Tool, ToolDefinition, ToolFailure, ToolOutput, ToolStatus};
use crate::record::{verdict_of, verdict_of_status};
use crate::shown_output::shown;
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

impl Run<'_> {
    /// Run one call. `definitions` are the tools' definitions in the same order, made once per
    /// task (a definition carries a generated JSON schema, too costly to rebuild per call).
    pub(super) async fn call_tool(
        &mut self,
        tools: &[Arc<dyn Tool>],
        definitions: &[ToolDefinition],
        call: &ToolCall,
    ) -> Bounded<ToolResult> {
        let began = Instant::now();
        if call.name == ASK_HUMAN && self.help.is_staffed() {
            return self.ask_human(tools, call).await;
        }
        if call.name == READ_OUTPUT && kept_output::offered(&self.runner.limits) {
            let (content, status) = match self
                .kept
                .read(call.input.clone(), self.runner.limits.max_output_chars)
            {
                Ok(text) => (vec![Content::text(text)], ToolStatus::Ran),
                Err(error) => (vec![Content::text(error.to_string())], ToolStatus::Failed),
            };
            self.context_use.record(&content);
            if let Some(recorder) = &mut self.recorder {
                let verdict = verdict_of_status(&status, &text_of(&content));
                recorder.step(began, call, verdict, &content);
            }
            return Bounded::Done(ToolResult {
                call_id: call.id.clone(),
                content,
                is_error: status != ToolStatus::Ran,
            });
        }
        let found = definitions
            .iter()
            .position(|definition| definition.name == call.name);
        let Some(tool) = found.and_then(|index| tools.get(index)) else {
            let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
            let result = error_result(
                call,
                format!(
                    "There is no tool named `{}`. The tools are: {}.",
                    call.name,
                    names.join(", ")
                ),
            );
            self.record_not_run(call, &result, "there is no such tool");
            return Bounded::Done(result);
        };
        let side = self.runner.limits.max_image_side;
        let output = match self
            .bounded(async {
                fit_image::fit_outcome(tool.execute(call.input.clone()).await, side).await
            })
            .await
        {
            Bounded::Done(output) => output,
            Bounded::TimedOut => return Bounded::TimedOut,
            Bounded::Cancelled => return Bounded::Cancelled,
        };
        let seen = self.recorder.is_some().then(|| {
            let screenshot = output
                .as_ref()
                .ok()
                .and_then(|output| output.images.first().cloned());
            (verdict_of(&output), screenshot)
        });
        let (content, status) = shown(
            &call.name,
            output,
            &self.runner.limits,
            &mut self.kept,
            &self.context.secrets,
        );
        self.context_use.record(&content);
        if let (Some(recorder), Some((verdict, screenshot))) = (&mut self.recorder, seen) {
            recorder.step(began, call, verdict, &content);
            match self.record_page(tool.as_ref(), screenshot).await {
                Bounded::Done(()) => {}
                Bounded::TimedOut => return Bounded::TimedOut,
                Bounded::Cancelled => return Bounded::Cancelled,
            }
        }
        Bounded::Done(ToolResult {
            call_id: call.id.clone(),
            content,
            is_error: status != ToolStatus::Ran,
        })
    }
}
