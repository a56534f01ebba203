//! The flight record: every step with its verdict and the page it left, thumbnails where the
//! page changed or a screenshot was taken, every turn's tokens, and no secret or learned value
//! anywhere in it. The browser is a stand-in that keeps a URL and answers `page()`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use airlock_worker::*;
use serde_json::{Value, json};

use super::{OneTool, call, real_png, stand_in_definition, turn};
use ThumbnailCause::{Navigation, Screenshot};

const PASSWORD: &str = "hunter2-correct-horse";
/// A cookie the page set during the task, learned by the driver steps after one showed it.
const COOKIE: &str = "session-7f3a9c2e1d";

#[derive(Default)]
struct Page {
    url: Mutex<String>,
    looks: AtomicUsize,
    pictures: AtomicUsize,
}

struct Browser {
    page: Arc<Page>,
    context: TaskContext,
}

impl Tool for Browser {
    fn definition(&self) -> ToolDefinition {
        stand_in_definition()
    }

    fn execute(&self, input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            let words: Vec<String> = serde_json::from_value(input["args"].clone()).unwrap();
            Ok(match words[0].as_str() {
                "open" => {
                    self.page.url.lock().unwrap().clone_from(&words[1]);
                    ToolOutput::text(format!("opened; the page greets {PASSWORD}"))
                }
                "snapshot" => ToolOutput::text(format!("heading \"Welcome\"; cookie {COOKIE}")),
                "screenshot" => {
                    // Learned steps after the worker was shown it.
                    self.context.secrets.learn(&[COOKIE.to_owned()]);
                    ToolOutput {
                        text: "Done.".into(),
                        images: vec![real_png(1280, 720)],
                        ..ToolOutput::default()
                    }
                }
                "cookies" => ToolOutput::refused("cookies are not read in a task."),
                // The page asks for a private address; the proxy refuses it.
                "hover" => {
                    self.context.record_refusal(EgressRefusal::now(
                        "10.0.0.1:80",
                        "private",
                        "a private address",
                    ));
                    ToolOutput::text("Done.")
                }
                _ => ToolOutput::failed("agent-browser exited with status 1\nmore detail"),
            })
        })
    }

    fn page(&self) -> BoxFuture<'_, Option<PageSeen>> {
        Box::pin(async {
            self.page.looks.fetch_add(1, Ordering::SeqCst);
            let url = self.page.url.lock().unwrap().clone();
            Some(PageSeen {
                title: format!("Title of {url}"),
                url,
            })
        })
    }

    fn page_screenshot(&self) -> BoxFuture<'_, Option<Image>> {
        Box::pin(async {
            self.page.pictures.fetch_add(1, Ordering::SeqCst);
            Some(real_png(1280, 2000))
        })
    }
}

/// A driver whose session is the stand-in browser on `page`.
fn browser_of(page: &Arc<Page>) -> OneTool<impl Fn(TaskContext) -> Arc<dyn Tool> + use<>> {
    let page = Arc::clone(page);
    OneTool(move |context| {
        Arc::new(Browser {
            page: Arc::clone(&page),
            context,
        }) as Arc<dyn Tool>
    })
}

fn browse(words: &[&str]) -> ScriptedCall {
    call("browser", json!({ "args": words }))
}

fn runner(turns: Vec<ScriptedTurn>, max_steps: usize) -> (TaskRunner, Arc<Page>) {
    let page = Arc::new(Page::default());
    let limits = TaskLimits {
        max_steps,
        ..TaskLimits::default()
    };
    let model = ScriptedModel::new(Script { turns });
    let runner = TaskRunner::new(Arc::new(browser_of(&page)), Arc::new(model), limits).unwrap();
    (runner, page)
}

fn signed_in_request() -> TaskRequest {
    let secret = Secret::new("password", PASSWORD.to_owned(), ["shop.example"]).unwrap();
    TaskRequest {
        task: "Sign in and look around".into(),
        url: Some("https://shop.example/".into()),
        scope: Scope::parse(["shop.example"], Vec::<String>::new()).unwrap(),
        secrets: Secrets::new(vec![secret]).unwrap(),
        state: None,
        return_state: false,
        uploads: Uploads::default(),
        max_download_bytes: None,
        route: None,
        output_schema: None,
        browser: airlock_worker::BrowserSettings::default(),
    }
}

fn script() -> Vec<ScriptedTurn> {
    let mut first = turn(
        "Opening the shop.",
        vec![
            browse(&["open", "https://shop.example/"]),
            browse(&["snapshot"]),
        ],
    );
    first.usage = Usage {
        input_tokens: 1200,
        output_tokens: 40,
        ..Usage::default()
    };
    vec![
        first,
        turn(
            "",
            vec![
                browse(&["fill", "#password", "{{secret:password}}"]),
                browse(&["cookies"]),
                browse(&["click", "#missing"]),
                call("no_such_tool", json!({})),
                browse(&["open", "https://shop.example/account"]),
                browse(&["screenshot"]),
            ],
        ),
        turn("Signed in; the account page greets the user.", vec![]),
    ]
}

async fn recorded(runner: &TaskRunner) -> (TaskResult, FlightRecord) {
    runner
        .run_recorded(
            signed_in_request(),
            CancellationToken::new(),
            None,
            &TaskWindow::default(),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_recorded_task_keeps_every_step_its_verdict_page_and_thumbnails() {
    let (runner, page) = runner(script(), 40);
    let (result, record) = recorded(&runner).await;
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(record.ended, Ended::Completed);
    assert_eq!(record.format, RECORD_FORMAT);
    assert_eq!(record.report, result.report);

    let steps = &record.steps;
    assert_eq!(steps.len(), 8, "{steps:#?}");
    assert_eq!(steps[0].command, ["open", "https://shop.example/"]);
    assert_eq!(steps[0].turn, 1);
    assert_eq!(steps[2].turn, 2);
    // The placeholder as the worker wrote it, never the value.
    assert_eq!(
        steps[2].command,
        ["fill", "#password", "{{secret:password}}"]
    );
    let verdicts: Vec<&Verdict> = steps.iter().map(|step| &step.verdict).collect();
    assert_eq!(verdicts[0], &Verdict::Ran);
    assert_eq!(
        verdicts[3],
        &Verdict::Refused {
            reason: "cookies are not read in a task.".into()
        }
    );
    assert_eq!(
        verdicts[4],
        &Verdict::Failed {
            reason: "agent-browser exited with status 1".into()
        }
    );
    assert!(
        matches!(verdicts[5], Verdict::NotRun { .. }),
        "{verdicts:?}"
    );

    // Every browser step has the page it left; a thumbnail where the URL changed (the first
    // open, the second open) or a screenshot was taken, and nowhere else.
    assert_eq!(steps[1].page.as_ref().unwrap().url, "https://shop.example/");
    assert_eq!(
        steps[6].page.as_ref().unwrap().title,
        "Title of https://shop.example/account"
    );
    let causes: Vec<Option<ThumbnailCause>> = steps
        .iter()
        .map(|step| step.thumbnail.as_ref().map(|thumbnail| thumbnail.cause))
        .collect();
    assert_eq!(
        causes,
        [
            Some(Navigation),
            None,
            None,
            None,
            None,
            None,
            Some(Navigation),
            Some(Screenshot)
        ]
    );
    for thumbnail in steps.iter().filter_map(|step| step.thumbnail.as_ref()) {
        let decoded = image::load_from_memory(&thumbnail.image.data).unwrap();
        assert!(decoded.width().max(decoded.height()) <= THUMBNAIL_SIDE);
    }
    assert_eq!(page.pictures.load(Ordering::SeqCst), 2);

    assert_eq!(record.turns.len(), 3);
    assert_eq!(record.turns[0].usage.input_tokens, 1200);
    assert_eq!(record.turns[0].tool_calls, 2);
    assert_eq!(record.turns[1].tool_calls, 6);
    assert!(record.turns[1].chars_shown_before > 0);

    // Neither the secret nor the value learned after it was shown is anywhere in the record.
    let json = serde_json::to_string(&record).unwrap();
    assert!(!json.contains(PASSWORD) && !json.contains(COOKIE), "{json}");
    assert!(json.contains("[secret:password]"), "{json}");
}

#[tokio::test]
async fn a_task_not_recorded_never_looks_at_the_page() {
    let (runner, page) = runner(script(), 40);
    let result = runner
        .run(signed_in_request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(page.looks.load(Ordering::SeqCst), 0);
    assert_eq!(page.pictures.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn calls_past_the_step_limit_are_recorded_as_not_run() {
    let (runner, _page) = runner(script(), 3);
    let (result, record) = recorded(&runner).await;
    assert_eq!(result.ended, Ended::StepLimit);
    let not_run = record
        .steps
        .iter()
        .filter(|step| matches!(step.verdict, Verdict::NotRun { .. }))
        .count();
    assert_eq!(result.steps_used, 3);
    assert_eq!(not_run, 5, "{:#?}", record.steps);
}

#[tokio::test]
async fn an_egress_refusal_names_the_step_whose_command_reported_it() {
    let (runner, _) = runner(
        vec![
            turn("", vec![browse(&["open", "https://shop.example/"])]),
            turn("", vec![browse(&["hover", "@e1"])]),
            turn("Done.", vec![]),
        ],
        10,
    );
    let (result, record) = recorded(&runner).await;
    assert_eq!(
        record.egress.refusals[0].step,
        Some(2),
        "{:?}",
        record.egress
    );
    assert_eq!(result.egress_refusals[0].step, Some(2));
}
