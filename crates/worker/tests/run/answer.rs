//! A task with an output schema: the worker is offered `give_answer` with the caller's schema,
//! ends only on an answer that matches, is told each mismatch by its path, and after its tries
//! the task ends with no data rather than unchecked data. The answer is scrubbed like the report.

use super::*;

fn hours_schema() -> OutputSchema {
    OutputSchema::new(json!({
        "type": "object",
        "properties": {
            "shop": {"type": "string"},
            "hours": {"type": "array", "items": {"$ref": "#/$defs/hour"}}
        },
        "required": ["shop", "hours"],
        "additionalProperties": false,
        "$defs": {"hour": {"type": "integer", "minimum": 0, "maximum": 24}}
    }))
    .unwrap()
}

fn answering(data: &Value, report: &str) -> ScriptedCall {
    call(GIVE_ANSWER, json!({"data": data, "report": report}))
}

async fn run_with_schema(setup: &Setup, schema: OutputSchema) -> TaskResult {
    let request = TaskRequest {
        output_schema: Some(schema),
        browser: airlock_worker::BrowserSettings::default(),
        ..request()
    };
    setup
        .runner
        .run(request, CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_matching_answer_ends_the_task_with_its_data_beside_the_report() {
    let data = json!({"shop": "Corner Books", "hours": [9, 17]});
    let setup = setup(
        vec![
            turn("", vec![call("echo", json!({"text": "Open 9 to 17"}))]),
            turn(
                "",
                vec![answering(&data, "Open 9 to 17, per the shop's page.")],
            ),
        ],
        TaskLimits::default(),
    );
    let result = run_with_schema(&setup, hours_schema()).await;
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(result.data, Some(data));
    assert_eq!(result.report, "Open 9 to 17, per the shop's page.");
    assert_eq!(result.steps_used, 1, "handing in the answer is not a step");
    let first = &setup.model.requests()[0];
    let offered = first
        .tools
        .iter()
        .find(|tool| tool.name == GIVE_ANSWER)
        .expect("give_answer is offered");
    assert_eq!(
        offered.input_schema["properties"]["data"]["properties"]["hours"]["items"]["$ref"],
        "#/$defs/hour"
    );
    assert_eq!(offered.input_schema["$defs"]["hour"]["maximum"], 24);
    let Message::User { content } = &first.messages[0] else {
        panic!("the task's message comes first");
    };
    let text: String = content.iter().filter_map(Content::as_text).collect();
    assert!(text.contains("call give_answer with `data`"), "{text}");
    // A task without a schema is offered no such tool, and its result has no data.
    let plain = setup_plain().await;
    assert!(
        plain.0.iter().all(|name| name != GIVE_ANSWER),
        "{:?}",
        plain.0
    );
    assert_eq!(plain.1.data, None);
    assert!(
        serde_json::to_value(&plain.1)
            .unwrap()
            .get("data")
            .is_none(),
        "no `data` key without a schema"
    );
}

async fn setup_plain() -> (Vec<String>, TaskResult) {
    let setup = setup(vec![turn("done", vec![])], TaskLimits::default());
    let result = run(&setup).await;
    let names = setup.model.requests()[0]
        .tools
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    (names, result)
}

#[tokio::test]
async fn each_mismatch_is_told_by_its_path_and_a_corrected_answer_is_taken() {
    let wrong = json!({"shop": "Corner Books", "hours": [9, 25], "phone": "n/a"});
    let right = json!({"shop": "Corner Books", "hours": [9, 17]});
    let setup = setup(
        vec![
            // With another call in the same turn: that one is not run.
            turn(
                "",
                vec![answering(&wrong, "r"), call("echo", json!({"text": "x"}))],
            ),
            expecting(
                turn("", vec![answering(&right, "Open 9 to 17.")]),
                shown(&[
                    "does not match the schema",
                    "at `data/hours/1`",
                    "at `data/`",
                    "2 more tries allowed",
                    "Not run: give_answer was called in the same turn",
                ]),
            ),
        ],
        TaskLimits::default(),
    );
    let result = run_with_schema(&setup, hours_schema()).await;
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(result.data, Some(right));
    assert_eq!(
        setup.observed.tool_started.load(Ordering::SeqCst),
        0,
        "a call beside an answer does not run"
    );
}

#[tokio::test]
async fn a_report_written_instead_is_sent_back_and_the_tries_run_out_without_data() {
    let wrong = json!({"shop": 7, "hours": []});
    let setup = setup(
        vec![
            turn("They open at nine.", vec![]),
            expecting(
                turn("", vec![answering(&wrong, "r")]),
                shown(&["a report alone does not end it", "2 more tries allowed"]),
            ),
            expecting(
                turn("", vec![answering(&wrong, "r")]),
                shown(&["at `data/shop`", "1 more try allowed"]),
            ),
            turn("never asked for", vec![]),
        ],
        TaskLimits::default(),
    );
    let result = run_with_schema(&setup, hours_schema()).await;
    assert_eq!(result.ended, Ended::NoValidAnswer);
    assert_eq!(result.data, None, "no data the schema did not pass");
    assert!(
        result
            .report
            .starts_with("No answer matching the schema after 3 tries"),
        "{}",
        result.report
    );
    assert!(
        result.report.contains("at `data/shop`"),
        "{}",
        result.report
    );
    assert_eq!(setup.model.requests().len(), 3);
    let ended = serde_json::to_value(result.ended).unwrap();
    assert_eq!(ended, "no_valid_answer");
}

#[tokio::test]
async fn after_the_last_step_the_answer_is_still_taken() {
    let data = json!({"shop": "Corner Books", "hours": [10]});
    let setup = setup(
        vec![
            turn("", vec![call("echo", json!({"text": "Open at 10"}))]),
            turn("", vec![call("echo", json!({"text": "more"}))]),
            turn("", vec![answering(&data, "Opens at 10.")]),
        ],
        TaskLimits {
            max_steps: 1,
            ..TaskLimits::default()
        },
    );
    let result = run_with_schema(&setup, hours_schema()).await;
    assert_eq!(result.ended, Ended::StepLimit);
    assert_eq!(result.data, Some(data));
}

#[tokio::test]
async fn the_answer_is_scrubbed_of_the_tasks_secrets() {
    const PASSWORD: &str = "hunter2-hunter2";
    let schema = OutputSchema::new(json!({
        "type": "object",
        "properties": {"note": {"type": "string"}},
        "required": ["note"]
    }))
    .unwrap();
    let setup = setup(
        vec![turn(
            "",
            vec![answering(
                &json!({"note": format!("the password is {PASSWORD}")}),
                "done",
            )],
        )],
        TaskLimits::default(),
    );
    let secret = Secret::new("shop_pw", PASSWORD.into(), ["shop.example"]).unwrap();
    let request = TaskRequest {
        scope: Scope::parse(["shop.example"], Vec::<String>::new()).unwrap(),
        secrets: Secrets::new(vec![secret]).unwrap(),
        url: Some("https://shop.example/".into()),
        output_schema: Some(schema),
        browser: airlock_worker::BrowserSettings::default(),
        ..request()
    };
    let result = setup
        .runner
        .run(request, CancellationToken::new())
        .await
        .unwrap();
    let note = result.data.unwrap()["note"].as_str().unwrap().to_owned();
    assert!(!note.contains(PASSWORD), "{note}");
    assert!(note.contains("[secret:shop_pw]"), "{note}");
}
