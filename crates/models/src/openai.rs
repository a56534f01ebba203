//! OpenAI chat completions, and every server that speaks them.

use airlock_worker::{
    AssistantTurn, BoxFuture, Content, Message, Model, ModelError, ModelRequest, ToolCall,
    ToolDefinition, Usage,
};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};

use crate::http::{Endpoint, secret_header};
use crate::{BackendError, BackendOptions, ModelSetupError, Thinking};

const DEFAULT_BASE: &str = "https://api.openai.com/v1";

/// A chat-completions model.
#[derive(Debug)]
pub struct OpenAiModel {
    endpoint: Endpoint,
    model: String,
    options: BackendOptions,
}

impl OpenAiModel {
    /// A model that sends `key` (if any) as a bearer token to `options.base_url` (or OpenAI).
    pub fn new(
        model: &str,
        key: Option<&str>,
        options: BackendOptions,
    ) -> Result<Self, ModelSetupError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            headers.insert(
                AUTHORIZATION,
                secret_header(&format!("Bearer {key}"), "OPENAI_API_KEY")?,
            );
        }
        let endpoint = Endpoint::new(&options, DEFAULT_BASE, "/chat/completions", headers)?;
        Ok(Self {
            endpoint,
            model: model.to_owned(),
            options,
        })
    }

    /// The request body for a model request (public for tests and debugging).
    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        for message in &request.messages {
            push_message(&mut messages, message);
        }
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}}))
            .collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "tools": tools,
        });
        let effort = match self.options.thinking {
            Thinking::Off => None,
            Thinking::Low => Some("low"),
            Thinking::Medium | Thinking::Tokens(_) => Some("medium"),
            Thinking::High => Some("high"),
        };
        if let Some(effort) = effort {
            body["reasoning_effort"] = json!(effort);
        }
        // Reasoning models refuse `max_tokens` (their limit covers hidden reasoning as well);
        // older models and most compatible servers know only `max_tokens`.
        let limit = if effort.is_some() || is_reasoning_model(&self.model) {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let cap = request.max_output_tokens.unwrap_or(u32::MAX).max(1);
        body[limit] = json!(self.options.max_tokens.min(cap));
        body
    }
}

/// OpenAI's reasoning families (o1, o3, o4, gpt-5 and later), by model name.
fn is_reasoning_model(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    let family = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.']))
    };
    ["o1", "o3", "o4", "o4-mini", "o3-mini", "o1-mini"]
        .iter()
        .any(|prefix| family(prefix))
        || name
            .strip_prefix("gpt-")
            .and_then(|rest| rest.split(['.', '-']).next())
            .and_then(|major| major.parse::<u32>().ok())
            .is_some_and(|major| major >= 5)
}

fn part(block: &Content) -> Value {
    match block {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { image } => json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{};base64,{}", image.media_type, image.base64())},
        }),
    }
}

fn push_message(messages: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { content } => messages
            .push(json!({"role": "user", "content": content.iter().map(part).collect::<Vec<_>>()})),
        Message::Assistant { turn } => {
            let mut value = json!({"role": "assistant", "content": turn.text});
            if !turn.tool_calls.is_empty() {
                value["tool_calls"] = turn
                    .tool_calls
                    .iter()
                    .map(|call| json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.input.to_string()}}))
                    .collect();
            }
            messages.push(value);
        }
        Message::ToolResults { results } => {
            // Tool messages carry text only; screenshots follow in one user message.
            let mut images = Vec::new();
            for result in results {
                let mut text = result.text();
                if result.is_error {
                    text = format!("Error: {text}");
                }
                messages
                    .push(json!({"role": "tool", "tool_call_id": result.call_id, "content": text}));
                for block in &result.content {
                    if matches!(block, Content::Image { .. }) {
                        images.push(json!({"type": "text", "text": format!("Screenshot from call {}:", result.call_id)}));
                        images.push(part(block));
                    }
                }
            }
            if !images.is_empty() {
                messages.push(json!({"role": "user", "content": images}));
            }
        }
    }
}

/// The turn in an answer; a call written as the text (see `text_call`) is read against `tools`.
pub(crate) fn turn_from(
    answer: &Value,
    tools: &[ToolDefinition],
) -> Result<AssistantTurn, ModelError> {
    let message = &answer["choices"][0]["message"];
    if message.is_null() {
        return Err(ModelError::new(BackendError::Malformed {
            provider: "openai",
            what: "has no message".to_owned(),
        }));
    }
    let tool_calls: Vec<ToolCall> = message["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|call| {
                    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
                    ToolCall {
                        id: call["id"].as_str().unwrap_or_default().to_owned(),
                        name: call["function"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        // A model that writes invalid JSON gets the text back as the input, and
                        // the tool's own validation tells it what is wrong.
                        input: serde_json::from_str(arguments)
                            .unwrap_or_else(|_| Value::String(arguments.to_owned())),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let text = message["content"].as_str().unwrap_or_default().to_owned();
    if tool_calls.is_empty()
        && let Some((before, call)) = crate::text_call::read_final_call(&text, tools)
    {
        return Ok(AssistantTurn {
            text: before,
            tool_calls: vec![call],
            opaque: Vec::new(),
            usage: usage_from(&answer["usage"]),
            call_read_from_text: true,
        });
    }
    Ok(AssistantTurn {
        text,
        tool_calls,
        opaque: Vec::new(),
        usage: usage_from(&answer["usage"]),
        call_read_from_text: false,
    })
}

/// OpenAI's `prompt_tokens` include cached ones and `completion_tokens` include reasoning; both
/// are split here so every token is counted once. Compatible servers that send less count less.
fn usage_from(usage: &Value) -> Usage {
    let tokens = |value: &Value| value.as_u64().unwrap_or(0);
    let prompt = tokens(&usage["prompt_tokens"]);
    let cached = tokens(&usage["prompt_tokens_details"]["cached_tokens"]).min(prompt);
    Usage {
        input_tokens: prompt - cached,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        output_tokens: tokens(&usage["completion_tokens"]),
        thinking_tokens: tokens(&usage["completion_tokens_details"]["reasoning_tokens"]),
    }
}

impl Model for OpenAiModel {
    fn next_turn(&self, request: ModelRequest) -> BoxFuture<'_, Result<AssistantTurn, ModelError>> {
        Box::pin(async move {
            let body = self.body(&request);
            let answer = self
                .endpoint
                .post(&body, self.options.retry, "openai")
                .await?;
            turn_from(&answer, &request.tools)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_are_known_by_name() {
        for model in [
            "o1",
            "o1-mini",
            "o3",
            "o3-mini-2025-01-31",
            "o4-mini",
            "gpt-5",
            "gpt-5.1",
            "gpt-5-mini",
            "openai/gpt-5",
        ] {
            assert!(is_reasoning_model(model), "{model}");
        }
        for model in [
            "gpt-4o",
            "gpt-4.1-mini",
            "gpt-3.5-turbo",
            "llama3.1",
            "o1x",
            "qwen2.5",
        ] {
            assert!(!is_reasoning_model(model), "{model}");
        }
    }
}
