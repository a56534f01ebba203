//! Keeping a task within `max_task_tokens` before each request rather than after it: a turn is
//! sent only when its estimated input and room for an answer fit in what is left, and its answer
//! is capped at that room. A turn that would not fit becomes the report turn, with the oldest tool
//! outputs left out until it fits; when not even that fits, nothing is sent.

use crate::messages::{Content, Message};
use crate::ports::ModelRequest;
use crate::task::Ended;
use crate::token_estimate::input_tokens;

/// The least answer worth a turn with tools: a thought and a call or two.
pub(crate) const MIN_TURN_OUTPUT: u64 = 1_024;
/// The least answer worth a report.
pub(crate) const MIN_REPORT_OUTPUT: u64 = 512;
/// What stands in for a tool output left out of a report turn.
pub(crate) const LEFT_OUT: &str = "[Left out to keep the task within its token budget.]";

/// Whether a request fits in what is left of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// Send it, with an answer of at most this many tokens.
    Send(u32),
    /// It does not fit: it needs this many tokens (estimated input and the least answer).
    Short { needs: u64 },
}

fn room(input: u64, least_output: u64, remaining: u64) -> Room {
    match remaining.checked_sub(input) {
        Some(left) if left >= least_output => Room::Send(u32::try_from(left).unwrap_or(u32::MAX)),
        _ => Room::Short {
            needs: input.saturating_add(least_output),
        },
    }
}

/// Make `request` fit what is left of `budget` after `used` tokens: `Ok` with the most its answer
/// may spend, or `Err` with the report that ends the task because not even a report turn fits.
/// A turn with tools that does not fit turns into the report turn (`final_turn` is set and the
/// worker is asked for its report); a report turn sheds tool outputs, oldest first.
pub(crate) fn fit_request(
    request: &mut ModelRequest,
    final_turn: &mut Option<Ended>,
    used: u64,
    budget: u64,
    last_text: &str,
) -> Result<u32, String> {
    let remaining = budget.saturating_sub(used);
    if final_turn.is_none() {
        if let Room::Send(cap) = room(input_tokens(request), MIN_TURN_OUTPUT, remaining) {
            return Ok(cap);
        }
        *final_turn = Some(Ended::TokenBudget);
        request.messages.push(Message::User {
            content: vec![Content::text(format!(
                "Token budget nearly spent: this task has used {used} of its {budget} tokens (max_task_tokens), and \
                 another turn with tools would not fit. Write your report now, as your final message, with no tool calls."
            ))],
        });
    }
    match shed_outputs_until_it_fits(request, remaining) {
        Room::Send(cap) => Ok(cap),
        Room::Short { needs } => Err(unsent_report(used, budget, Some(needs), last_text)),
    }
}

/// Leave tool outputs out of `request`, oldest first, until a report fits in `remaining`. The
/// calls, the worker's own words and the request for the report stay.
fn shed_outputs_until_it_fits(request: &mut ModelRequest, remaining: u64) -> Room {
    let mut next = (0, 0);
    loop {
        let fit = room(input_tokens(request), MIN_REPORT_OUTPUT, remaining);
        if matches!(fit, Room::Send(_)) {
            return fit;
        }
        let Some((message, result)) = next_output(request, next) else {
            return fit;
        };
        if let Some(Message::ToolResults { results }) = request.messages.get_mut(message)
            && let Some(output) = results.get_mut(result)
        {
            output.content = vec![Content::text(LEFT_OUT)];
        }
        next = (message, result + 1);
    }
}

/// The first tool output at or after `(message, result)`.
fn next_output(
    request: &ModelRequest,
    (message, result): (usize, usize),
) -> Option<(usize, usize)> {
    request
        .messages
        .iter()
        .enumerate()
        .skip(message)
        .find_map(|(index, shown)| match shown {
            Message::ToolResults { results } => {
                let first = if index == message { result } else { 0 };
                (first < results.len()).then_some((index, first))
            }
            _ => None,
        })
}

/// The report of a task whose budget could not pay for a report turn that `needs` tokens (or any
/// turn at all, when `None`: the budget is spent).
pub(crate) fn unsent_report(used: u64, budget: u64, needs: Option<u64>, last_text: &str) -> String {
    let needs = needs.map_or_else(String::new, |needs| {
        format!(", and a report turn needs about {needs} more")
    });
    let mut report = format!(
        "The token budget ran out before the worker could write its report: {used} of {budget} tokens \
         (max_task_tokens) are spent{needs}. Raise max_task_tokens for a task like this."
    );
    if !last_text.trim().is_empty() {
        report.push_str("\n\nThe worker's last words:\n");
        report.push_str(last_text.trim());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{AssistantTurn, ToolCall, ToolResult};

    fn output(id: &str, text: &str) -> Message {
        Message::ToolResults {
            results: vec![ToolResult {
                call_id: id.into(),
                content: vec![Content::text(text)],
                is_error: false,
            }],
        }
    }

    fn called(id: &str) -> Message {
        Message::Assistant {
            turn: AssistantTurn {
                tool_calls: vec![ToolCall {
                    id: id.into(),
                    name: "echo".into(),
                    input: serde_json::json!({}),
                }],
                ..AssistantTurn::default()
            },
        }
    }

    fn conversation() -> ModelRequest {
        ModelRequest {
            system: "s".into(),
            messages: vec![
                Message::User {
                    content: vec![Content::text("task")],
                },
                called("1"),
                output("1", &"a".repeat(3_000)),
                called("2"),
                output("2", &"b".repeat(3_000)),
            ],
            tools: Vec::new(),
            max_output_tokens: None,
        }
    }

    fn shown(request: &ModelRequest) -> String {
        format!("{:?}", request.messages)
    }

    #[test]
    fn a_turn_that_fits_is_capped_at_what_is_left() {
        let mut request = conversation();
        let input = input_tokens(&request);
        let mut final_turn = None;
        let cap = fit_request(
            &mut request,
            &mut final_turn,
            1_000,
            1_000 + input + 5_000,
            "",
        );
        assert_eq!(cap, Ok(5_000));
        assert_eq!(final_turn, None);
        assert_eq!(request, conversation(), "nothing is changed");
    }

    #[test]
    fn a_turn_that_does_not_fit_becomes_the_report_shedding_the_oldest_output_first() {
        let mut request = conversation();
        let whole = input_tokens(&request);
        let mut final_turn = None;
        // Room for the report without the first output (1,000 tokens), but not with it and the
        // request for the report.
        let budget = whole + MIN_REPORT_OUTPUT;
        let cap = fit_request(&mut request, &mut final_turn, 0, budget, "").unwrap();
        assert_eq!(final_turn, Some(Ended::TokenBudget));
        let text = shown(&request);
        assert!(text.contains("Write your report now"), "{text}");
        assert!(
            !text.contains("aaa"),
            "the oldest output is left out: {text}"
        );
        assert!(text.contains("bbb"), "the latest output stays: {text}");
        assert!(text.contains(LEFT_OUT));
        assert_eq!(u64::from(cap), budget - input_tokens(&request));
        assert!(u64::from(cap) >= MIN_REPORT_OUTPUT);
    }

    #[test]
    fn a_report_turn_that_cannot_fit_is_not_sent_and_the_workers_last_words_are_kept() {
        let mut request = conversation();
        let mut final_turn = Some(Ended::StepLimit);
        let report =
            fit_request(&mut request, &mut final_turn, 9_000, 9_100, "Found: 42.").unwrap_err();
        assert!(report.contains("9000 of 9100 tokens"), "{report}");
        assert!(report.contains("Raise max_task_tokens"), "{report}");
        assert!(
            report.ends_with("The worker's last words:\nFound: 42."),
            "{report}"
        );
        assert_eq!(
            shown(&request).matches(LEFT_OUT).count(),
            2,
            "every output was shed before giving up"
        );
    }

    #[test]
    fn a_first_request_larger_than_the_budget_sends_nothing_and_says_so() {
        let mut request = conversation();
        request.messages.truncate(1);
        let mut final_turn = None;
        let report = fit_request(&mut request, &mut final_turn, 0, 10, "").unwrap_err();
        assert!(report.contains("0 of 10 tokens"), "{report}");
        assert!(!report.contains("last words"), "{report}");
        assert_eq!(final_turn, Some(Ended::TokenBudget));
    }
}
