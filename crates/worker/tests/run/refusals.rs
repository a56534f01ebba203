//! What never reaches the worker, and the inputs a runner refuses.

use super::*;

/// Secrets and host details that must never reach the worker, in errors of either kind.
const SECRETS: &[(&str, &str)] = &[
    (
        "upstream said: Authorization: Bearer sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA",
        "sk-ant-api03",
    ),
    (
        "request failed with key sk-proj-abcdefghijklmnopqrstuvwxyz123456",
        "abcdefghijklmnop",
    ),
    (
        "Cookie: session=0123456789abcdef; other=1",
        "0123456789abcdef",
    ),
    (
        "GET https://admin:hunter2@internal.example/ failed",
        "hunter2",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzzz\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA",
    ),
    (
        "could not open /home/alice/.config/airlock/airlock.toml",
        "/home/alice",
    ),
    (
        "socket /tmp/airlock-egress-Xa81/proxy.sock refused",
        "airlock-egress-Xa81",
    ),
    (
        "aws creds AKIAIOSFODNN7EXAMPLE leaked",
        "AKIAIOSFODNN7EXAMPLE",
    ),
    ("token=ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ghp_aaaa"),
    ("password: correct-horse-battery", "correct-horse"),
    (
        "thread 'main' panicked at src/main.rs:10:5:\nboom\nstack backtrace:\n 0: std::panicking",
        "src/main.rs",
    ),
    ("x-api-key: 5f2b9c7e8d", "5f2b9c7e8d"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiJ9",
    ),
];

#[tokio::test]
async fn secrets_never_reach_the_worker() {
    let mut turns = Vec::new();
    for (message, _) in SECRETS {
        turns.push(turn(
            "",
            vec![
                call("fail", json!({"message": message})),
                call("refuse", json!({"message": message})),
            ],
        ));
    }
    turns.push(turn("done", vec![]));
    let setup = setup(turns, TaskLimits::default());
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    let requests = setup.model.requests();
    // What tools returned (the worker's own calls carry the messages as input, by construction).
    let results: Vec<&Message> = requests
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| matches!(m, Message::ToolResults { .. }))
        .collect();
    let everything_shown = serde_json::to_string(&results).unwrap();
    for (message, secret) in SECRETS {
        assert!(
            !everything_shown.contains(secret),
            "`{secret}` from `{message}` reached the worker"
        );
    }
    assert!(everything_shown.contains("The tool failed unexpectedly"));
    // Refusal texts keep their meaning around the redaction.
    assert!(
        everything_shown.contains("could not open [path]"),
        "{everything_shown}"
    );
}

#[test]
fn scrub_keeps_ordinary_text_and_urls() {
    let text = "The egress proxy refused http://10.0.0.5/: private address 10.0.0.5 (10.0.0.0/8). See https://example.com/home/tmp/page";
    assert_eq!(scrub(text), text);
}

#[tokio::test]
async fn an_unknown_tool_and_a_failing_model_are_reported() {
    let setup = setup(
        vec![turn("", vec![call("teleport", json!({}))])],
        TaskLimits::default(),
    );
    let result = run(&setup).await;
    // The script ends after one turn: the model fails, and says why.
    assert_eq!(result.ended, Ended::Failed);
    assert!(
        result.report.contains("the script has no turn 2"),
        "{}",
        result.report
    );
    let requests = setup.model.requests();
    let Message::ToolResults { results } = requests[1].messages.last().unwrap() else {
        panic!()
    };
    assert!(results[0].is_error);
    assert!(
        results[0]
            .text()
            .contains("There is no tool named `teleport`")
    );
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 1);
}

#[test]
fn limits_are_validated_with_the_option_and_its_range() {
    let error = |limits: TaskLimits| limits.validate().unwrap_err().to_string();
    assert_eq!(
        error(TaskLimits {
            max_steps: 0,
            ..TaskLimits::default()
        }),
        "`max_steps` is 0: use a value from 1 to 500"
    );
    assert_eq!(
        error(TaskLimits {
            timeout: Duration::from_secs(1),
            ..TaskLimits::default()
        }),
        "`timeout` is 1: use a value from 5 to 3600 seconds"
    );
    assert_eq!(
        error(TaskLimits {
            max_screenshot_bytes: 11 * 1024 * 1024,
            ..TaskLimits::default()
        }),
        "`max_screenshot_bytes` is 11534336: use a value from 1024 to 10485760 bytes"
    );
    assert!(
        error(TaskLimits {
            max_output_chars: 10,
            ..TaskLimits::default()
        })
        .contains("max_output_chars")
    );
    assert!(
        error(TaskLimits {
            max_concurrent_tasks: 0,
            ..TaskLimits::default()
        })
        .contains("max_concurrent_tasks")
    );
    assert!(
        error(TaskLimits {
            max_screenshots: 21,
            ..TaskLimits::default()
        })
        .contains("max_screenshots")
    );
    assert!(TaskLimits::default().validate().is_ok());
}

#[tokio::test]
async fn an_empty_task_is_refused() {
    let setup = setup(vec![], TaskLimits::default());
    let error = setup
        .runner
        .run(
            TaskRequest {
                task: "  ".into(),
                url: None,
                scope: Scope::default(),
                secrets: Secrets::default(),
                state: None,
                return_state: false,
                uploads: Uploads::default(),
                max_download_bytes: None,
                route: None,
                output_schema: None,
                browser: airlock_worker::BrowserSettings::default(),
            },
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, RunError::EmptyTask));
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_download_budget_of_nothing_or_past_the_ceiling_is_refused_before_any_browser() {
    for given in [0, airlock_worker::MAX_DOWNLOAD_BYTES_CEILING + 1] {
        let setup = setup(vec![], TaskLimits::default());
        let error = setup
            .runner
            .run(
                TaskRequest {
                    max_download_bytes: Some(given),
                    route: None,
                    output_schema: None,
                    browser: airlock_worker::BrowserSettings::default(),
                    ..request()
                },
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(error, RunError::DownloadLimit { given: g } if g == given),
            "{error}"
        );
        assert!(
            error.to_string().starts_with("max_download_bytes is"),
            "{error}"
        );
        assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 0);
    }
}

/// An answer that looks like a call written as text but is not exactly one (a local model's
/// habit) is no report: the worker is told how to write a call, and the task goes on. After
/// two in a row, such an answer is taken as the report, so a model that never learns still ends.
#[tokio::test]
async fn a_call_written_as_text_that_is_not_one_is_corrected_not_taken_as_the_report() {
    let broken = "{\"name\": \"echo\", \"arguments\": {\"text\": \"x\"}}.";
    let corrected = setup(
        vec![
            turn(broken, vec![]),
            expecting(
                turn("", vec![call("echo", json!({"text": "page text"}))]),
                shown(&["not exactly one call", "nothing ran"]),
            ),
            expecting(
                turn("The page says page text.", vec![]),
                shown(&["page text"]),
            ),
        ],
        TaskLimits::default(),
    );
    let result = run(&corrected).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.report, "The page says page text.");
    assert_eq!(result.steps_used, 1);

    let stubborn = setup(
        vec![
            turn(broken, vec![]),
            turn(broken, vec![]),
            turn(broken, vec![]),
        ],
        TaskLimits::default(),
    );
    let result = run(&stubborn).await;
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(result.report, broken);
    assert_eq!(stubborn.model.requests().len(), 3);
}

/// agent-browser command lines written as text (what its own guide shows) ran nothing: the
/// worker is told the call its first line would be, and an empty answer is told to call or
/// report; two such answers in a row at most, and then the last is the report.
#[tokio::test]
async fn command_lines_and_empty_answers_are_corrected_within_a_bound() {
    let lines = "I will do this:\n```bash\nagent-browser open https://example.com/\nagent-browser snapshot -i\n```";
    let corrected = setup(
        vec![
            turn(lines, vec![]),
            expecting(
                turn("", vec![]),
                shown(&[
                    "no shell",
                    "{\"name\": \"echo\", \"arguments\": {\"args\": [\"open\",\"https://example.com/\"]}}",
                ]),
            ),
            expecting(
                turn("", vec![call("echo", json!({"text": "page text"}))]),
                shown(&["That answer was empty"]),
            ),
            turn("The page says page text.", vec![]),
        ],
        TaskLimits::default(),
    );
    let result = run(&corrected).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.report, "The page says page text.");

    // A third miss in a row is not corrected: the empty answer ends the task as before.
    let stubborn = setup(
        vec![turn(lines, vec![]), turn("", vec![]), turn("", vec![])],
        TaskLimits::default(),
    );
    let result = run(&stubborn).await;
    assert_eq!(result.report, "The worker ended without writing a report.");
    assert_eq!(stubborn.model.requests().len(), 3);
}

/// A model in a loop is told so from the third identical call in a row, and the result of the
/// call that spends the last step says to write the report.
#[tokio::test]
async fn repeated_calls_and_the_last_step_are_noted_after_the_result() {
    let same = || call("echo", json!({"text": "unchanged"}));
    let setup = setup(
        vec![
            turn("", vec![same()]),
            expecting(turn("", vec![same()]), shown_not(&["same call"])),
            expecting(turn("", vec![same()]), shown_not(&["same call"])),
            expecting(
                turn("", vec![call("echo", json!({"text": "other"}))]),
                shown(&["unchanged", "the same call 3 times in a row"]),
            ),
            expecting(
                turn("Done.", vec![]),
                shown(&["other", "that was step 4 of 4, your last"]),
            ),
        ],
        TaskLimits {
            max_steps: 4,
            ..TaskLimits::default()
        },
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
    assert_eq!(result.steps_used, 4);
}

fn shown_not(needles: &[&str]) -> Expectation {
    Expectation {
        shown_not_contains: needles.iter().map(|s| (*s).to_owned()).collect(),
        ..Expectation::default()
    }
}

/// A model that writes its calls as text is told, after each turn's results, its task again
/// with what it did so far; a model that calls tools the API's way is not.
#[tokio::test]
async fn a_model_writing_calls_as_text_is_reminded_of_its_task_after_each_turn() {
    let echo = || call("echo", json!({"text": "zebra"}));
    let as_text = |mut turn: ScriptedTurn| {
        turn.call_read_from_text = true;
        turn
    };
    let local = setup(
        vec![
            as_text(turn("", vec![echo()])),
            expecting(
                as_text(turn("", vec![echo()])),
                // A message of its own: the tool's output ("zebra") is in the one before.
                Expectation {
                    shown_not_contains: vec!["zebra".into()],
                    ..shown(&["Your task: Find the answer\nDone so far (1 of 40 steps): 1. echo."])
                },
            ),
            expecting(
                turn("Done.", vec![]),
                shown(&["Done so far (2 of 40 steps): 1. echo; 2. echo."]),
            ),
        ],
        TaskLimits::default(),
    );
    assert_eq!(run(&local).await.ended, Ended::Completed);

    let native = setup(
        vec![
            turn("", vec![echo()]),
            expecting(turn("Done.", vec![]), shown_not(&["Your task:"])),
        ],
        TaskLimits::default(),
    );
    assert_eq!(run(&native).await.ended, Ended::Completed);
}

/// A tool that drives a page and can be asked for a look at it.
struct Looking;

impl Tool for Looking {
    fn definition(&self) -> ToolDefinition {
        stand_in_definition()
    }

    fn execute(&self, _input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async { Ok(ToolOutput::text("opened")) })
    }

    fn look(&self) -> BoxFuture<'_, Option<Result<ToolOutput, ToolFailure>>> {
        Box::pin(async { Some(Ok(ToolOutput::text("- button \"No\" [ref=e4]"))) })
    }
}

/// The reminder of a model that writes calls as text shows the page as it is now, unless the
/// turn ended with a snapshot of its own.
#[tokio::test]
async fn a_text_caller_is_shown_the_page_after_each_turn_unless_it_just_looked() {
    let model = ScriptedModel::new(Script {
        turns: vec![
            ScriptedTurn {
                call_read_from_text: true,
                ..turn(
                    "",
                    vec![call(
                        "browser",
                        json!({"args": ["open", "https://example.com/"]}),
                    )],
                )
            },
            ScriptedTurn {
                call_read_from_text: true,
                expect: shown(&[
                    "The page now (snapshot -i):\n- button \"No\" [ref=e4]",
                    "1. open https://example.com/.",
                ]),
                ..turn(
                    "",
                    vec![call("browser", json!({"args": ["snapshot", "-i"]}))],
                )
            },
            expecting(turn("Done.", vec![]), shown_not(&["The page now"])),
        ],
    });
    let runner = TaskRunner::new(
        Arc::new(OneTool(|_| Arc::new(Looking) as Arc<dyn Tool>)),
        Arc::new(model),
        TaskLimits::default(),
    )
    .unwrap();
    let result = runner
        .run(request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result.ended, Ended::Completed, "{}", result.report);
}
