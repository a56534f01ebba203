//! A tool call a model wrote as text. Local models behind OpenAI-compatible servers often answer
//! a request that offers tools with the call in the message's text (`{"name": "agent_browser",
//! "arguments": {"args": ["snapshot", "-i"]}}`, often in a ```json fence) instead of in
//! `tool_calls`; read as a report, that ends the task after one turn. The reading is strict:
//! the text, less a code fence or `<tool_call>` tags around it, must be a JSON object of two
//! keys, `name` (a tool the request offered) and `arguments`, with nothing after it but more
//! such objects (of which only the first is read). Anything else stays text, as before. The
//! arguments are the call's input as written, for the tool to validate as it does an API call's
//! (the agent_browser tool reads a bare list of words, as the small Qwens write it, as `args`).

use airlock_worker::{ToolCall, ToolDefinition};
use serde_json::Value;

/// The longest text read for a call: a call is short, and a long text is a report.
const MAX_CALL_TEXT: usize = 16 * 1024;

/// The call `text` ends with, if it ends with one, and the words before it: the whole text as
/// [`read_call`] reads it, or else a last fenced block that is one (the 1.5B Qwen, reminded of
/// its task, reasoned a sentence and then wrote the call in a json fence). A fence anywhere but
/// at the end is part of a report.
pub(crate) fn read_final_call(text: &str, tools: &[ToolDefinition]) -> Option<(String, ToolCall)> {
    if let Some(call) = read_call(text, tools) {
        return Some((String::new(), call));
    }
    let text = text.trim_end();
    let last = text.rfind("```")?;
    // A closing fence ends the text, and its block opens at the fence before it; an opening
    // fence with no close is a block cut off at the answer's token limit.
    let open = if last + 3 == text.len() {
        text.get(..last)?.rfind("```")?
    } else {
        last
    };
    let before = text.get(..open)?.trim();
    let call = read_call(text.get(open..)?, tools)?;
    (!before.is_empty()).then(|| (before.to_owned(), call))
}

/// The call `text` is, if it is one: one call, or the first of calls written one after another
/// with nothing else between them (the 1.5B Qwen, once it had a page, wrote the guide's commands
/// as a list of calls until its answer was cut; only the first can be meant for this page).
pub(crate) fn read_call(text: &str, tools: &[ToolDefinition]) -> Option<ToolCall> {
    if text.len() > MAX_CALL_TEXT {
        return None;
    }
    let body = unwrapped(text.trim());
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    let value = values.next()?.ok()?;
    // After the call: nothing, or the next call (perhaps cut off). Any other text is a report.
    let rest = body.get(values.byte_offset()..)?.trim_start();
    if !(rest.is_empty() || rest.starts_with('{')) {
        return None;
    }
    let object = value.as_object()?;
    if object.len() != 2 {
        return None;
    }
    let name = object.get("name")?.as_str()?;
    let arguments = match object.get("arguments")? {
        // Some templates write the arguments as a JSON string, as the API itself carries them.
        Value::String(encoded) => serde_json::from_str(encoded).ok()?,
        other => other.clone(),
    };
    tools
        .iter()
        .any(|tool| tool.name == name)
        .then(|| ToolCall {
            id: "call_from_text".to_owned(),
            name: name.to_owned(),
            input: arguments,
        })
}

/// The text inside one ```/```json fence or one `<tool_call>` pair, or the text itself.
fn unwrapped(text: &str) -> &str {
    if let Some(inner) = text
        .strip_prefix("<tool_call>")
        .and_then(|rest| rest.strip_suffix("</tool_call>"))
    {
        return unwrapped(inner.trim());
    }
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    // An answer cut at its token limit never closes its fence.
    let inner = rest.strip_suffix("```").unwrap_or(rest);
    // The fence's language word, if any, runs to the first line break.
    let inner = match inner.split_once('\n') {
        Some((language, code)) if !language.trim_start().starts_with('{') => code,
        _ => inner,
    };
    inner.trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "agent_browser".to_owned(),
            description: "drive the browser".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {"args": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
                "required": ["args"],
                "additionalProperties": false
            }),
        }]
    }

    #[test]
    fn one_call_alone_or_fenced_or_tagged_is_read() {
        let call = r#"{"name": "agent_browser", "arguments": {"args": ["snapshot", "-i"]}}"#;
        for text in [
            call.to_owned(),
            format!("```json\n{call}\n```"),
            format!("```\n{call}\n```"),
            format!("  <tool_call>\n{call}\n</tool_call>\n"),
            r#"{"name": "agent_browser", "arguments": "{\"args\": [\"snapshot\", \"-i\"]}"}"#
                .to_owned(),
        ] {
            let read = read_call(&text, &tools()).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(read.name, "agent_browser");
            assert_eq!(read.input, json!({"args": ["snapshot", "-i"]}));
        }
    }

    #[test]
    fn of_calls_one_after_another_the_first_is_read_even_when_the_answer_was_cut() {
        // As the 1.5B Qwen answered after opening a page (the start of a 300-token answer).
        let list = "{\"name\": \"agent_browser\", \"arguments\": [\"snapshot\", \"-i\"]}\n\
                    {\"name\": \"agent_browser\", \"arguments\": [\"click\", \"@e3\"]}\n\
                    {\"name\": \"agent_browser\", \"arguments\": [\"";
        for text in [list.to_owned(), format!("```json\n{list}")] {
            let read = read_call(&text, &tools()).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(read.input, json!(["snapshot", "-i"]));
        }
    }

    #[test]
    fn a_call_fenced_at_the_end_of_some_words_is_read_with_the_words_kept() {
        // As the 1.5B Qwen answered when reminded of its task after a snapshot.
        let text = "To click on the \"No\" button, you need to find the button element and click \
                    it. The button has the ref `e4`.\n\n```json\n{\"name\": \"agent_browser\", \
                    \"arguments\": [\"click\", \"@e4\"]}\n```";
        let (before, call) = read_final_call(text, &tools()).expect("a call");
        assert!(before.starts_with("To click on"), "{before}");
        assert_eq!(call.input, json!(["click", "@e4"]));
        // Cut off before its fence closed.
        let cut = "I will click it.\n```json\n{\"name\": \"agent_browser\", \"arguments\": [\"click\", \"@e4\"]}\n{\"name";
        assert_eq!(
            read_final_call(cut, &tools()).expect("a call").1.input,
            json!(["click", "@e4"])
        );
        // A fence in the middle of a report, or a fence alone that is no call, is the report.
        for report in [
            "The page shows:\n```json\n{\"name\": \"agent_browser\", \"arguments\": [\"x\"]}\n```\nThat is all.",
            "The page's code:\n```js\nalert(1)\n```",
            "The shop opens at 9.",
        ] {
            assert!(read_final_call(report, &tools()).is_none(), "{report}");
        }
        // The whole text a call: nothing before it.
        let whole = "{\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"snapshot\"]}}";
        assert_eq!(read_final_call(whole, &tools()).expect("a call").0, "");
    }

    #[test]
    fn arguments_are_the_input_as_written_for_the_tool_to_judge() {
        // As the 0.5B Qwen wrote it: the list bare, not under `args`.
        let text = "```json\n{\n  \"name\": \"agent_browser\",\n  \"arguments\": [\"open\", \"http://127.0.0.1:8000/\"]\n}\n```";
        let read = read_call(text, &tools()).unwrap();
        assert_eq!(read.input, json!(["open", "http://127.0.0.1:8000/"]));
    }

    #[test]
    fn anything_but_calls_alone_stays_text() {
        for text in [
            // A report.
            "The page's title is Example Domain.",
            // Prose around the call: not a call alone.
            "I will take a snapshot: {\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"snapshot\"]}}",
            // A call, then a report.
            "{\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"a\"]}}\nThe page says hello.",
            // A fenced call, then a report.
            "```json\n{\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"a\"]}}\n```\nDone.",
            // An unknown tool.
            "{\"name\": \"shell\", \"arguments\": {\"args\": [\"ls\"]}}",
            // A string for arguments that is not JSON.
            "{\"name\": \"agent_browser\", \"arguments\": \"snapshot -i\"}",
            // A call and then more text (the 0.5B Qwen added a full stop).
            "{\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"x\"]}}.",
            // More than a call.
            "{\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"x\"]}, \"why\": \"look\"}",
            // Broken JSON.
            "{\"name\": \"agent_browser\", \"arguments\": {\"args\": [\"x\"]}",
            "",
        ] {
            assert!(read_call(text, &tools()).is_none(), "{text}");
        }
        let long = format!(
            "{{\"name\": \"agent_browser\", \"arguments\": {{\"args\": [\"{}\"]}}}}",
            "x".repeat(MAX_CALL_TEXT)
        );
        assert!(read_call(&long, &tools()).is_none());
    }
}
