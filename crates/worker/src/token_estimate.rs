//! How many input tokens a request will cost, estimated before it is sent, so a token budget can
//! hold a turn back instead of learning afterwards that it did not fit.
//!
//! The models' tokenizers are not available here, so the estimate leans high: three bytes of text
//! a token (English prose runs nearer four, JSON and markup nearer three), an image as its pixels
//! over 750 (Anthropic's rule) up to the 1.15 megapixels either API bills at most, and a fixed
//! allowance for each message and for the preamble the APIs add when tools are offered.

use std::io::Cursor;

use image::ImageReader;

use crate::messages::{Content, Image, Message};
use crate::ports::ModelRequest;

const BYTES_PER_TOKEN: u64 = 3;
/// Role markers and block framing around each message or block.
const PER_BLOCK: u64 = 8;
/// Anthropic's tool-use system prompt is about 350 tokens; OpenAI's framing is smaller.
const TOOLS_PREAMBLE: u64 = 400;
const PIXELS_PER_TOKEN: u64 = 750;
/// Both APIs scale larger images down before counting them.
const MAX_BILLED_PIXELS: u64 = 1_150_000;

/// The input tokens `request` should cost, rounded up.
pub(crate) fn input_tokens(request: &ModelRequest) -> u64 {
    let mut tokens = text(&request.system);
    if !request.tools.is_empty() {
        tokens += TOOLS_PREAMBLE;
    }
    for tool in &request.tools {
        tokens += PER_BLOCK
            + text(&tool.name)
            + text(&tool.description)
            + text(&tool.input_schema.to_string());
    }
    for message in &request.messages {
        tokens += PER_BLOCK + message_tokens(message);
    }
    tokens
}

fn message_tokens(message: &Message) -> u64 {
    match message {
        Message::User { content } => contents(content),
        Message::Assistant { turn } => {
            let opaque: u64 = turn
                .opaque
                .iter()
                .map(|block| text(&block.to_string()))
                .sum();
            let calls: u64 = turn
                .tool_calls
                .iter()
                .map(|call| {
                    PER_BLOCK + text(&call.id) + text(&call.name) + text(&call.input.to_string())
                })
                .sum();
            text(&turn.text) + opaque + calls
        }
        Message::ToolResults { results } => results
            .iter()
            .map(|result| PER_BLOCK + text(&result.call_id) + contents(&result.content))
            .sum(),
    }
}

fn contents(content: &[Content]) -> u64 {
    content
        .iter()
        .map(|block| {
            PER_BLOCK
                + match block {
                    Content::Text { text: words } => text(words),
                    Content::Image { image } => image_tokens(image),
                }
        })
        .sum()
}

fn text(words: &str) -> u64 {
    u64::try_from(words.len())
        .unwrap_or(u64::MAX)
        .div_ceil(BYTES_PER_TOKEN)
}

/// An image's cost from its header's size; one that cannot be read counts as the largest.
fn image_tokens(image: &Image) -> u64 {
    let pixels = ImageReader::new(Cursor::new(&image.data))
        .with_guessed_format()
        .ok()
        .and_then(|reader| reader.into_dimensions().ok())
        .map_or(MAX_BILLED_PIXELS, |(width, height)| {
            u64::from(width) * u64::from(height)
        });
    pixels.min(MAX_BILLED_PIXELS).div_ceil(PIXELS_PER_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{AssistantTurn, ToolCall, ToolResult};
    use crate::ports::ToolDefinition;
    use serde_json::json;

    fn png(width: u32, height: u32) -> Image {
        let mut bytes = Vec::new();
        image::RgbImage::new(width, height)
            .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
            .unwrap();
        Image::png(bytes)
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            system: String::new(),
            messages,
            tools: Vec::new(),
            max_output_tokens: None,
        }
    }

    #[test]
    fn text_counts_three_bytes_a_token_rounded_up_with_framing() {
        let bare = input_tokens(&request(vec![Message::User {
            content: vec![Content::text("")],
        }]));
        let said = input_tokens(&request(vec![Message::User {
            content: vec![Content::text("x".repeat(3_001))],
        }]));
        assert_eq!(said - bare, 1_001);
        assert_eq!(bare, 2 * PER_BLOCK, "a message and its one block");
    }

    #[test]
    fn everything_sent_is_counted_tools_calls_results_and_thinking() {
        let empty = input_tokens(&request(Vec::new()));
        let with_tools = input_tokens(&ModelRequest {
            tools: vec![ToolDefinition {
                name: "t".into(),
                description: "d".repeat(300),
                input_schema: json!({"type": "object"}),
            }],
            ..request(Vec::new())
        });
        assert!(with_tools >= empty + TOOLS_PREAMBLE + 100, "{with_tools}");
        let turn = Message::Assistant {
            turn: AssistantTurn {
                text: "a".repeat(300),
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "t".into(),
                    input: json!({"args": ["x".repeat(600)]}),
                }],
                opaque: vec![json!({"type": "thinking", "thinking": "y".repeat(900)})],
                ..AssistantTurn::default()
            },
        };
        assert!(input_tokens(&request(vec![turn])) > 100 + 200 + 300);
        let results = Message::ToolResults {
            results: vec![ToolResult {
                call_id: "c".into(),
                content: vec![Content::text("z".repeat(3_000))],
                is_error: false,
            }],
        };
        assert!(input_tokens(&request(vec![results])) > 1_000);
    }

    #[test]
    fn an_image_costs_its_pixels_over_750_up_to_the_billed_most() {
        let shown = |image: Image| {
            input_tokens(&request(vec![Message::User {
                content: vec![Content::Image { image }],
            }])) - 2 * PER_BLOCK
        };
        assert_eq!(shown(png(300, 250)), 100);
        assert_eq!(shown(png(1568, 1568)), 1_534, "scaled down by the API");
        assert_eq!(
            shown(Image::png(b"not an image".to_vec())),
            1_534,
            "unreadable counts as the largest"
        );
    }
}
