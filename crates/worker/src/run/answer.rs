//! A task with an output schema ends only on an answer that matches it: each turn is judged
//! here before its calls run. A `give_answer` call is checked against the schema; a match ends
//! the task with its data, a miss is sent back with every mismatch and where it is. A report
//! written as text instead is sent back too. Both count against [`MAX_ANSWER_TRIES`]; past it
//! the task ends with no data rather than with data the schema never saw.

use std::time::Instant;

use serde_json::Value;

use super::Run;
use crate::answer::{self, GIVE_ANSWER, MAX_ANSWER_TRIES, Mismatch, OutputSchema};
use crate::messages::{AssistantTurn, Content, Message, ToolCall, ToolResult};
use crate::ports::{ModelRequest, ToolStatus};
use crate::record::verdict_of_status;
use crate::task::Ended;

/// What a turn was, for a task with an output schema.
pub(super) enum Judged {
    /// No answer and no report: its calls run as usual.
    NotAnAnswer,
    /// A miss sent back to the worker: ask the model again.
    Again,
    /// The task ends so, with this report: on a matching answer (its data is kept on the run),
    /// or with no data when the last try missed.
    Ends(Ended, String),
}

impl Run<'_> {
    /// Judge `turn`. On a miss the turn and what the worker is told go into `request`.
    /// `final_turn`: how the task ends after this turn, when a limit was spent (then a miss ends
    /// it).
    pub(super) fn judge_answer(
        &mut self,
        schema: &OutputSchema,
        turn: &AssistantTurn,
        request: &mut ModelRequest,
        final_turn: Option<Ended>,
    ) -> Judged {
        let last = final_turn.is_some();
        let Some(call) = turn.tool_calls.iter().find(|call| call.name == GIVE_ANSWER) else {
            if !turn.tool_calls.is_empty() || last {
                return Judged::NotAnAnswer;
            }
            return self.report_instead(turn, request);
        };
        let began = Instant::now();
        let data = call.input.get("data");
        let checked = match data {
            Some(data) => schema.check(data),
            None => Err(vec![Mismatch {
                at: String::new(),
                what: "`data` is missing: put the answer in `data`".to_owned(),
            }]),
        };
        match checked {
            Ok(()) => {
                let data = data.cloned().unwrap_or(Value::Null);
                let words = format!(
                    "The answer matches the schema ({} bytes).",
                    data.to_string().len()
                );
                self.record_answer(began, call, &ToolStatus::Ran, &words);
                self.data = Some(data);
                Judged::Ends(
                    final_turn.unwrap_or(Ended::Completed),
                    answer_report(call, turn),
                )
            }
            Err(mismatches) => {
                self.answer_tries += 1;
                let left = MAX_ANSWER_TRIES.saturating_sub(self.answer_tries);
                let told = answer::told(&mismatches, left);
                self.record_answer(began, call, &ToolStatus::Failed, &told);
                if left == 0 || last {
                    let report = gave_up(self.answer_tries, &mismatches);
                    return Judged::Ends(Ended::NoValidAnswer, report);
                }
                let results = turn
                    .tool_calls
                    .iter()
                    .map(|other| {
                        let text = if other.id == call.id {
                            told.clone()
                        } else {
                            format!("Not run: {GIVE_ANSWER} was called in the same turn. Call it alone, when the task is done.")
                        };
                        ToolResult {
                            call_id: other.id.clone(),
                            content: vec![Content::text(text)],
                            is_error: true,
                        }
                    })
                    .collect::<Vec<_>>();
                for result in &results {
                    self.context_use.record(&result.content);
                }
                request
                    .messages
                    .push(Message::Assistant { turn: turn.clone() });
                request.messages.push(Message::ToolResults { results });
                Judged::Again
            }
        }
    }

    /// A report written as text where an answer was asked for.
    fn report_instead(&mut self, turn: &AssistantTurn, request: &mut ModelRequest) -> Judged {
        self.answer_tries += 1;
        let left = MAX_ANSWER_TRIES.saturating_sub(self.answer_tries);
        if left == 0 {
            return Judged::Ends(
                Ended::NoValidAnswer,
                format!(
                    "The worker wrote a report instead of calling {GIVE_ANSWER} {} times, so there is no answer matching the schema. Its last words:\n{}",
                    self.answer_tries,
                    turn.text.trim()
                ),
            );
        }
        let content = vec![Content::text(format!(
            "This task's answer is data for a program, so a report alone does not end it. Call \
             {GIVE_ANSWER} with `data` matching the schema and your report as `report` ({left} \
             more {} allowed).",
            if left == 1 { "try" } else { "tries" }
        ))];
        self.context_use.record(&content);
        request
            .messages
            .push(Message::Assistant { turn: turn.clone() });
        request.messages.push(Message::User { content });
        Judged::Again
    }

    fn record_answer(&mut self, began: Instant, call: &ToolCall, status: &ToolStatus, words: &str) {
        if let Some(recorder) = &mut self.recorder {
            let content = vec![Content::text(words.to_owned())];
            recorder.step(began, call, verdict_of_status(status, words), &content);
        }
    }
}

/// The report of a matching answer: its `report`, else the turn's words, else a pointer to the
/// data.
fn answer_report(call: &ToolCall, turn: &AssistantTurn) -> String {
    let given = call
        .input
        .get("report")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|report| !report.is_empty());
    match given {
        Some(report) => report.to_owned(),
        None if !turn.text.trim().is_empty() => turn.text.trim().to_owned(),
        None => "The answer is in `data`.".to_owned(),
    }
}

fn gave_up(tries: usize, mismatches: &[Mismatch]) -> String {
    format!(
        "No answer matching the schema after {tries} {}; the last one missed:\n{}",
        if tries == 1 { "try" } else { "tries" },
        answer::listed(mismatches)
    )
}
