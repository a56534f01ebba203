//! A task's record as one self-contained HTML page: it opens offline in any browser and asks for
//! nothing (its content security policy forbids every fetch; pictures are inline). Every text in
//! it came from a page or a model, so all of it is escaped (maud escapes whatever it is given),
//! and the one script is allowed by its hash alone.

use std::time::{Duration, UNIX_EPOCH};

use airlock_worker::{
    FlightRecord, HelpOutcome, Image, RecordedHelp, RecordedStep, RecordedTurn, ThumbnailCause,
    Verdict,
};
use base64::Engine;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use sha2::{Digest, Sha256};

/// Click a thumbnail to see it large; click again to shrink it.
const SCRIPT: &str = "document.addEventListener('click',function(e){var t=e.target;if(t.classList&&t.classList.contains('thumb')){t.classList.toggle('big');}});";

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#1b1f24;background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.meta{color:#57606a}.report{white-space:pre-wrap;background:#fff;border:1px solid #d0d7de;padding:10px;border-radius:6px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.ran{background:#dafbe1;color:#116329}.refused{background:#ffebe9;color:#a40e26}.failed{background:#fff8c5;color:#7d4e00}
.help{margin-top:4px;padding:4px 8px;border-left:3px solid #8250df;background:#fbefff}
.not_run{background:#eaeef2;color:#57606a}
.step{display:grid;grid-template-columns:64px 1fr auto;gap:10px;background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px;margin:6px 0}
.step.is-refused{border-left:5px solid #cf222e;background:#fff5f5}
.when{color:#57606a;font-size:12px}code{font:12px ui-monospace,monospace;background:#f6f8fa;padding:1px 4px;border-radius:4px;word-break:break-all}
pre{white-space:pre-wrap;word-break:break-word;font:12px ui-monospace,monospace;margin:4px 0;max-height:240px;overflow:auto;background:#f6f8fa;padding:6px}
.page{font-size:12px;color:#0550ae;word-break:break-all}
img.thumb{max-width:220px;border:1px solid #d0d7de;cursor:zoom-in}
img.thumb.big{position:fixed;inset:0;margin:auto;max-width:96vw;max-height:96vh;z-index:9;cursor:zoom-out;box-shadow:0 0 0 100vmax rgba(0,0,0,.6)}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;font-size:13px}
tr.refusal td{background:#fff5f5}
";

/// What the page may do: show its inline pictures and style, and run its one script.
fn policy() -> String {
    let script_hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
    format!(
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'"
    )
}

/// The policy `serve` sends with the page: the same, in an opaque origin (`sandbox`), so the page
/// can reach nothing of the server's.
pub fn served_policy() -> String {
    format!("sandbox allow-scripts; {}", policy())
}

/// `record` as a page.
pub fn render(record: &FlightRecord) -> String {
    let policy = policy();
    let refused = record
        .steps
        .iter()
        .filter(|step| matches!(step.verdict, Verdict::Refused { .. }))
        .count();
    let egress_refused: u64 = record.egress.refusals_by_class.values().sum();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(policy);
                meta name="referrer" content="no-referrer";
                title { "Airlock record: " (short(&record.task, 80)) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "Task record" }
                p.meta {
                    "Started " (started(record.started_at_unix_ms))
                    " · " span #ended .badge.(ended_class(record)) { (format!("{:?}", record.ended)) }
                    " · " (record.steps_used) " steps · "
                    (seconds(record.timings.total_ms)) " s · "
                    (record.usage.total()) " tokens · "
                    span #refusal-count { (refused) " commands refused, " (egress_refused) " requests refused" }
                }
                h2 { "Task" }
                div.report #task { (record.task) }
                @if let Some(url) = &record.start_url { p.page { "Started at " code { (url) } } }
                (scope(record))
                h2 { "Report" }
                div.report #report { (record.report) }
                @if let Some(data) = &record.data {
                    h2 { "Answer" }
                    div.report #answer { (serde_json::to_string_pretty(data).unwrap_or_default()) }
                }
                h2 { "Timeline" }
                div #timeline { @for step in &record.steps { (step_row(step)) } }
                @if record.thumbnails_not_kept > 0 {
                    p.meta { (record.thumbnails_not_kept) " thumbnails were left out (the record's picture budget was spent)." }
                }
                (egress(record))
                h2 { "Model turns" }
                (turns(&record.turns))
                @if !record.downloads.is_empty() {
                    h2 { "Downloads" }
                    table { tr { th { "Name" } th { "Type" } th { "Bytes" } }
                        @for file in &record.downloads { tr { td { (file.name) } td { (file.media_type) } td { (file.bytes) } } } }
                }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
    .into_string()
}

fn step_row(step: &RecordedStep) -> Markup {
    let (class, label, reason) = match &step.verdict {
        Verdict::Ran => ("ran", "ran", None),
        Verdict::Refused { reason } => ("refused", "refused", Some(reason)),
        Verdict::Failed { reason } => ("failed", "failed", Some(reason)),
        Verdict::NotRun { reason } => ("not_run", "not run", Some(reason)),
    };
    html! {
        div.step.(format!("is-{class}")) data-step=(step.step) {
            div.when { "#" (step.step) br; (seconds(step.at_ms)) " s" br; "turn " (step.turn) }
            div {
                span.badge.(class) { (label) } " "
                code.command { (step.tool) " " (step.command.join(" ")) }
                @if let Some(reason) = reason { div.reason { (reason) } }
                @if let Some(stdin) = &step.stdin { pre { (stdin) } }
                @if let Some(help) = &step.help {
                    div.help { (help_words(help)) }
                }
                @if let Some(page) = &step.page {
                    div.page { (page.title) " — " (page.url) }
                }
                @if !step.output.is_empty() {
                    details { summary { "Output (" (step.output_chars) " characters)" } pre { (step.output) } }
                }
            }
            div {
                @if let Some(thumbnail) = &step.thumbnail {
                    @if let Some(source) = data_uri(&thumbnail.image) {
                        img.thumb src=(source) alt=(cause(thumbnail.cause)) title=(cause(thumbnail.cause));
                    }
                }
            }
        }
    }
}

/// A call for a person's help, in a line: who was asked what, and what came of it.
fn help_words(help: &RecordedHelp) -> String {
    let waited = seconds(help.waited_ms);
    match help.outcome {
        HelpOutcome::HandedBack => format!(
            "A person was asked: \u{201c}{}\u{201d}. They acted ({}) and handed back after {waited} s.",
            help.reason,
            help.actions.words()
        ),
        HelpOutcome::NobodyCame => format!(
            "A person was asked: \u{201c}{}\u{201d}. Nobody came within {waited} s.",
            help.reason
        ),
        HelpOutcome::Cancelled => format!(
            "A person was asked: \u{201c}{}\u{201d}. The task was cancelled after {waited} s; before that: {}.",
            help.reason,
            help.actions.words()
        ),
    }
}

fn scope(record: &FlightRecord) -> Markup {
    let scope = &record.scope;
    html! {
        p.meta {
            "Allowed: "
            @if scope.allowed_domains.is_empty() { "any public site" }
            @else { code { (scope.allowed_domains.join(", ")) } }
            @if !scope.blocked_domains.is_empty() { " · blocked: " code { (scope.blocked_domains.join(", ")) } }
        }
    }
}

fn egress(record: &FlightRecord) -> Markup {
    let egress = &record.egress;
    html! {
        h2 { "Egress" }
        p.meta { (egress.bytes.up) " bytes up, " (egress.bytes.down) " bytes down through the egress proxy." }
        @if egress.bytes_by_route.keys().any(|route| route != airlock_policy::DIRECT) {
            table #egress-routes {
                tr { th { "Route" } th { "Bytes up" } th { "Bytes down" } }
                @for (route, bytes) in &egress.bytes_by_route {
                    tr.route { td { code { (route) } } td { (bytes.up) } td { (bytes.down) } }
                }
            }
        }
        @if !egress.allowed.is_empty() {
            table #egress-allowed {
                tr { th { "Allowed" } th { "Route" } th { "Connections" } th { "Bytes up" } th { "Bytes down" } th { "Step" } }
                @for allowed in &egress.allowed {
                    tr.allowed { td { code { (allowed.destination) } } td { (allowed.route) } td { (allowed.connections) } td { (allowed.up) } td { (allowed.down) } td { (step_of(allowed.step)) } }
                }
            }
        }
        @if egress.allowed_not_listed > 0 { p.meta { (egress.allowed_not_listed) " more allowed connections, not listed." } }
        @if !egress.refusals.is_empty() {
            table #egress-refusals {
                tr { th { "Refused" } th { "Class" } th { "Times" } th { "Step" } th { "Why" } }
                @for refusal in &egress.refusals {
                    tr.refusal { td { code { (refusal.target) } } td { (refusal.class) } td { (refusal.count) } td { (step_of(refusal.step)) } td { (refusal.reason) } }
                }
            }
        }
        @if egress.refusals_not_listed > 0 { p.meta { (egress.refusals_not_listed) " more refusals, not listed." } }
        @if !egress.failures.is_empty() {
            table { tr { th { "Could not reach" } th { "Class" } th { "Times" } th { "Step" } th { "Why" } }
                @for failure in &egress.failures {
                    tr { td { code { (failure.target) } } td { (failure.class) } td { (failure.count) } td { (step_of(failure.step)) } td { (failure.reason) } }
                }
            }
        }
    }
}

/// The step that reported an egress event, or a dash before the first (the browser's start).
fn step_of(step: Option<usize>) -> String {
    step.map_or_else(|| "–".to_owned(), |step| step.to_string())
}

fn turns(turns: &[RecordedTurn]) -> Markup {
    html! {
        table {
            tr { th { "Turn" } th { "At (s)" } th { "Model (s)" } th { "Input" } th { "Cache read" } th { "Output" } th { "Shown before (chars)" } th { "Calls" } }
            @for turn in turns {
                tr { td { (turn.turn) } td { (seconds(turn.at_ms)) } td { (seconds(turn.took_ms)) }
                    td { (turn.usage.input_tokens) } td { (turn.usage.cache_read_tokens) } td { (turn.usage.output_tokens) }
                    td { (turn.chars_shown_before) } td { (turn.tool_calls) } }
            }
        }
    }
}

/// A picture as a `data:` URI: only the two types Airlock makes, so nothing else is ever
/// interpreted.
fn data_uri(image: &Image) -> Option<String> {
    matches!(image.media_type.as_str(), "image/png" | "image/jpeg")
        .then(|| format!("data:{};base64,{}", image.media_type, image.base64()))
}

fn cause(cause: ThumbnailCause) -> &'static str {
    match cause {
        ThumbnailCause::Screenshot => "the worker's screenshot",
        ThumbnailCause::Navigation => "the page after it changed",
    }
}

fn ended_class(record: &FlightRecord) -> &'static str {
    match record.ended {
        airlock_worker::Ended::Completed => "ran",
        airlock_worker::Ended::StepLimit | airlock_worker::Ended::TokenBudget => "not_run",
        _ => "refused",
    }
}

fn started(unix_ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(unix_ms)).to_string()
}

fn seconds(ms: u64) -> String {
    format!("{:.1}", Duration::from_millis(ms).as_secs_f64())
}

fn short(text: &str, max: usize) -> String {
    let mut kept: String = text.chars().take(max).collect();
    if kept.len() < text.len() {
        kept.push('…');
    }
    kept
}
