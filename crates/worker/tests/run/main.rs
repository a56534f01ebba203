//! The runner against a fake driver and the scripted model: each limit, the final-report turn,
//! time-out, cancellation, concurrency, output cuts, screenshots and error scrubbing.
//!
//! The driver here is a stand-in on purpose: these tests are about the runner's rules, and the
//! real Docker driver is tested against a real dockerd in its own crate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod answer;
mod budget;
mod direct;
mod help;
mod record;
mod refusals;
mod scope;
mod start;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_worker::*;
use serde_json::{Value, json};

#[derive(Default)]
struct Observed {
    disposed: AtomicUsize,
    tool_started: AtomicUsize,
    context: Mutex<Option<TaskContext>>,
}

struct FakeDriver {
    observed: Arc<Observed>,
}

struct FakeDispose(Arc<Observed>);

impl Dispose for FakeDispose {
    fn dispose(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            self.0.disposed.fetch_add(1, Ordering::SeqCst);
        })
    }
}

struct FakeTool {
    name: &'static str,
    context: TaskContext,
    observed: Arc<Observed>,
}

impl Tool for FakeTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.into(),
            description: format!("fake {}", self.name),
            input_schema: json!({"type": "object"}),
        }
    }

    fn execute(&self, input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            self.observed.tool_started.fetch_add(1, Ordering::SeqCst);
            match self.name {
                "echo" => {
                    let repeat = usize::try_from(input["repeat"].as_u64().unwrap_or(1)).unwrap();
                    Ok(ToolOutput::text(
                        input["text"].as_str().unwrap_or("").repeat(repeat),
                    ))
                }
                "shot" => {
                    let image = match input["png"].as_array() {
                        // A real picture of this width and height.
                        Some(size) => real_png(
                            u32::try_from(size[0].as_u64().unwrap()).unwrap(),
                            u32::try_from(size[1].as_u64().unwrap()).unwrap(),
                        ),
                        None => Image::png(vec![
                            0x89;
                            usize::try_from(input["bytes"].as_u64().unwrap())
                                .unwrap()
                        ]),
                    };
                    let bytes = image.data.len();
                    let kept = if input["keep"].as_bool() == Some(true) {
                        match self.context.keep_screenshot(image.clone()) {
                            Ok(()) => "; kept".to_owned(),
                            Err(refusal) => format!("; {refusal}"),
                        }
                    } else {
                        String::new()
                    };
                    let text = format!("screenshot of {bytes} bytes{kept}");
                    Ok(ToolOutput {
                        text,
                        images: vec![image],
                        ..ToolOutput::default()
                    })
                }
                "hang" => std::future::pending().await,
                "fail" => Err(ToolFailure::new(
                    input["message"].as_str().unwrap().to_owned(),
                )),
                "refuse" => Ok(ToolOutput::failed(
                    input["message"].as_str().unwrap().to_owned(),
                )),
                other => unreachable!("{other}"),
            }
        })
    }
}

/// A page-like PNG: dark text lines on white.
fn real_png(width: u32, height: u32) -> Image {
    let picture = image::RgbImage::from_fn(width, height, |x, y| {
        if y % 20 < 10 && x % 7 < 5 {
            image::Rgb([20, 20, 20])
        } else {
            image::Rgb([255, 255, 255])
        }
    });
    let mut data = Vec::new();
    picture
        .write_to(
            &mut std::io::Cursor::new(&mut data),
            image::ImageFormat::Png,
        )
        .unwrap();
    Image::png(data)
}

fn dimensions(image: &Image) -> (u32, u32) {
    let decoded = image::load_from_memory(&image.data).unwrap();
    (decoded.width(), decoded.height())
}

impl BrowserDriver for FakeDriver {
    fn check(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(async { Ok(()) })
    }

    fn start(&self, context: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>> {
        Box::pin(async move {
            *self.observed.context.lock().unwrap() = Some(context.clone());
            let tools: Vec<Arc<dyn Tool>> = ["echo", "shot", "hang", "fail", "refuse"]
                .into_iter()
                .map(|name| {
                    Arc::new(FakeTool {
                        name,
                        context: context.clone(),
                        observed: Arc::clone(&self.observed),
                    }) as Arc<dyn Tool>
                })
                .collect();
            Ok(BrowserSession {
                tools,
                guide: "FAKE GUIDE".into(),
                prompt: "FAKE PROMPT".into(),
                dispose: Box::new(FakeDispose(Arc::clone(&self.observed))),
                warm: false,
            })
        })
    }
}

/// A stand-in browser tool's definition.
fn stand_in_definition() -> ToolDefinition {
    ToolDefinition {
        name: "browser".into(),
        description: "a stand-in browser".into(),
        input_schema: json!({"type": "object"}),
    }
}

/// A driver whose session is one tool, made for each task's context by the closure.
struct OneTool<F>(F);
struct Nothing;

impl Dispose for Nothing {
    fn dispose(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

impl<F: Fn(TaskContext) -> Arc<dyn Tool> + Send + Sync> BrowserDriver for OneTool<F> {
    fn check(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(async { Ok(()) })
    }

    fn start(&self, context: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>> {
        let tool = (self.0)(context);
        Box::pin(async move {
            Ok(BrowserSession {
                tools: vec![tool],
                guide: String::new(),
                prompt: String::new(),
                dispose: Box::new(Nothing),
                warm: false,
            })
        })
    }
}

fn call(name: &str, input: Value) -> ScriptedCall {
    ScriptedCall {
        name: name.into(),
        input,
    }
}

fn turn(text: &str, calls: Vec<ScriptedCall>) -> ScriptedTurn {
    ScriptedTurn {
        text: text.into(),
        tool_calls: calls,
        ..ScriptedTurn::default()
    }
}

fn expecting(mut turn: ScriptedTurn, expect: Expectation) -> ScriptedTurn {
    turn.expect = expect;
    turn
}

fn shown(needles: &[&str]) -> Expectation {
    Expectation {
        shown_contains: needles.iter().map(|s| (*s).to_owned()).collect(),
        ..Expectation::default()
    }
}

struct Setup {
    runner: TaskRunner,
    model: ScriptedModel,
    observed: Arc<Observed>,
}

fn setup(turns: Vec<ScriptedTurn>, limits: TaskLimits) -> Setup {
    let observed = Arc::new(Observed::default());
    let model = ScriptedModel::new(Script { turns });
    let runner = TaskRunner::new(
        Arc::new(FakeDriver {
            observed: Arc::clone(&observed),
        }),
        Arc::new(model.clone()),
        limits,
    )
    .unwrap();
    Setup {
        runner,
        model,
        observed,
    }
}

fn request() -> TaskRequest {
    TaskRequest {
        task: "Find the answer".into(),
        url: Some("https://example.com/".into()),
        scope: Scope::default(),
        secrets: Secrets::default(),
        state: None,
        return_state: false,
        uploads: Uploads::default(),
        max_download_bytes: None,
        route: None,
        output_schema: None,
        browser: airlock_worker::BrowserSettings::default(),
    }
}

async fn run(setup: &Setup) -> TaskResult {
    setup
        .runner
        .run(request(), CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_task_completes_with_the_workers_report() {
    let setup = setup(
        vec![
            expecting(
                turn("", vec![call("echo", json!({"text": "page text"}))]),
                Expectation {
                    shown_contains: vec![
                        "Task: Find the answer".into(),
                        "Start at: https://example.com/".into(),
                    ],
                    system_contains: vec![
                        "You are a browser worker".into(),
                        "FAKE GUIDE".into(),
                        "FAKE PROMPT".into(),
                    ],
                    ..Expectation::default()
                },
            ),
            expecting(
                turn("The answer is on the page.", vec![]),
                shown(&["page text"]),
            ),
        ],
        TaskLimits::default(),
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.report, "The answer is on the page.");
    assert_eq!(result.steps_used, 1);
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 1);
    let requests = setup.model.requests();
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["echo", "shot", "hang", "fail", "refuse", "read_output"]
    );
}

#[tokio::test]
async fn the_call_after_the_last_step_is_refused_and_one_report_turn_follows() {
    let limits = TaskLimits {
        max_steps: 2,
        ..TaskLimits::default()
    };
    let setup = setup(
        vec![
            turn(
                "",
                vec![
                    call("echo", json!({"text": "a"})),
                    call("echo", json!({"text": "b"})),
                ],
            ),
            turn("", vec![call("echo", json!({"text": "c"}))]),
            expecting(
                turn(
                    "Report after the limit.",
                    vec![call("echo", json!({"text": "d"}))],
                ),
                shown(&["Step limit reached", "Write your report now"]),
            ),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::StepLimit);
    assert_eq!(result.steps_used, 2);
    assert_eq!(result.report, "Report after the limit.");
    assert_eq!(
        setup.observed.tool_started.load(Ordering::SeqCst),
        2,
        "no call past the limit may run"
    );
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn with_nothing_kept_long_tool_text_is_cut_with_a_marker() {
    let limits = TaskLimits {
        max_output_chars: 1000,
        max_kept_output_bytes: 0,
        ..TaskLimits::default()
    };
    let setup = setup(
        vec![
            turn("", vec![call("echo", json!({"text": "x", "repeat": 1500}))]),
            expecting(
                turn("done", vec![]),
                shown(&["[… cut: 500 more characters not shown]"]),
            ),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    let requests = setup.model.requests();
    let Message::ToolResults { results } = requests[1].messages.last().unwrap() else {
        panic!()
    };
    assert_eq!(
        results[0].text().chars().filter(|c| *c == 'x').count(),
        1000
    );
}

#[tokio::test]
async fn long_tool_text_is_previewed_and_the_worker_pages_the_rest_as_steps() {
    let limits = TaskLimits {
        max_output_chars: 1000,
        ..TaskLimits::default()
    };
    // 100,000 characters, the fact near the end (past any cut).
    let mut page = "lorem ipsum ".repeat(8_000);
    page.push_str("THE-FACT-IS-42 ");
    page.push_str(&"dolor sit ".repeat(400));
    let total = page.chars().count();
    let setup = setup(
        vec![
            turn("", vec![call("echo", json!({"text": page}))]),
            expecting(
                turn(
                    "",
                    vec![call(
                        "read_output",
                        json!({"id": "out-1", "find": "the-fact"}),
                    )],
                ),
                Expectation {
                    shown_not_contains: vec!["THE-FACT-IS-42".into()],
                    ..shown(&[&format!("out-1: this output has {total} characters")])
                },
            ),
            expecting(
                turn(
                    "",
                    vec![call(
                        "read_output",
                        json!({"id": "out-1", "offset": 96_000, "length": 20}),
                    )],
                ),
                shown(&["occurs 1 time", "- offset 96000: ", "THE-FACT-IS-42"]),
            ),
            expecting(
                turn("", vec![call("read_output", json!({"id": "out-7"}))]),
                shown(&["characters 96000–96020 of", "THE-FACT-IS-42 dolor"]),
            ),
            expecting(
                turn("The fact is 42.", vec![]),
                shown(&["there is no output `out-7`"]),
            ),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.steps_used, 4, "each read counts as a step");
    assert_eq!(result.context.outputs_kept, 1);
    assert_eq!(
        result.context.output_reads, 2,
        "the refused read is not an answer"
    );
    let shown_chars: usize = setup.model.requests()[1..]
        .iter()
        .map(|request| match request.messages.last().unwrap() {
            Message::ToolResults { results } => {
                results.iter().map(|r| r.text().chars().count()).sum()
            }
            _ => 0,
        })
        .sum();
    assert_eq!(result.context.chars_shown, shown_chars as u64);
    assert!(result.context.chars_shown < 2_500, "{:?}", result.context);
}

#[tokio::test]
async fn without_a_budget_usage_is_still_counted() {
    let mut first = turn("", vec![call("echo", json!({"text": "a"}))]);
    first.usage.input_tokens = 1_000_000;
    let mut last = turn("done", vec![]);
    last.usage.output_tokens = 7;
    let setup = setup(vec![first, last], TaskLimits::default());
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(result.usage.total(), 1_000_007);
}

#[tokio::test]
async fn screenshots_are_kept_within_count_and_size_and_oversized_ones_are_not_shown() {
    let limits = TaskLimits {
        max_screenshots: 2,
        max_screenshot_bytes: 2048,
        ..TaskLimits::default()
    };
    let keep = |bytes: u64| call("shot", json!({"bytes": bytes, "keep": true}));
    let setup = setup(
        vec![
            turn("", vec![keep(100), keep(200)]),
            expecting(
                turn("", vec![keep(300)]),
                Expectation {
                    shown_images: Some(2),
                    ..shown(&["; kept"])
                },
            ),
            // The third is refused for count (and shown, being small).
            expecting(
                turn("", vec![keep(5000)]),
                shown(&["2 screenshots are kept already", "most this task may keep"]),
            ),
            expecting(
                turn("two kept", vec![]),
                Expectation {
                    shown_images: Some(0),
                    ..shown(&["over the 2048-byte limit", "not shown"])
                },
            ),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    let sizes: Vec<usize> = result.screenshots.iter().map(|s| s.data.len()).collect();
    assert_eq!(sizes, vec![100, 200]);
}

#[tokio::test]
async fn a_tall_screenshot_is_shown_scaled_and_kept_full_size() {
    let setup = setup(
        vec![
            turn(
                "",
                vec![call("shot", json!({"png": [1280, 6000], "keep": true}))],
            ),
            expecting(
                turn("seen", vec![]),
                Expectation {
                    shown_images: Some(1),
                    ..shown(&["; kept"])
                },
            ),
        ],
        TaskLimits::default(),
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    let kept = &result.screenshots[0];
    assert_eq!(kept.media_type, "image/png");
    assert_eq!(dimensions(kept), (1280, 6000), "people get the full size");
    let Message::ToolResults { results } =
        setup.model.requests()[1].messages.last().unwrap().clone()
    else {
        panic!()
    };
    let Some(Content::Image { image: shown }) = results[0].content.get(1).cloned() else {
        panic!("no image shown")
    };
    assert_eq!(
        dimensions(&shown),
        (335, 1568),
        "the model gets at most 1568 px"
    );
    assert!(shown.data.len() < kept.data.len());
    assert_eq!(result.context.images_shown, 1);
    assert_eq!(result.context.image_bytes_shown, shown.data.len() as u64);
}

#[tokio::test(start_paused = true)]
async fn a_time_out_returns_the_report_and_the_screenshots_kept_so_far() {
    let limits = TaskLimits {
        timeout: Duration::from_secs(30),
        ..TaskLimits::default()
    };
    let setup = setup(
        vec![
            turn(
                "I kept one and will wait.",
                vec![call("shot", json!({"bytes": 64, "keep": true}))],
            ),
            turn("", vec![call("hang", json!({}))]),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::TimedOut);
    assert!(
        result
            .report
            .starts_with("The task timed out after 30 seconds."),
        "{}",
        result.report
    );
    assert!(result.report.contains("I kept one and will wait."));
    assert_eq!(result.screenshots.len(), 1);
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancelling_mid_tool_disposes_before_returning() {
    let setup = setup(
        vec![turn("", vec![call("hang", json!({}))])],
        TaskLimits::default(),
    );
    let cancel = CancellationToken::new();
    let observed = Arc::clone(&setup.observed);
    let canceller = cancel.clone();
    let watcher = tokio::spawn(async move {
        // Cancel once the tool is running: poll the counter the tool bumps.
        while observed.tool_started.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        canceller.cancel();
    });
    let result = setup.runner.run(request(), cancel).await.unwrap();
    watcher.await.unwrap();
    assert_eq!(result.ended, Ended::Cancelled);
    assert_eq!(
        setup.observed.disposed.load(Ordering::SeqCst),
        1,
        "dispose must finish before run returns"
    );
    let context = setup.observed.context.lock().unwrap().clone().unwrap();
    assert!(
        context.cancel.is_cancelled(),
        "the driver's context is cancelled with the task"
    );
}

struct HangingModel {
    asked: Arc<AtomicUsize>,
}

impl Model for HangingModel {
    fn next_turn(&self, _: ModelRequest) -> BoxFuture<'_, Result<AssistantTurn, ModelError>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn cancelling_mid_model_call_disposes_before_returning() {
    let observed = Arc::new(Observed::default());
    let asked = Arc::new(AtomicUsize::new(0));
    let runner = TaskRunner::new(
        Arc::new(FakeDriver {
            observed: Arc::clone(&observed),
        }),
        Arc::new(HangingModel {
            asked: Arc::clone(&asked),
        }),
        TaskLimits::default(),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let watch = Arc::clone(&asked);
    tokio::spawn(async move {
        while watch.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        canceller.cancel();
    });
    let result = runner.run(request(), cancel).await.unwrap();
    assert_eq!(result.ended, Ended::Cancelled);
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dropping_the_task_still_disposes_the_session() {
    let setup = setup(
        vec![turn("", vec![call("hang", json!({}))])],
        TaskLimits::default(),
    );
    let observed = Arc::clone(&setup.observed);
    let runner = setup.runner.clone();
    let task = tokio::spawn(async move { runner.run(request(), CancellationToken::new()).await });
    while observed.tool_started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    // Dispose was spawned by the drop; wait for it to be observed.
    while observed.disposed.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_task_past_the_concurrency_limit_is_refused_not_queued() {
    let limits = TaskLimits {
        max_concurrent_tasks: 1,
        ..TaskLimits::default()
    };
    let setup = setup(vec![turn("", vec![call("hang", json!({}))])], limits);
    let cancel = CancellationToken::new();
    let runner = setup.runner.clone();
    let first_cancel = cancel.clone();
    let first = tokio::spawn(async move { runner.run(request(), first_cancel).await });
    while setup.observed.tool_started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let second = setup.runner.run(request(), CancellationToken::new()).await;
    let Err(error) = second else {
        panic!("the second task ran")
    };
    assert!(matches!(error, RunError::Busy { running: 1 }));
    assert!(error.to_string().contains("max_concurrent_tasks"));
    cancel.cancel();
    assert_eq!(first.await.unwrap().unwrap().ended, Ended::Cancelled);
}

#[test]
fn standing_instructions_snapshot() {
    insta::assert_snapshot!(STANDING_INSTRUCTIONS);
}

#[test]
fn result_json_shape() {
    let result = TaskResult {
        report: "r".into(),
        screenshots: vec![Image::png(vec![1, 2, 3])],
        steps_used: 3,
        ended: Ended::StepLimit,
        egress_refusals: vec![EgressRefusal {
            at_unix_ms: 1,
            target: "10.0.0.1:80".into(),
            reason: "private".into(),
            class: "private".into(),
            count: 3,
            step: Some(2),
        }],
        egress_refusals_not_listed: 7,
        egress_refusals_by_class: [("private".to_owned(), 10)].into(),
        egress_failures: vec![EgressFailure {
            at_unix_ms: 2,
            target: "nowhere.test:443".into(),
            class: "no-dns-answer".into(),
            reason: "`nowhere.test` does not resolve".into(),
            count: 1,
            step: None,
        }],
        egress_failures_not_listed: 0,
        egress_bytes: EgressBytes {
            up: 100,
            down: 2000,
        },
        egress_allowed: vec![EgressAllowed {
            destination: "shop.example:443".into(),
            connections: 3,
            up: 100,
            down: 2000,
            step: Some(1),
            route: "direct".into(),
        }],
        egress_allowed_not_listed: 0,
        egress_bytes_by_route: std::collections::BTreeMap::from([(
            "direct".to_owned(),
            EgressBytes {
                up: 100,
                down: 2000,
            },
        )]),
        timings: Timings::default(),
        usage: Usage {
            input_tokens: 10,
            cache_read_tokens: 20,
            cache_write_tokens: 30,
            output_tokens: 40,
            thinking_tokens: 5,
        },
        context: ContextUse {
            chars_shown: 1200,
            images_shown: 1,
            image_bytes_shown: 3,
            outputs_kept: 1,
            output_reads: 2,
        },
        scope: ScopeReport {
            allowed_domains: vec!["shop.example".into(), "*.cdn.example".into()],
            blocked_domains: vec![],
        },
        state: None,
        downloads: vec![airlock_worker::Download::new(
            "scores.csv".into(),
            b"name,score\n".to_vec(),
        )],
        data: None,
    };
    insta::assert_json_snapshot!(result);
}
