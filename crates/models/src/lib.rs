//! Model backends for Airlock's worker.
//!
//! - `anthropic/<model>`: the Anthropic Messages API (tools, images in tool results, thinking).
//! - `openai/<model>`: OpenAI chat completions, and any OpenAI-compatible endpoint by base URL
//!   (Ollama, vLLM, llama.cpp server, OpenRouter).
//! - `script:<file.json>`: the worker's [`ScriptedModel`](airlock_worker::ScriptedModel).
//!
//! Requests retry with back-off on 429 and 5xx (honouring `Retry-After`), time out, and never put
//! the API key in an error message.
//!
//! Why two hand-written mappings (`anthropic.rs`, `openai.rs`) over `reqwest` rather than a
//! multi-provider crate such as `genai`: Airlock needs images inside tool results (Anthropic) and
//! after tool messages (OpenAI chat, whose tool messages are text only), signed thinking blocks
//! echoed back, and exact control of retries and of what an error may print. A generic client
//! would hide exactly the parts that must be checked against recorded request bodies.
//!
//! ```
//! let spec = airlock_models::ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap();
//! assert_eq!(spec.provider(), "anthropic");
//! assert!(airlock_models::ModelSpec::parse("gpt-4o").is_err());
//! ```

mod anthropic;
mod error;
mod http;
mod key;
mod openai;
mod text_call;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_worker::{Model, ScriptedModel};

pub use anthropic::AnthropicModel;
pub use error::BackendError;
pub use http::RetryPolicy;
pub use openai::OpenAiModel;

/// Which model to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `anthropic/<model>`.
    Anthropic(String),
    /// `openai/<model>`.
    OpenAi(String),
    /// `script:<file>`.
    Script(PathBuf),
}

/// Why a model could not be set up. Messages name the fix and never contain a key.
#[derive(Debug, thiserror::Error)]
pub enum ModelSetupError {
    /// The spec is not `provider/model` or `script:file`.
    #[error(
        "model `{given}` is not known: write anthropic/<model>, openai/<model> (with --base-url for compatible servers), or script:<file.json>"
    )]
    Spec {
        /// What was given.
        given: String,
    },
    /// The provider's API key is not set.
    #[error(
        "{variable} is not set: export your API key in {variable}, or name a file holding it in {variable}_FILE (a Swarm or Kubernetes secret), or use --base-url for a local OpenAI-compatible server"
    )]
    MissingKey {
        /// The environment variable to set.
        variable: &'static str,
    },
    /// Both the key and a file holding it are set.
    #[error("both {variable} and {variable}_FILE are set: keep one (the file, for a secret)")]
    KeyTwice {
        /// The environment variable.
        variable: &'static str,
    },
    /// The file named to hold the key cannot be read, or holds none.
    #[error(
        "{variable}_FILE names {path}, which {why}: point it at the file holding your API key (the secret's mount)"
    )]
    KeyFile {
        /// The environment variable.
        variable: &'static str,
        /// The file named.
        path: PathBuf,
        /// What is wrong with it (never its content).
        why: String,
    },
    /// The thinking level is not valid.
    #[error(
        "--thinking `{given}` is not valid: use off, low, medium, high, or a token budget (1024–64000)"
    )]
    Thinking {
        /// What was given.
        given: String,
    },
    /// The script could not be loaded.
    #[error(transparent)]
    Script(#[from] airlock_worker::ScriptError),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be set up: {0}")]
    Client(String),
}

impl ModelSpec {
    /// Parse `anthropic/<model>`, `openai/<model>` or `script:<file>`.
    pub fn parse(text: &str) -> Result<Self, ModelSetupError> {
        let spec = if let Some(path) = text.strip_prefix("script:") {
            (!path.is_empty()).then(|| Self::Script(PathBuf::from(path)))
        } else {
            match text.split_once('/') {
                Some(("anthropic", model)) if !model.is_empty() => {
                    Some(Self::Anthropic(model.to_owned()))
                }
                Some(("openai", model)) if !model.is_empty() => {
                    Some(Self::OpenAi(model.to_owned()))
                }
                _ => None,
            }
        };
        spec.ok_or_else(|| ModelSetupError::Spec {
            given: text.to_owned(),
        })
    }

    /// `anthropic`, `openai` or `script`.
    pub fn provider(&self) -> &'static str {
        match self {
            Self::Anthropic(_) => "anthropic",
            Self::OpenAi(_) => "openai",
            Self::Script(_) => "script",
        }
    }
}

/// How much a model may think before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// No extended thinking.
    Off,
    /// A small budget.
    Low,
    /// A medium budget.
    Medium,
    /// A large budget.
    High,
    /// An explicit token budget.
    Tokens(u32),
}

impl Thinking {
    /// Parse `off`, `low`, `medium`, `high` or a token count.
    pub fn parse(text: &str) -> Result<Self, ModelSetupError> {
        match text {
            "off" | "none" => Ok(Self::Off),
            "low" => Ok(Self::Low),
            "medium" => Ok(Self::Medium),
            "high" => Ok(Self::High),
            other => match other.parse::<u32>() {
                Ok(tokens) if (1024..=64_000).contains(&tokens) => Ok(Self::Tokens(tokens)),
                _ => Err(ModelSetupError::Thinking {
                    given: other.to_owned(),
                }),
            },
        }
    }

    /// The token budget, if thinking is on.
    pub fn budget(self) -> Option<u32> {
        match self {
            Self::Off => None,
            Self::Low => Some(2_048),
            Self::Medium => Some(8_192),
            Self::High => Some(24_576),
            Self::Tokens(tokens) => Some(tokens),
        }
    }
}

/// Options shared by the HTTP backends.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    /// Override the API's base URL (required for OpenAI-compatible servers other than OpenAI).
    pub base_url: Option<String>,
    /// Thinking budget.
    pub thinking: Thinking,
    /// Largest answer, in tokens.
    pub max_tokens: u32,
    /// Per-request time-out.
    pub request_timeout: Duration,
    /// Retry behaviour.
    pub retry: RetryPolicy,
}

impl Default for BackendOptions {
    fn default() -> Self {
        Self {
            base_url: None,
            thinking: Thinking::Off,
            max_tokens: 4096,
            request_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }
}

/// Build the model a spec names, reading API keys from the environment.
pub fn build(spec: &ModelSpec, options: BackendOptions) -> Result<Arc<dyn Model>, ModelSetupError> {
    match spec {
        ModelSpec::Script(path) => Ok(Arc::new(ScriptedModel::from_file(path)?)),
        ModelSpec::Anthropic(model) => {
            let key = api_key("ANTHROPIC_API_KEY")?;
            Ok(Arc::new(AnthropicModel::new(model, &key, options)?))
        }
        ModelSpec::OpenAi(model) => {
            // A local compatible server usually needs no key.
            let key = match api_key("OPENAI_API_KEY") {
                Ok(key) => Some(key),
                Err(error) if options.base_url.is_none() => return Err(error),
                Err(_) => None,
            };
            Ok(Arc::new(OpenAiModel::new(model, key.as_deref(), options)?))
        }
    }
}

/// The API key in `variable`, or in the file `{variable}_FILE` names (how Swarm and Kubernetes
/// hand secrets over without putting them where `docker service inspect` shows them).
pub fn api_key(variable: &'static str) -> Result<String, ModelSetupError> {
    key::api_key(variable, &|name| std::env::var(name).ok(), &|path| {
        std::fs::read_to_string(path)
    })
}
