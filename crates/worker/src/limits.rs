//! The limits a task runs within, with defaults and validation.

use std::time::Duration;

use serde::Serialize;

/// Every limit of a task. Build with [`TaskLimits::default`] and change fields, then
/// [`TaskLimits::validate`]; the runner validates again before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TaskLimits {
    /// The whole task, from request to result.
    #[serde(with = "seconds")]
    pub timeout: Duration,
    /// Tool calls the worker may make.
    pub max_steps: usize,
    /// Screenshots the worker may keep.
    pub max_screenshots: usize,
    /// Largest screenshot kept or shown to the worker.
    pub max_screenshot_bytes: usize,
    /// Longest tool text shown to the worker at once (and longest report returned). A longer
    /// output is kept whole and shown as a preview the worker pages with `read_output`.
    pub max_output_chars: usize,
    /// Bytes of long outputs kept per task for `read_output`, oldest dropped first; 0 keeps
    /// none (a long output is then cut, and what was past the cut is lost).
    pub max_kept_output_bytes: usize,
    /// Tokens (input, cached or not, and output) a task may spend, its report included: each
    /// request is estimated before it is sent and its answer capped at what is left; 0 for no
    /// budget.
    pub max_task_tokens: u64,
    /// Longest side, in pixels, of an image shown to the worker; larger ones are scaled down
    /// (kept screenshots stay at full size).
    pub max_image_side: u32,
    /// Tasks one runner runs at once; the next is refused, not queued.
    pub max_concurrent_tasks: usize,
    /// How long a call for a human's help may wait (the task's own time stands still
    /// meanwhile); offered only where a person can be reached.
    #[serde(with = "seconds")]
    pub human_timeout: Duration,
}

mod seconds {
    use serde::Serializer;
    pub(super) fn serialize<S: Serializer>(
        value: &std::time::Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(value.as_secs())
    }
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            max_steps: 40,
            max_screenshots: 4,
            max_screenshot_bytes: 4 * MIB,
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            max_kept_output_bytes: 8 * MIB,
            max_task_tokens: 0,
            max_image_side: DEFAULT_MAX_IMAGE_SIDE,
            max_concurrent_tasks: 2,
            human_timeout: Duration::from_secs(600),
        }
    }
}

const MIB: usize = 1024 * 1024;

/// The default output cap: about 2,500 tokens at once. Nothing past it is lost (the worker pages
/// or searches the rest), and `cargo xtask bench --only context` measured 24,000 (the old
/// default, when the rest was cut) showing 2.3 times as much to find the same facts.
pub(crate) const DEFAULT_MAX_OUTPUT_CHARS: usize = 10_000;

/// Anthropic's advice for images: no side over 1568 px (larger ones are scaled down by the API
/// anyway, at the same token cost). OpenAI's high-detail images fit 2048 px.
pub const DEFAULT_MAX_IMAGE_SIDE: u32 = 1568;

/// A limit outside its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{option}` is {value}: use a value from {min} to {max}{unit}")]
pub struct LimitError {
    /// The option's name.
    pub option: &'static str,
    /// The value given.
    pub value: String,
    /// The smallest value allowed.
    pub min: String,
    /// The largest value allowed.
    pub max: String,
    /// The unit, if any (` seconds`, ` bytes`).
    pub unit: &'static str,
}

impl TaskLimits {
    /// Each limit's name, value, range and unit, in one place.
    fn ranges(&self) -> [(&'static str, u64, u64, u64, &'static str); 10] {
        let as_u64 = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
        [
            ("timeout", self.timeout.as_secs(), 5, 3600, " seconds"),
            (
                "human_timeout",
                self.human_timeout.as_secs(),
                10,
                3600,
                " seconds",
            ),
            ("max_steps", as_u64(self.max_steps), 1, 500, ""),
            ("max_screenshots", as_u64(self.max_screenshots), 0, 20, ""),
            (
                "max_screenshot_bytes",
                as_u64(self.max_screenshot_bytes),
                1024,
                10 * 1024 * 1024,
                " bytes",
            ),
            (
                "max_output_chars",
                as_u64(self.max_output_chars),
                1000,
                200_000,
                "",
            ),
            (
                "max_kept_output_bytes",
                as_u64(self.max_kept_output_bytes),
                0,
                256 * 1024 * 1024,
                " bytes",
            ),
            (
                "max_task_tokens",
                self.max_task_tokens,
                0,
                1_000_000_000,
                "",
            ),
            (
                "max_image_side",
                u64::from(self.max_image_side),
                256,
                8192,
                " pixels",
            ),
            (
                "max_concurrent_tasks",
                as_u64(self.max_concurrent_tasks),
                1,
                16,
                "",
            ),
        ]
    }

    /// Check every limit; the error names the first one out of range and its range.
    pub fn validate(&self) -> Result<(), LimitError> {
        for (option, value, min, max, unit) in self.ranges() {
            if !(min..=max).contains(&value) {
                return Err(LimitError {
                    option,
                    value: value.to_string(),
                    min: min.to_string(),
                    max: max.to_string(),
                    unit,
                });
            }
        }
        Ok(())
    }
}
