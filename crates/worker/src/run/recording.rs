//! The run's hooks for a recorded task: what each step left on the page, and calls not run.

use std::time::Instant;

use super::{Bounded, Run};
use crate::messages::{Image, ToolCall, ToolResult};
use crate::ports::Tool;
use crate::record::{ThumbnailCause, Verdict};

impl Run<'_> {
    /// For a recorded task, after a step: the page it left, and a thumbnail where the worker
    /// took a screenshot or the page changed.
    pub(super) async fn record_page(
        &mut self,
        tool: &dyn Tool,
        screenshot: Option<Image>,
    ) -> Bounded<()> {
        let page = match self.bounded(tool.page()).await {
            Bounded::Done(page) => page,
            Bounded::TimedOut => return Bounded::TimedOut,
            Bounded::Cancelled => return Bounded::Cancelled,
        };
        let Some(recorder) = &mut self.recorder else {
            return Bounded::Done(());
        };
        let moved = page.is_some_and(|page| recorder.page(&page));
        let picture = match screenshot {
            Some(image) => Some((ThumbnailCause::Screenshot, image)),
            None if moved && recorder.has_room() => {
                match self.bounded(tool.page_screenshot()).await {
                    Bounded::Done(image) => image.map(|image| (ThumbnailCause::Navigation, image)),
                    Bounded::TimedOut => return Bounded::TimedOut,
                    Bounded::Cancelled => return Bounded::Cancelled,
                }
            }
            None => None,
        };
        if let (Some(recorder), Some((cause, image))) = (&mut self.recorder, picture) {
            recorder.thumbnail(cause, image).await;
        }
        Bounded::Done(())
    }

    /// For a recorded task: a call that was not run.
    pub(super) fn record_not_run(&mut self, call: &ToolCall, result: &ToolResult, why: &str) {
        if let Some(recorder) = &mut self.recorder {
            let verdict = Verdict::NotRun {
                reason: why.to_owned(),
            };
            recorder.step(Instant::now(), call, verdict, &result.content);
        }
    }
}
