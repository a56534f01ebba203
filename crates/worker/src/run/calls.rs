//! One turn's tool calls: each run within the step limit (or answered as not run past it), and
//! the notes that follow their results.

use std::sync::Arc;
use std::time::Instant;

use super::words::{cancelled_report, step_limit_result, timed_out_report};
use super::{Bounded, Run, millis, nudges};
use crate::messages::{AssistantTurn, ToolResult};
use crate::ports::{Tool, ToolDefinition};
use crate::task::Ended;

impl Run<'_> {
    /// Run `turn`'s calls in order (with `remind_of`, a task to repeat after the last result); `Err` with how the task ended and its report when its time
    /// ran out or it was cancelled mid-call. A call past the step limit sets `final_turn`.
    pub(super) async fn run_calls(
        &mut self,
        tools: &[Arc<dyn Tool>],
        definitions: &[ToolDefinition],
        remind_of: Option<&str>,
        turn: &AssistantTurn,
        final_turn: &mut Option<Ended>,
        repeats: &mut nudges::Repeats,
    ) -> Result<Vec<ToolResult>, (Ended, String)> {
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
            self.context.set_step(self.steps);
            self.report_progress(call);
            let began = Instant::now();
            let outcome = self.call_tool(tools, definitions, call).await;
            self.timings.tools_ms += millis(began.elapsed());
            match outcome {
                Bounded::Done(mut result) => {
                    if let Some(note) = repeats.note(call) {
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
        let note = if self.steps == limits.max_steps {
            Some(nudges::last_step(limits.max_steps))
        } else {
            remind_of.map(|task| nudges::reminder(task, self.steps, limits.max_steps))
        };
        if let (None, Some(note), Some(last)) = (&final_turn, note, results.last_mut()) {
            nudges::add(last, note);
        }
        Ok(results)
    }
}
