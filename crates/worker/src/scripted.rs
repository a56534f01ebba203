//! A model that replays a script: for tests, for the integration test, and for anyone who wants a
//! reproducible run without a model. It can also check what it was shown.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::Value;

use crate::messages::{AssistantTurn, Content, Message, ToolCall, Usage};
use crate::ports::{BoxFuture, Model, ModelError, ModelRequest};

/// A script: the turns to play, in order.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// One per model turn.
    pub turns: Vec<ScriptedTurn>,
}

/// One turn of a script.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    /// Text of the turn (the report, on the last one).
    #[serde(default)]
    pub text: String,
    /// Tools to call.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// What must be true of what the model is shown before this turn is played.
    #[serde(default)]
    pub expect: Expectation,
    /// Tokens the turn reports having used, as a backend would.
    #[serde(default)]
    pub usage: Usage,
    /// Its calls were read from the answer's text, as a backend marks a local model's.
    #[serde(default)]
    pub call_read_from_text: bool,
}

/// A tool call in a script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The tool.
    pub name: String,
    /// Its input.
    pub input: Value,
}

/// Checks on the latest message (the task, or the results of the previous turn's calls).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Each string must appear in the latest message's text.
    #[serde(default)]
    pub shown_contains: Vec<String>,
    /// None of these may appear in the latest message's text.
    #[serde(default)]
    pub shown_not_contains: Vec<String>,
    /// Exactly this many images in the latest message.
    #[serde(default)]
    pub shown_images: Option<usize>,
    /// Each string must appear in the instructions: the system prompt, or the first message
    /// (where a task's scope, secrets and files are told).
    #[serde(default)]
    pub system_contains: Vec<String>,
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("could not read the script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid script.
    #[error(
        "{path} is not a valid script ({source}); expected {{\"turns\": [{{\"text\": …, \"tool_calls\": [{{\"name\": …, \"input\": …}}]}}]}}"
    )]
    Parse {
        /// The file.
        path: String,
        /// Why.
        source: serde_json::Error,
    },
}

/// Why a scripted turn could not be played. Each names the fix in the script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The task asked for more turns than the script has.
    #[error("the script has no turn {turn}: it ended before the task did")]
    Exhausted {
        /// The turn asked for, counting from 1.
        turn: usize,
    },
    /// The request did not meet the turn's `expect`.
    #[error("script turn {turn}: {why}")]
    Unexpected {
        /// The turn, counting from 1.
        turn: usize,
        /// What the request lacked.
        why: String,
    },
}

/// Replays a [`Script`], one turn per call. Made with [`ScriptedModel::new`] it keeps every
/// request it was given, for a test to look at; loaded with [`ScriptedModel::from_file`] (a
/// server replaying a script for hours) it keeps none, or its memory would grow with every turn.
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    turns: std::collections::VecDeque<ScriptedTurn>,
    played: usize,
    requests: Vec<ModelRequest>,
    keeps_requests: bool,
}

impl ScriptedModel {
    /// A model that plays these turns.
    pub fn new(script: Script) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                turns: script.turns.into(),
                keeps_requests: true,
                ..State::default()
            })),
        }
    }

    /// Load a script from a JSON file.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let script = serde_json::from_str(&text).map_err(|source| ScriptError::Parse {
            path: path.display().to_string(),
            source,
        })?;
        let model = Self::new(script);
        model.lock().keeps_requests = false;
        Ok(model)
    }

    /// Every request the model was given, in order (none for a model loaded from a file).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Model for ScriptedModel {
    fn next_turn(&self, request: ModelRequest) -> BoxFuture<'_, Result<AssistantTurn, ModelError>> {
        let mut state = self.lock();
        if state.keeps_requests {
            state.requests.push(request.clone());
        }
        let number = state.played + 1;
        let Some(turn) = state.turns.pop_front() else {
            return Box::pin(async move {
                Err(ModelError::new(ReplayError::Exhausted { turn: number }))
            });
        };
        state.played = number;
        let result = check(&turn.expect, &request)
            .map_err(|why| ModelError::new(ReplayError::Unexpected { turn: number, why }))
            .map(|()| AssistantTurn {
                text: turn.text,
                tool_calls: turn
                    .tool_calls
                    .into_iter()
                    .enumerate()
                    .map(|(index, call)| ToolCall {
                        id: format!("call-{number}-{index}"),
                        name: call.name,
                        input: call.input,
                    })
                    .collect(),
                opaque: Vec::new(),
                usage: turn.usage,
                call_read_from_text: turn.call_read_from_text,
            });
        Box::pin(async move { result })
    }
}

fn check(expect: &Expectation, request: &ModelRequest) -> Result<(), String> {
    let (text, images) = request.messages.last().map_or((String::new(), 0), shown);
    for needle in &expect.shown_contains {
        if !text.contains(needle.as_str()) {
            return Err(format!(
                "expected the model to be shown `{needle}`, but it was shown:\n{text}"
            ));
        }
    }
    for needle in &expect.shown_not_contains {
        if text.contains(needle.as_str()) {
            return Err(format!(
                "the model was shown `{needle}`, which it must not see:\n{text}"
            ));
        }
    }
    if let Some(expected) = expect.shown_images
        && expected != images
    {
        return Err(format!(
            "expected {expected} images, the model was shown {images}"
        ));
    }
    // The instructions are the system prompt and, for what a task adds, its first message.
    let first = request.messages.first().map(shown).unwrap_or_default().0;
    for needle in &expect.system_contains {
        if !request.system.contains(needle.as_str()) && !first.contains(needle.as_str()) {
            return Err(format!("expected the instructions to contain `{needle}`"));
        }
    }
    Ok(())
}

/// The text and the number of images of a message.
fn shown(message: &Message) -> (String, usize) {
    let contents: Vec<&Content> = match message {
        Message::User { content } => content.iter().collect(),
        Message::ToolResults { results } => results.iter().flat_map(|r| r.content.iter()).collect(),
        Message::Assistant { turn } => return (turn.text.clone(), 0),
    };
    let text = contents
        .iter()
        .filter_map(|c| c.as_text())
        .collect::<Vec<_>>()
        .join("\n");
    let images = contents
        .iter()
        .filter(|c| matches!(c, Content::Image { .. }))
        .count();
    (text, images)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ModelRequest {
        ModelRequest {
            system: "s".repeat(10_000),
            messages: Vec::new(),
            tools: Vec::new(),
            max_output_tokens: None,
        }
    }

    #[tokio::test]
    async fn a_model_made_in_code_keeps_its_requests_and_one_loaded_from_a_file_keeps_none() {
        let turns = r#"{"turns": [{"text": "a"}, {"text": "b"}]}"#;
        let made = ScriptedModel::new(serde_json::from_str(turns).unwrap());
        made.next_turn(request()).await.unwrap();
        assert_eq!(made.requests().len(), 1);

        let dir = std::env::temp_dir().join(format!("airlock-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("script.json");
        std::fs::write(&path, turns).unwrap();
        let loaded = ScriptedModel::from_file(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        let loaded = loaded.unwrap();
        for text in ["a", "b"] {
            assert_eq!(loaded.next_turn(request()).await.unwrap().text, text);
        }
        assert!(
            loaded.requests().is_empty(),
            "a long replay would hold every request it was sent"
        );
    }
}
