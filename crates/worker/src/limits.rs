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
    /// Longest tool text shown to the worker (and longest report returned).
    pub max_output_chars: usize,
    /// Tasks one runner runs at once; the next is refused, not queued.
    pub max_concurrent_tasks: usize,
}

mod seconds {
    use serde::Serializer;
    pub fn serialize<S: Serializer>(
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
            max_output_chars: 24_000,
            max_concurrent_tasks: 2,
        }
    }
}

const MIB: usize = 1024 * 1024;

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
    fn ranges(&self) -> [(&'static str, u64, u64, u64, &'static str); 6] {
        let as_u64 = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
        [
            ("timeout", self.timeout.as_secs(), 5, 3600, " seconds"),
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
