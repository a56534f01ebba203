//! A call for a person's help: the worker is offered `ask_human` only where a desk is staffed;
//! the task waits at the desk with its own time standing still, and resumes with a fresh look at
//! the page and what the person did (counted, never typed text); nobody coming ends the wait at
//! the human timeout. Time here is Tokio's paused clock, so the waits cost nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_worker::*;
use serde_json::{Value, json};

use super::{OneTool, call, expecting, request, shown, stand_in_definition, turn};

/// A browser whose button a person presses (through the desk, as serve's live view would).
#[derive(Default)]
struct Page {
    pressed: AtomicUsize,
}

struct Browser(Arc<Page>);

impl Tool for Browser {
    fn definition(&self) -> ToolDefinition {
        stand_in_definition()
    }

    fn execute(&self, _: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async { Ok(ToolOutput::text("opened")) })
    }

    fn look(&self) -> BoxFuture<'_, Option<Result<ToolOutput, ToolFailure>>> {
        Box::pin(async {
            let pressed = self.0.pressed.load(Ordering::SeqCst);
            Some(Ok(ToolOutput::text(format!(
                "button \"Pressed {pressed} times\""
            ))))
        })
    }
}

/// A task limited to 5 seconds whose worker asks for help, then goes on with `then`.
fn runner(then: Vec<ScriptedTurn>, human_timeout: Duration) -> (TaskRunner, Arc<Page>) {
    let page = Arc::new(Page::default());
    let limits = TaskLimits {
        timeout: Duration::from_secs(5),
        human_timeout,
        ..TaskLimits::default()
    };
    let mut turns = vec![turn("", vec![ask()])];
    turns.extend(then);
    let model = ScriptedModel::new(Script { turns });
    let shown = Arc::clone(&page);
    let driver = Arc::new(OneTool(move |_| {
        Arc::new(Browser(Arc::clone(&shown))) as Arc<dyn Tool>
    }));
    (
        TaskRunner::new(driver, Arc::new(model), limits).unwrap(),
        page,
    )
}

fn ask() -> ScriptedCall {
    call("ask_human", json!({"reason": "Solve the CAPTCHA"}))
}

fn click() -> HumanInput {
    HumanInput::parse(
        r#"{"type":"input_mouse","eventType":"mousePressed","x":5,"y":5,"button":"left","clickCount":1}"#,
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_task_waits_for_a_person_with_its_time_standing_still_then_sees_their_work() {
    let report = expecting(
        turn("Solved with help.", vec![]),
        shown(&["A person acted", "1 click, 2 keys", "Pressed 1 times"]),
    );
    let (runner, page) = runner(vec![report], Duration::from_secs(600));
    let window = TaskWindow {
        help: HelpDesk::staffed(),
        ..TaskWindow::default()
    };
    let desk = window.help.clone();
    let running = tokio::spawn(async move {
        runner
            .run_recorded(request(), CancellationToken::new(), None, &window)
            .await
    });
    desk.changes()
        .wait_for(|state| state.open_call().is_some())
        .await
        .unwrap();
    let asked = desk.call().unwrap();
    assert_eq!(asked.reason, "Solve the CAPTCHA");
    assert_eq!(asked.timeout_secs, 600);
    // Longer than the task's own 5 seconds: the wait does not count against them.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let key = HumanInput::parse(
        r#"{"type":"input_keyboard","eventType":"keyDown","key":"x","text":"x"}"#,
    )
    .unwrap();
    for input in [click(), key.clone(), key] {
        assert!(desk.admit(&input));
    }
    page.pressed.fetch_add(1, Ordering::SeqCst);
    assert!(desk.hand_back());
    let (result, record) = running.await.unwrap().unwrap();
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.report, "Solved with help.");
    let step = &record.steps[0];
    assert_eq!(step.tool, "ask_human");
    let help = step.help.as_ref().unwrap();
    assert_eq!(help.outcome, HelpOutcome::HandedBack);
    assert_eq!(help.reason, "Solve the CAPTCHA");
    assert!(help.waited_ms >= 60_000, "{help:?}");
    assert_eq!(
        help.actions,
        HumanActions {
            clicks: 1,
            keys: 2,
            ..HumanActions::default()
        }
    );
    // What was typed is nowhere in the record.
    let text = serde_json::to_string(&record).unwrap();
    assert!(!text.contains("\"x\""), "{text}");
    assert!(desk.call().is_none());
}

#[tokio::test(start_paused = true)]
async fn nobody_coming_ends_the_wait_at_the_human_timeout() {
    let again = expecting(
        turn("", vec![ask()]),
        shown(&["Nobody came to help within 30 seconds"]),
    );
    // The human timeout bounds the task's waits in all, not each.
    let report = expecting(
        turn("Needs a person for the CAPTCHA.", vec![]),
        shown(&["No time is left for a person in this task"]),
    );
    let (runner, _) = runner(vec![again, report], Duration::from_secs(30));
    let window = TaskWindow {
        help: HelpDesk::staffed(),
        ..TaskWindow::default()
    };
    let (result, record) = runner
        .run_recorded(request(), CancellationToken::new(), None, &window)
        .await
        .unwrap();
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    let help = record.steps[0].help.as_ref().unwrap();
    assert_eq!(help.outcome, HelpOutcome::NobodyCame);
    assert!(help.waited_ms >= 30_000);
    assert!(matches!(record.steps[0].verdict, Verdict::Failed { .. }));
    assert!(
        record.steps[1].help.is_none(),
        "the second call never waited"
    );
    assert!(window.help.call().is_none());
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_task_that_waits_for_a_person_ends_it_and_closes_the_call() {
    let (runner, _) = runner(vec![turn("never", vec![])], Duration::from_secs(600));
    let window = TaskWindow {
        help: HelpDesk::staffed(),
        ..TaskWindow::default()
    };
    let desk = window.help.clone();
    let cancel = CancellationToken::new();
    let running = {
        let cancel = cancel.clone();
        tokio::spawn(async move { runner.run_recorded(request(), cancel, None, &window).await })
    };
    desk.changes()
        .wait_for(|state| state.open_call().is_some())
        .await
        .unwrap();
    // The person clicks, then the task is cancelled: the record keeps the call and the click.
    assert!(desk.admit(&click()));
    cancel.cancel();
    let (result, record) = running.await.unwrap().unwrap();
    assert_eq!(result.ended, Ended::Cancelled);
    assert!(desk.call().is_none());
    assert!(!desk.admit(&click()));
    let help = record.steps[0].help.as_ref().unwrap();
    assert_eq!(help.outcome, HelpOutcome::Cancelled);
    assert_eq!(help.actions.clicks, 1);
}

#[tokio::test]
async fn without_a_person_to_reach_the_worker_has_no_ask_human() {
    let report = expecting(
        turn("Carried on.", vec![]),
        shown(&["There is no tool named `ask_human`"]),
    );
    let (runner, _) = runner(vec![report], Duration::from_secs(600));
    let result = runner
        .run(request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
}
