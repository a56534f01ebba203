//! OpenAI chat completions, and every server that speaks them.

use airlock_worker::{
    AssistantTurn, BoxFuture, Content, Message, Model, ModelError, ModelRequest, ToolCall,
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
            "max_tokens": self.options.max_tokens,
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
        body
    }
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

pub(crate) fn turn_from(answer: &Value) -> Result<AssistantTurn, ModelError> {
    let message = &answer["choices"][0]["message"];
    if message.is_null() {
        return Err(ModelError::new(BackendError::Malformed {
            provider: "openai",
            what: "has no message".to_owned(),
        }));
    }
    let tool_calls = message["tool_calls"]
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
    Ok(AssistantTurn {
        text: message["content"].as_str().unwrap_or_default().to_owned(),
        tool_calls,
        opaque: Vec::new(),
    })
}

impl Model for OpenAiModel {
    fn next_turn(&self, request: ModelRequest) -> BoxFuture<'_, Result<AssistantTurn, ModelError>> {
        Box::pin(async move {
            let body = self.body(&request);
            let answer = self
                .endpoint
                .post(&body, self.options.retry, "openai")
                .await?;
            turn_from(&answer)
        })
    }
}
