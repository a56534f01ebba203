//! The task's start page, opened by the worker before the model's first turn and shown to it in
//! the first message, so the first turn already acts on the page.
//!
//! Every task given a URL began with the same call (`open` it, then a snapshot), one or two full
//! turns that re-read the whole system prompt: with Qwen2.5-Coder-1.5B behind llama-server that
//! was about 2,000 prompt tokens and 10–15 seconds per task before anything happened. The
//! opening runs through the same tool, policy, proxy and record as a model's call; it spends no
//! step of the model's, and the record shows it at turn 0.

use std::sync::Arc;
use std::time::Instant;

use super::words::{StartPage, cancelled_report, timed_out_report};
use super::{Bounded, Run, millis};
use crate::messages::{ToolCall, text_of};
use crate::ports::{Tool, ToolDefinition};
use crate::task::Ended;

/// The id of the worker's own call that opens the start page (no model wrote it).
const START_CALL_ID: &str = "airlock-start";

impl Run<'_> {
    /// Open `url` with the first tool that can, and look at it; `Err` with how the task ended
    /// when its time ran out or it was cancelled meanwhile.
    pub(super) async fn open_start_page(
        &mut self,
        tools: &[Arc<dyn Tool>],
        definitions: &[ToolDefinition],
        url: &str,
    ) -> Result<StartPage, (Ended, String)> {
        let limits = self.runner.limits;
        let Some((tool, input)) = tools
            .iter()
            .find_map(|tool| tool.opening(url).map(|input| (tool, input)))
        else {
            return Ok(StartPage::NotOpened);
        };
        let call = ToolCall {
            id: START_CALL_ID.to_owned(),
            name: tool.definition().name,
            input,
        };
        // The opening is the record's step 1, and what the proxy reports meanwhile is its.
        self.worker_steps = 1;
        self.context.set_step(1);
        let began = Instant::now();
        let opened = self.call_tool(tools, definitions, &call).await;
        self.timings.tools_ms += millis(began.elapsed());
        let result = match opened {
            Bounded::Done(result) => result,
            Bounded::TimedOut => return Err((Ended::TimedOut, timed_out_report(&limits, ""))),
            Bounded::Cancelled => return Err((Ended::Cancelled, cancelled_report(""))),
        };
        if result.is_error {
            return Ok(StartPage::Failed(text_of(&result.content)));
        }
        let looked = self.bounded(tool.look()).await;
        let elements = match looked {
            Bounded::Done(looked) => self.elements_seen(looked),
            Bounded::TimedOut => return Err((Ended::TimedOut, timed_out_report(&limits, ""))),
            Bounded::Cancelled => return Err((Ended::Cancelled, cancelled_report(""))),
        };
        if let Some(elements) = &elements {
            self.context_use
                .record(&[crate::messages::Content::text(elements.clone())]);
        }
        Ok(StartPage::Opened { elements })
    }
}
