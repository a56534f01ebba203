//! Notes the run adds after a tool's own result, for a model that loses its way: the same call
//! again and again (a small model's loop), and the last step spent (so the next answer is the
//! report, not a call that would be refused).

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
