//! Answers that are neither a call nor a report, from models that do not call tools the API's
//! way (local models behind OpenAI-compatible servers, mostly): a call written as text that did
//! not read as one (a JSON object or fence naming a tool), agent-browser command lines written
//! for a shell (as its own guide writes them), the worker's own note copied back as if it were
//! the report (Qwen2.5-Coder-1.5B did, once its task stalled), or nothing at all. Ending the task on such an
//! answer would lose the task, so the worker is told what to do instead, a bounded number of
//! times in a row; past that the answer is taken as the report, so a model that never learns
//! still ends.

use crate::messages::{AssistantTurn, Content, Message};
use crate::ports::{ModelRequest, ToolDefinition};

/// How many answers in a row may be corrected before such an answer is taken as the report.
const MAX_IN_A_ROW: usize = 2;

/// What was wrong with an answer.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    /// A call written as text, but not exactly one well-formed call.
    BrokenCall,
    /// A command line for a shell: its words, as the call's `args` would hold them.
    CommandLine(Vec<String>),
    /// The worker's note after a turn, copied back instead of a report.
    EchoedNote,
    /// No text and no call.
    Empty,
}

/// If `turn` is such an answer and the run may still correct one (`in_a_row` so far, no last
/// turn forced), put it and the correction in the conversation and say so.
pub(super) fn corrected(
    request: &mut ModelRequest,
    turn: &AssistantTurn,
    in_a_row: &mut usize,
    last_turn: bool,
) -> bool {
    let miss = if turn.tool_calls.is_empty() && !last_turn && *in_a_row < MAX_IN_A_ROW {
        miss_of(&turn.text, &request.tools)
    } else {
        None
    };
    let Some(miss) = miss else {
        *in_a_row = 0;
        return false;
    };
    *in_a_row += 1;
    let told = told(&miss, &request.tools);
    request
        .messages
        .push(Message::Assistant { turn: turn.clone() });
    request.messages.push(Message::User {
        content: vec![Content::text(told)],
    });
    true
}

fn miss_of(text: &str, tools: &[ToolDefinition]) -> Option<Miss> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Some(Miss::Empty);
    }
    let call_like = trimmed.starts_with('{')
        || trimmed.starts_with("```")
        || trimmed.starts_with("<tool_call>");
    if call_like
        && tools
            .iter()
            .any(|tool| text.contains(&format!("\"{}\"", tool.name)))
    {
        return Some(Miss::BrokenCall);
    }
    if let Some(words) = first_command_line(text) {
        return Some(Miss::CommandLine(words));
    }
    text.contains(super::nudges::REMINDER_ENDING)
        .then_some(Miss::EchoedNote)
}

/// The words of the first `agent-browser …` line in `text` (a `$ ` prompt before it allowed),
/// split as a shell would; `None` when there is none or it does not split.
fn first_command_line(text: &str) -> Option<Vec<String>> {
    text.lines().find_map(|line| {
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        let rest = line.strip_prefix("agent-browser ")?;
        let words = shlex::split(rest)?;
        (!words.is_empty()).then_some(words)
    })
}

fn told(miss: &Miss, tools: &[ToolDefinition]) -> String {
    let name = tools
        .first()
        .map_or("agent_browser", |tool| tool.name.as_str());
    let report = "If the task is done, answer with your report as plain text.";
    match miss {
        Miss::BrokenCall => format!(
            "That answer looks like a tool call written as text, but it is not exactly one call, so nothing ran. To call a tool, answer with nothing but one JSON object, such as {}, with no text before or after it. {report}",
            call(name, &["snapshot", "-i"])
        ),
        Miss::CommandLine(words) => format!(
            "That answer wrote agent-browser command lines as text, so nothing ran: there is no shell. Call the `{name}` tool instead, one command per call; the first line you wrote is the call {}. {report}",
            call(name, words)
        ),
        Miss::EchoedNote => format!(
            "That answer copied the worker's note, so nothing ran and it is not a report. Call a tool (one call, such as {}), or, if the task is done, write in your own words what you did and what you found.",
            call(name, &["snapshot", "-i"])
        ),
        Miss::Empty => format!(
            "That answer was empty, so nothing ran. Call a tool (one call, such as {}), or, if the task is done, answer with your report as plain text.",
            call(name, &["snapshot", "-i"])
        ),
    }
}

/// A call as a model writes it in text: the name first, then the arguments.
fn call(name: &str, args: &[impl AsRef<str>]) -> String {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    format!(
        "{{\"name\": \"{name}\", \"arguments\": {{\"args\": {}}}}}",
        serde_json::to_string(&args).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools() -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "agent_browser".into(),
            description: String::new(),
            input_schema: json!({}),
        }]
    }

    #[test]
    fn command_lines_are_read_as_a_shell_would_split_them() {
        // As Qwen2.5-Coder-1.5B answered a real task (the 1.5B fixture in the models crate).
        let text = "Task: find the hours\n\n```bash\nagent-browser open http://127.0.0.1:8080/\n\
                    agent-browser snapshot -i\n```";
        assert_eq!(
            miss_of(text, &tools()),
            Some(Miss::CommandLine(vec![
                "open".into(),
                "http://127.0.0.1:8080/".into()
            ]))
        );
        let quoted = "$ agent-browser fill @e2 \"Dana Smith\"";
        assert_eq!(
            miss_of(quoted, &tools()),
            Some(Miss::CommandLine(vec![
                "fill".into(),
                "@e2".into(),
                "Dana Smith".into()
            ]))
        );
        // An open quote does not split: that is a report, not a command.
        assert_eq!(miss_of("agent-browser fill \"x", &tools()), None);
        assert_eq!(miss_of("The shop opens at 9.", &tools()), None);
        assert_eq!(miss_of(" \n", &tools()), Some(Miss::Empty));
    }

    #[test]
    fn the_reminder_copied_back_is_no_report() {
        // As Qwen2.5-Coder-1.5B answered on MiniWoB++'s enter-text, fourth turn.
        let done = super::super::nudges::DoneSoFar::default();
        let echoed =
            super::super::nudges::reminder("Enter \"Cheree\" and press Submit.", &done, 5, 8, None);
        assert_eq!(miss_of(&echoed, &tools()), Some(Miss::EchoedNote));
        assert_eq!(
            miss_of("I entered Cheree and pressed Submit.", &tools()),
            None
        );
    }

    #[test]
    fn each_correction_says_nothing_ran_and_how_to_call() {
        for miss in [
            Miss::BrokenCall,
            Miss::CommandLine(vec!["open".into(), "https://example.com".into()]),
            Miss::EchoedNote,
            Miss::Empty,
        ] {
            let told = told(&miss, &tools());
            assert!(told.contains("nothing ran"), "{told}");
            assert!(told.contains("{\"name\": \"agent_browser\""), "{told}");
            assert!(told.contains("report"), "{told}");
        }
        let told = told(
            &Miss::CommandLine(vec!["open".into(), "https://example.com".into()]),
            &tools(),
        );
        assert!(
            told.contains("[\"open\",\"https://example.com\"]"),
            "{told}"
        );
    }
}
