//! The start page: a task given a URL finds it open, its elements in the first message, without
//! spending a step; the opening is in the record at turn 0; a refused opening is told to the
//! model in the browser's own words; a tool that opens nothing leaves the old first message.

use std::sync::{Arc, Mutex};

use airlock_worker::*;
use serde_json::{Value, json};

use super::{OneTool, call, expecting, request, shown, stand_in_definition, turn};

/// A browser that opens any URL but `refused`, and shows one button.
struct Browser {
    opened: Arc<Mutex<Vec<String>>>,
    refused: Option<&'static str>,
    context: TaskContext,
}

impl Tool for Browser {
    fn definition(&self) -> ToolDefinition {
        stand_in_definition()
    }

    fn execute(&self, input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            let words: Vec<String> = serde_json::from_value(input["args"].clone()).unwrap();
            Ok(match words.as_slice() {
                [open, url] if open == "open" && Some(url.as_str()) == self.refused => {
                    ToolOutput::refused("that address is not public.")
                }
                [open, url] if open == "open" => {
                    self.opened.lock().unwrap().push(url.clone());
                    ToolOutput::text("opened")
                }
                _ => {
                    // The page asks for a private address meanwhile; the proxy refuses it.
                    self.context.record_refusal(EgressRefusal::now(
                        "10.0.0.1:80",
                        "private",
                        "a private address",
                    ));
                    ToolOutput::text("Done")
                }
            })
        })
    }

    fn look(&self) -> BoxFuture<'_, Option<Result<ToolOutput, ToolFailure>>> {
        Box::pin(async { Some(Ok(ToolOutput::text("- button \"Next\" [ref=e7]"))) })
    }

    fn opening(&self, url: &str) -> Option<Value> {
        Some(json!({ "args": ["open", url] }))
    }
}

fn runner(
    turns: Vec<ScriptedTurn>,
    refused: Option<&'static str>,
) -> (TaskRunner, Arc<Mutex<Vec<String>>>) {
    let opened = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&opened);
    let driver = Arc::new(OneTool(move |context| {
        Arc::new(Browser {
            opened: Arc::clone(&seen),
            refused,
            context,
        }) as Arc<dyn Tool>
    }));
    let model = ScriptedModel::new(Script { turns });
    let runner = TaskRunner::new(driver, Arc::new(model), TaskLimits::default()).unwrap();
    (runner, opened)
}

#[tokio::test]
async fn the_start_page_is_open_and_shown_before_the_first_turn_at_no_step() {
    let first = expecting(
        turn("", vec![call("browser", json!({"args": ["click", "@e7"]}))]),
        shown(&[
            "The start page https://example.com/ is open (opening it spent no step)",
            "(snapshot -i):\n- button \"Next\" [ref=e7]",
        ]),
    );
    let (runner, opened) = runner(vec![first, turn("Clicked Next.", vec![])], None);
    let (result, record) = runner
        .run_recorded(
            request(),
            CancellationToken::new(),
            None,
            &TaskWindow::default(),
        )
        .await
        .unwrap();

    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.report, "Clicked Next.");
    assert_eq!(*opened.lock().unwrap(), ["https://example.com/"]);
    // The model's one click is its one step; the opening is the worker's.
    assert_eq!(result.steps_used, 1);
    let steps: Vec<(usize, Vec<String>)> = record
        .steps
        .iter()
        .map(|step| (step.turn, step.command.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            (
                0,
                vec!["open".to_owned(), "https://example.com/".to_owned()]
            ),
            (1, vec!["click".to_owned(), "@e7".to_owned()]),
        ]
    );
}

#[tokio::test]
async fn a_refused_start_page_is_told_in_the_browsers_words_and_the_task_goes_on() {
    let first = expecting(
        turn("Could not open it: it is not public.", vec![]),
        shown(&[
            "Start at: https://example.com/. The worker tried to open it for you",
            "Refused: that address is not public.",
        ]),
    );
    let (runner, opened) = runner(vec![first], Some("https://example.com/"));
    let result = runner
        .run(request(), CancellationToken::new())
        .await
        .unwrap();

    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert!(opened.lock().unwrap().is_empty());
    assert_eq!(result.steps_used, 0);
}
