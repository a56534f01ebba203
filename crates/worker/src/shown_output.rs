//! What the caller (a worker, or an agent driving the browser directly) is shown of one tool's
//! outcome: the same function for both, so neither sees more than the other.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::kept_output::KeptOutputs;
use crate::limits::TaskLimits;
use crate::messages::Content;
use crate::ports::{ToolFailure, ToolOutput, ToolStatus};
use crate::scrub::{neutral_failure, scrub};
use crate::secrets::Secrets;

/// Unexpected tool failures get a number, so a user can find the worker's message in the log.
static FAILURE_REFERENCE: AtomicU64 = AtomicU64::new(1);

/// What the caller (a worker, or an agent driving the browser directly) sees of a tool's outcome:
/// error text scrubbed, text over `max_output_chars` kept in `kept` and shown as a preview,
/// images (already fitted for the model) over the byte limit left out, and a failure the tool did not expect
/// replaced by a neutral message whose details go to the host's log.
pub(crate) fn shown(
    tool: &str,
    outcome: Result<ToolOutput, ToolFailure>,
    limits: &TaskLimits,
    kept: &mut KeptOutputs,
    secrets: &Secrets,
) -> (Vec<Content>, ToolStatus) {
    let output = match outcome {
        Ok(output) => output,
        Err(failure) => {
            let reference = FAILURE_REFERENCE.fetch_add(1, Ordering::Relaxed);
            tracing::error!(reference, tool, error = %failure, "a tool failed unexpectedly");
            return (
                vec![Content::text(neutral_failure(reference))],
                ToolStatus::Failed,
            );
        }
    };
    let text = if output.is_error() {
        scrub(&output.text)
    } else {
        output.text
    };
    // Before it is shown or kept: a page may show (or echo back) what was typed.
    let text = match secrets.scrub(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(clean) => clean,
    };
    let mut content = vec![Content::text(kept.show(text, limits.max_output_chars))];
    for image in output.images {
        if image.data.len() > limits.max_screenshot_bytes {
            content.push(Content::text(format!(
                "[A screenshot of {} bytes was taken but not shown: it is over the {}-byte limit. Take a smaller one.]",
                image.data.len(),
                limits.max_screenshot_bytes
            )));
        } else {
            content.push(Content::Image { image });
        }
    }
    (content, output.status)
}
