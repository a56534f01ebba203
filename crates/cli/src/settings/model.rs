//! The settings of the model's answers: how long one may be and how long one may take. A local
//! server on a small machine needs both (a 1.5B model on two cores reads a few thousand tokens
//! of prompt in a minute or two, and may write thousands of tokens of repeated calls when
//! nothing stops it); a provider's API rarely does.

use std::time::Duration;

use anyhow::bail;

use super::Resolver;
use crate::setting_flags::{FileSettings, SettingFlags};

/// The defaults, as the backends had them before these were settings.
const DEFAULT_MAX_ANSWER_TOKENS: u32 = 4096;
const DEFAULT_MODEL_TIMEOUT: Duration = Duration::from_secs(120);

/// Limits on each of the model's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModelLimits {
    /// The largest answer, in tokens (a thinking budget is added to it).
    pub max_answer_tokens: u32,
    /// The longest one request to the model may take.
    pub request_timeout: Duration,
}

impl Resolver<'_> {
    pub(super) fn model_limits(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<ModelLimits> {
        let max_answer_tokens = self.pick(
            "max_answer_tokens",
            "AIRLOCK_MAX_ANSWER_TOKENS",
            flags.max_answer_tokens,
            file.max_answer_tokens,
            DEFAULT_MAX_ANSWER_TOKENS,
            ToString::to_string,
        );
        if !(64..=65_536).contains(&max_answer_tokens) {
            bail!(
                "--max-answer-tokens {max_answer_tokens} is out of range: use a value from 64 to 65536"
            );
        }
        let request_timeout = self.seconds(
            ("model_timeout", "AIRLOCK_MODEL_TIMEOUT"),
            flags.model_timeout,
            file.model_timeout,
            DEFAULT_MODEL_TIMEOUT,
        );
        if !(10..=3600).contains(&request_timeout.as_secs()) {
            bail!(
                "--model-timeout {} is out of range: use a value from 10 to 3600 seconds",
                request_timeout.as_secs()
            );
        }
        Ok(ModelLimits {
            max_answer_tokens,
            request_timeout,
        })
    }
}
