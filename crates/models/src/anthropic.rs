//! The Anthropic Messages API.

use airlock_worker::{
    AssistantTurn, BoxFuture, Content, Message, Model, ModelError, ModelRequest, ToolCall, Usage,
};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::http::{Endpoint, secret_header};
use crate::{BackendError, BackendOptions, ModelSetupError};

const DEFAULT_BASE: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";

/// A Claude model through the Messages API.
#[derive(Debug)]
pub struct AnthropicModel {
    endpoint: Endpoint,
    model: String,
    options: BackendOptions,
}

impl AnthropicModel {
    /// A model that sends `key` as `x-api-key`.
    pub fn new(model: &str, key: &str, options: BackendOptions) -> Result<Self, ModelSetupError> {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", secret_header(key, "ANTHROPIC_API_KEY")?);
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        let endpoint = Endpoint::new(&options, DEFAULT_BASE, "/v1/messages", headers)?;
        Ok(Self {
            endpoint,
            model: model.to_owned(),
            options,
        })
    }

    /// The request body for a model request (public for tests and debugging).
    pub fn body(&self, request: &ModelRequest) -> Value {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}))
            .collect();
        let (max_tokens, thinking) = output_limits(
            self.options.max_tokens,
            self.options.thinking.budget(),
            request.max_output_tokens,
        );
        let mut messages: Vec<Value> = request.messages.iter().map(message).collect();
        mark_conversation_for_cache(&mut messages);
        let mut body = json!({
            "model": self.model,
            "max_tokens": max_tokens,
            "system": system_blocks(&request.system),
            "messages": messages,
            "tools": tools,
        });
        if let Some(budget) = thinking {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        body
    }
}

/// Anthropic reads a prompt prefix from its cache only up to a block marked `cache_control`
/// (tools, then system, then messages, in that order). The system prompt is the same bytes for
/// every task (the worker puts a task's own text in its first message), so marking it lets
/// every task read the tools and instructions from the cache.
fn system_blocks(system: &str) -> Value {
    if system.is_empty() {
        // The API refuses an empty text block; there is nothing to cache either.
        return json!([]);
    }
    json!([{"type": "text", "text": system, "cache_control": ephemeral()}])
}

/// The worker re-sends its whole conversation every turn: marking the newest message's last
/// block lets the next turn read all of it from the cache and pay only for what is new. Two
/// marks in all (system and this), within the API's four.
fn mark_conversation_for_cache(messages: &mut [Value]) {
    let Some(last) = messages
        .last_mut()
        .and_then(|message| message["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
    else {
        return;
    };
    // Thinking blocks cannot carry a mark; a user message (the task, tool results) ends every
    // request the worker sends, so this is only a guard.
    if !matches!(
        last["type"].as_str(),
        Some("thinking" | "redacted_thinking")
    ) {
        last["cache_control"] = ephemeral();
    }
}

/// The cache mark: Anthropic's default five-minute cache, renewed by each read.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// `max_tokens` and the thinking budget of one request. Thinking needs room for an answer beside
/// it (1,024 tokens) and at least 1,024 tokens of its own (the API's minimum); under a request's
/// own cap (a task's token budget running low) it shrinks, and is left off when it cannot fit.
fn output_limits(max_tokens: u32, thinking: Option<u32>, cap: Option<u32>) -> (u32, Option<u32>) {
    const ANSWER_ROOM: u32 = 1_024;
    const MIN_THINKING: u32 = 1_024;
    let wanted = match thinking {
        Some(budget) => max_tokens.max(budget.saturating_add(ANSWER_ROOM)),
        None => max_tokens,
    };
    let max_tokens = cap.map_or(wanted, |cap| wanted.min(cap.max(1)));
    let thinking = thinking
        .map(|budget| budget.min(max_tokens.saturating_sub(ANSWER_ROOM)))
        .filter(|budget| *budget >= MIN_THINKING);
    (max_tokens, thinking)
}

fn content(block: &Content) -> Value {
    match block {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { image } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.base64()},
        }),
    }
}

fn message(message: &Message) -> Value {
    match message {
        Message::User { content: blocks } => {
            json!({"role": "user", "content": blocks.iter().map(content).collect::<Vec<_>>()})
        }
        Message::Assistant { turn } => {
            let mut blocks: Vec<Value> = turn.opaque.clone();
            if !turn.text.is_empty() {
                blocks.push(json!({"type": "text", "text": turn.text}));
            }
            blocks.extend(
                turn.tool_calls
                    .iter()
                    .map(|call| json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})),
            );
            json!({"role": "assistant", "content": blocks})
        }
        Message::ToolResults { results } => json!({
            "role": "user",
            "content": results.iter().map(|result| json!({
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": result.content.iter().map(content).collect::<Vec<_>>(),
                "is_error": result.is_error,
            })).collect::<Vec<_>>(),
        }),
    }
}

/// Read an answer into a turn; thinking blocks are kept to be sent back with the turn.
pub(crate) fn turn_from(answer: &Value) -> Result<AssistantTurn, ModelError> {
    let blocks = answer["content"].as_array().ok_or_else(|| {
        ModelError::new(BackendError::Malformed {
            provider: "anthropic",
            what: "has no content".to_owned(),
        })
    })?;
    let mut turn = AssistantTurn::default();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => {
                if !turn.text.is_empty() {
                    turn.text.push('\n');
                }
                turn.text
                    .push_str(block["text"].as_str().unwrap_or_default());
            }
            Some("tool_use") => turn.tool_calls.push(ToolCall {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                input: block["input"].clone(),
            }),
            Some("thinking" | "redacted_thinking") => turn.opaque.push(block.clone()),
            _ => {}
        }
    }
    turn.usage = usage_from(&answer["usage"]);
    Ok(turn)
}

/// Anthropic counts uncached input, cache writes and cache reads apart, as [`Usage`] does.
/// Thinking is billed as output and not reported on its own, so `thinking_tokens` stays 0.
fn usage_from(usage: &Value) -> Usage {
    let tokens = |field: &str| usage[field].as_u64().unwrap_or(0);
    Usage {
        input_tokens: tokens("input_tokens"),
        cache_read_tokens: tokens("cache_read_input_tokens"),
        cache_write_tokens: tokens("cache_creation_input_tokens"),
        output_tokens: tokens("output_tokens"),
        thinking_tokens: 0,
    }
}

impl Model for AnthropicModel {
    fn next_turn(&self, request: ModelRequest) -> BoxFuture<'_, Result<AssistantTurn, ModelError>> {
        Box::pin(async move {
            let body = self.body(&request);
            let answer = self
                .endpoint
                .post(&body, self.options.retry, "anthropic")
                .await?;
            turn_from(&answer)
        })
    }
}
