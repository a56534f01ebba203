//! The conversation between the worker and its tools, in a form any model backend can map.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An image, such as a screenshot.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Image {
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    /// The encoded image (base64 in JSON).
    #[serde(with = "base64_bytes")]
    #[schemars(with = "String")]
    pub data: Vec<u8>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Image({}, {} bytes)", self.media_type, self.data.len())
    }
}

impl Image {
    /// A PNG image.
    pub fn png(data: Vec<u8>) -> Self {
        Self {
            media_type: "image/png".into(),
            data,
        }
    }

    /// The data in standard base64, as model APIs take it.
    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }
}

pub(crate) mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(data: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// One piece of content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// The image.
        image: Image,
    },
}

impl Content {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The text, if this is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            Self::Image { .. } => None,
        }
    }
}

/// A call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The backend's id for the call, echoed in the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its input.
    pub input: Value,
}

impl ToolCall {
    /// The words of a call that takes `args` (the agent_browser tool's): `input.args`, or the
    /// input itself when a model wrote the list bare, as the tool then reads it.
    pub fn words(&self) -> Option<&Vec<Value>> {
        self.input
            .get("args")
            .and_then(Value::as_array)
            .or_else(|| self.input.as_array())
    }
}

/// What the model said and asked for in one turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AssistantTurn {
    /// Its text (the report, on the last turn).
    #[serde(default)]
    pub text: String,
    /// Tools to call, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Backend-specific blocks the backend must be sent back unchanged with this turn (for
    /// example a model's signed thinking); other backends ignore them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<Value>,
    /// What producing this turn cost, as the API reported it.
    #[serde(default)]
    pub usage: Usage,
    /// Its tool call was read from its text (a local model that wrote the call there instead of
    /// in the API's field), not given by the API as a call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub call_read_from_text: bool,
}

/// Tokens a model call (or a whole task) used, as the APIs report them. Every field is counted
/// once: `input_tokens` excludes cache reads and writes, and `thinking_tokens` is the part of
/// `output_tokens` spent thinking, where the API says so.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default, deny_unknown_fields)]
pub struct Usage {
    /// Input tokens read neither from nor into a prompt cache.
    pub input_tokens: u64,
    /// Input tokens read from a prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written into a prompt cache.
    pub cache_write_tokens: u64,
    /// Output tokens, thinking included.
    pub output_tokens: u64,
    /// The part of `output_tokens` spent thinking (0 where the API does not tell it apart).
    pub thinking_tokens: u64,
}

impl Usage {
    /// Every token billed: input (cached or not) and output.
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
            .saturating_add(self.output_tokens)
    }

    /// Add another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.thinking_tokens = self.thinking_tokens.saturating_add(other.thinking_tokens);
    }
}

/// The result of one call, as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// Text and images.
    pub content: Vec<Content>,
    /// Whether it is an error.
    pub is_error: bool,
}

impl ToolResult {
    /// All text of the result, joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(Content::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// From the user (the task).
    User {
        /// What it says.
        content: Vec<Content>,
    },
    /// From the model.
    Assistant {
        /// Its turn.
        turn: AssistantTurn,
    },
    /// Results of the model's tool calls.
    ToolResults {
        /// One per call, in order.
        results: Vec<ToolResult>,
    },
}

/// The text blocks of `content`, joined by newlines (images left out).
pub(crate) fn text_of(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            Content::Text { text } => Some(text.as_str()),
            Content::Image { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_calls_words_are_its_args_or_its_bare_list() {
        let call = |input| ToolCall {
            id: "c".into(),
            name: "agent_browser".into(),
            input,
        };
        let words = vec![json!("click"), json!("@e3")];
        assert_eq!(
            call(json!({"args": ["click", "@e3"]})).words(),
            Some(&words)
        );
        assert_eq!(call(json!(["click", "@e3"])).words(), Some(&words));
        assert_eq!(call(json!({"offset": 3})).words(), None);
    }
}
