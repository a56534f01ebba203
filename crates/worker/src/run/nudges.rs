//! Notes the run adds after a tool's own result, for a model that loses its way: for a model that
//! writes its calls as text (a small local one), where the task stands after each turn
//! (Qwen2.5-Coder-1.5B, shown a snapshot with its button, answered with nothing; reminded of its
//! task under the same snapshot, it clicked; a model that calls tools the API's way is not
//! charged for the reminder), the same call again and
//! again (a small model's loop), and the last step spent (so the next answer is the report, not
//! a call that would be refused).

use serde_json::Value;

use crate::messages::{Content, ToolCall, ToolResult};

/// From this many identical calls in a row, each result says so.
const REPEATS_NOTED: usize = 3;

/// The calls of a task, as far as repeats go.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    last: Option<(String, Value)>,
    in_a_row: usize,
}

impl Repeats {
    /// Count `call`; the note its result gets when it repeats the call before it often enough.
    pub(super) fn note(&mut self, call: &ToolCall) -> Option<String> {
        let same = self
            .last
            .as_ref()
            .is_some_and(|(name, input)| *name == call.name && *input == call.input);
        self.in_a_row = if same { self.in_a_row + 1 } else { 1 };
        if !same {
            self.last = Some((call.name.clone(), call.input.clone()));
        }
        (self.in_a_row >= REPEATS_NOTED).then(|| {
            format!(
                "Note: this is the same call {} times in a row. Sending it again will not change \
                 the page: take a new snapshot and try another command, or write your report.",
                self.in_a_row
            )
        })
    }
}

/// The longest part of the task a reminder repeats: a long task is cut, not sent every turn.
const REMINDED_TASK_CHARS: usize = 300;

/// The note after a turn's calls while steps are left: how many are used, and the task again.
pub(super) fn reminder(task: &str, steps: usize, max_steps: usize, page: Option<&str>) -> String {
    let page = page.map_or_else(String::new, |page| {
        format!("The page now (snapshot -i):\n{}\n\n", page.trim())
    });
    format!(
        "{page}Step {steps} of {max_steps} used. Your task: {} Call another tool now, or write \
         your report if the task is done.",
        crate::kept_output::cut(task.trim(), REMINDED_TASK_CHARS)
    )
}

/// The note after the call that spent the last step.
pub(super) fn last_step(max_steps: usize) -> String {
    format!(
        "Note: that was step {max_steps} of {max_steps}, your last. Write your report now, as \
         your final message, with no tool call."
    )
}

/// Add `note` to a result, after what the tool said.
pub(super) fn add(result: &mut ToolResult, note: String) {
    result.content.push(Content::text(note));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(args: &Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "agent_browser".into(),
            input: json!({ "args": args.clone() }),
        }
    }

    #[test]
    fn a_reminder_says_the_steps_and_the_task_cut_when_long() {
        let told = reminder("Click on the \"No\" button.", 2, 8, None);
        assert!(told.starts_with("Step 2 of 8 used. Your task: Click on the \"No\" button."));
        let with_page = reminder("Click it.", 1, 8, Some("- button \"No\" [ref=e4]"));
        assert!(
            with_page.starts_with("The page now (snapshot -i):\n- button"),
            "{with_page}"
        );
        let long = reminder(&"word ".repeat(200), 1, 8, None);
        assert!(long.len() < 500, "{long}");
    }

    #[test]
    fn the_third_identical_call_in_a_row_is_noted_and_another_call_resets_the_count() {
        let mut repeats = Repeats::default();
        let click = call(&json!(["click", "@e3"]));
        assert_eq!(repeats.note(&click), None);
        assert_eq!(repeats.note(&click), None);
        let third = repeats.note(&click).expect("noted");
        assert!(third.contains("3 times in a row"), "{third}");
        assert!(repeats.note(&click).expect("noted").contains("4 times"));
        assert_eq!(repeats.note(&call(&json!(["snapshot", "-i"]))), None);
        assert_eq!(repeats.note(&click), None);
    }
}
