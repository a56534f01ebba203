//! Notes the run adds after a tool's own result, for a model that loses its way: for a model that
//! writes its calls as text (a small local one), where the task stands after each turn
//! (Qwen2.5-Coder-1.5B, shown a snapshot with its button, answered with nothing; reminded of its
//! task under the same snapshot, it clicked; a model that calls tools the API's way is not
//! charged for the reminder), the same call again and
//! again (a small model's loop), and the last step spent (so the next answer is the report, not
//! a call that would be refused).

use serde_json::Value;

use crate::messages::{Content, ToolCall, ToolResult};

/// What the notes after a task's calls keep track of.
#[derive(Debug, Default)]
pub(super) struct Kept {
    pub(super) repeats: Repeats,
    pub(super) done: DoneSoFar,
}

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

/// How many of a task's latest calls a reminder lists, and how much of each.
const DONE_LISTED: usize = 8;
const DONE_CALL_CHARS: usize = 80;

/// The calls a task has run so far, as a reminder lists them.
#[derive(Debug, Default)]
pub(super) struct DoneSoFar {
    calls: Vec<String>,
    earlier: usize,
}

impl DoneSoFar {
    /// Note a call that ran, and whether the tool called it an error.
    pub(super) fn ran(&mut self, call: &ToolCall, failed: bool) {
        let words = super::words::spoken_words(call).unwrap_or_else(|| call.name.clone());
        let mut said = crate::kept_output::cut(&words, DONE_CALL_CHARS);
        if failed {
            said.push_str(" (failed)");
        }
        if self.calls.len() == DONE_LISTED {
            self.calls.remove(0);
            self.earlier += 1;
        }
        self.calls.push(said);
    }

    fn listed(&self) -> String {
        let numbered = self
            .calls
            .iter()
            .enumerate()
            .map(|(index, call)| format!("{}. {call}", self.earlier + index + 1));
        numbered.collect::<Vec<_>>().join("; ")
    }
}

/// The note after a turn's calls while steps are left: the page, the task, what was done so
/// far, and the question whether that did it. Repeating the bare task after a click made
/// Qwen2.5-Coder-1.5B click again and again after the task was done (the page did not change).
pub(super) fn reminder(
    task: &str,
    done: &DoneSoFar,
    steps: usize,
    max_steps: usize,
    page: Option<&str>,
) -> String {
    let page = page.map_or_else(String::new, |page| {
        format!("The page now (snapshot -i):\n{}\n\n", page.trim())
    });
    format!(
        "{page}Your task: {}\nDone so far ({steps} of {max_steps} steps): {}.\n{REMINDER_ENDING}",
        crate::kept_output::cut(task.trim(), REMINDED_TASK_CHARS),
        done.listed()
    )
}

/// How a reminder ends: an answer that contains it copied the note instead of reporting.
pub(super) const REMINDER_ENDING: &str = "If that did the whole task, answer with your report \
     instead of a call, such as: Done: I <what you did>; the page shows <what it shows>. If not, \
     call the next tool.";

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
    fn a_reminder_lists_what_was_done_and_cuts_a_long_task() {
        let mut done = DoneSoFar::default();
        done.ran(&call(&json!(["click", "@e4"])), false);
        done.ran(&call(&json!(["fill", "@e9", "x"])), true);
        let told = reminder("Click on the \"No\" button.", &done, 2, 8, None);
        assert!(
            told.starts_with("Your task: Click on the \"No\" button.\nDone so far (2 of 8 steps): 1. click @e4; 2. fill @e9 x (failed).\n"),
            "{told}"
        );
        assert!(told.ends_with(REMINDER_ENDING), "{told}");
        let with_page = reminder("Click it.", &done, 1, 8, Some("- button \"No\" [ref=e4]"));
        assert!(
            with_page.starts_with("The page now (snapshot -i):\n- button"),
            "{with_page}"
        );
        let long = reminder(&"word ".repeat(200), &done, 1, 8, None);
        assert!(long.len() < 700, "{long}");
        for _ in 0..10 {
            done.ran(&call(&json!(["press", "Tab"])), false);
        }
        let listed = done.listed();
        assert!(listed.starts_with("5. press Tab; 6."), "{listed}");
        assert!(listed.ends_with("12. press Tab"), "{listed}");
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
