//! Answers that look like a tool call written as text but did not read as one (a local model
//! that writes calls as text, imperfectly: a JSON object or a fence naming one of the tools).
//! Such an answer is no report, and ending the task on it would lose the task: the worker is
//! told how to write a call, a bounded number of times in a row.

use crate::messages::{AssistantTurn, Content, Message};
use crate::ports::{ModelRequest, ToolDefinition};

/// How many answers in a row may be corrected before such an answer is taken as the report.
const MAX_IN_A_ROW: usize = 2;

/// If `turn` is such an answer and the run may still correct one (`in_a_row` so far, no last
/// turn forced), put it and the correction in the conversation and say so.
pub(super) fn corrected(
    request: &mut ModelRequest,
    turn: &AssistantTurn,
    in_a_row: &mut usize,
    last_turn: bool,
) -> bool {
    let correcting = turn.tool_calls.is_empty()
        && !last_turn
        && *in_a_row < MAX_IN_A_ROW
        && looks_like_a_call(&turn.text, &request.tools);
    *in_a_row = if correcting { *in_a_row + 1 } else { 0 };
    if correcting {
        let told = not_a_call(&request.tools);
        request
            .messages
            .push(Message::Assistant { turn: turn.clone() });
        request.messages.push(Message::User {
            content: vec![Content::text(told)],
        });
    }
    correcting
}

fn looks_like_a_call(text: &str, tools: &[ToolDefinition]) -> bool {
    let text = text.trim_start();
    (text.starts_with('{') || text.starts_with("```") || text.starts_with("<tool_call>"))
        && tools
            .iter()
            .any(|tool| text.contains(&format!("\"{}\"", tool.name)))
}

fn not_a_call(tools: &[ToolDefinition]) -> String {
    let name = tools
        .first()
        .map_or("agent_browser", |tool| tool.name.as_str());
    format!(
        "That answer looks like a tool call written as text, but it is not exactly one call, so nothing ran. To call a tool, answer with nothing but one JSON object, such as {{\"name\": \"{name}\", \"arguments\": {{\"args\": [\"snapshot\", \"-i\"]}}}}, with no text before or after it. If the task is done, answer with your report as plain text."
    )
}
