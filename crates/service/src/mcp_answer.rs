//! A task's result as `browser_task` answers it over MCP: the report, the egress notes, the kept
//! screenshots and downloads as content, and the same result for programs as structured content.

use airlock_worker::{Ended, TaskResult};
use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::json;

use crate::task_book::TaskLinks;

/// A task's result as MCP content (report, egress notes, kept screenshots) and structured content;
/// with `kept_as` (on `serve`), where its record is.
pub(crate) fn task_answer(result: &TaskResult, kept_as: Option<&str>) -> CallToolResult {
    let mut blocks = vec![ContentBlock::text(result.report.clone())];
    // The answer as text too, for clients that read no structured content.
    if let Some(data) = &result.data {
        blocks.push(ContentBlock::text(format!(
            "The answer, matching the task's output schema:\n{data}"
        )));
    }
    let links = kept_as.map(TaskLinks::of);
    if let Some(links) = &links {
        blocks.push(ContentBlock::text(format!(
            "This task's record (every step, refusal and picture) is at {} on this server (JSON at {}), for the same token.",
            links.record_html, links.record
        )));
    }
    let refusals = result
        .egress_refusals
        .iter()
        .map(|r| (&r.target, &r.reason, r.count));
    blocks.extend(listed(
        "The egress proxy refused:",
        refusals,
        result.egress_refusals_not_listed,
    ));
    let failures = result
        .egress_failures
        .iter()
        .map(|f| (&f.target, &f.reason, f.count));
    blocks.extend(listed(
        "The egress proxy could not reach:",
        failures,
        result.egress_failures_not_listed,
    ));
    for image in &result.screenshots {
        blocks.push(ContentBlock::image(
            image.base64(),
            image.media_type.clone(),
        ));
    }
    // Downloaded files as embedded resources, typed from their bytes; the client decides what to
    // do with them (Airlock opens nothing).
    for file in &result.downloads {
        blocks.push(ContentBlock::resource(
            ResourceContents::blob(
                base64::engine::general_purpose::STANDARD.encode(&file.data),
                format!("airlock://downloads/{}", file.name),
            )
            .with_mime_type(file.media_type.clone()),
        ));
    }
    let mut answer = match result.ended {
        Ended::Completed | Ended::StepLimit | Ended::TokenBudget => CallToolResult::success(blocks),
        Ended::TimedOut | Ended::Cancelled | Ended::Failed | Ended::NoValidAnswer => {
            CallToolResult::error(blocks)
        }
    };
    // The same result for programs: how it ended, what it cost, what the worker was shown.
    answer.structured_content = Some(json!({
        "ended": result.ended,
        "steps_used": result.steps_used,
        "usage": result.usage,
        "total_tokens": result.usage.total(),
        "context": result.context,
        "timings": result.timings,
        "egress_refusals": result.egress_refusals,
        "egress_refusals_not_listed": result.egress_refusals_not_listed,
        "egress_refusals_by_class": result.egress_refusals_by_class,
        "egress_failures": result.egress_failures,
        "egress_failures_not_listed": result.egress_failures_not_listed,
        "screenshots": result.screenshots.len(),
        "downloads": result.downloads.iter().map(|file| json!({"name": file.name, "media_type": file.media_type, "bytes": file.bytes})).collect::<Vec<_>>(),
        "scope": result.scope,
        "links": links,
    }));
    // The answer a program asked for, beside the result's own fields (structured content is an
    // object, and an answer may be any JSON value).
    if let (Some(data), Some(structured)) = (&result.data, answer.structured_content.as_mut()) {
        structured["data"] = data.clone();
    }
    answer
}

/// `title` and one `- target: reason` line per item, or nothing when there are none.
/// One block listing destinations: each quoted as data (the page chose it), with how often, and
/// how many more were not listed. At most the task's bounded list (100 lines).
fn listed<'a>(
    title: &str,
    items: impl Iterator<Item = (&'a String, &'a String, u64)>,
    not_listed: u64,
) -> Option<ContentBlock> {
    let mut lines: Vec<String> = items
        .map(|(target, reason, count)| {
            let target = serde_json::Value::String(target.clone());
            match count {
                0 | 1 => format!("- {target}: {reason}"),
                count => format!("- {target}: {reason} ({count} times)"),
            }
        })
        .collect();
    if not_listed > 0 {
        lines.push(format!("- and {not_listed} more, not listed"));
    }
    (!lines.is_empty()).then(|| ContentBlock::text(format!("{title}\n{}", lines.join("\n"))))
}
