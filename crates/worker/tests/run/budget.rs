//! A token budget holds before each request, not after: turns are capped at what is left, a turn
//! that would not fit becomes the report, and a report that cannot fit is not sent.

use super::*;

fn costing(mut turn: ScriptedTurn, input: u64) -> ScriptedTurn {
    turn.usage = Usage {
        input_tokens: input,
        cache_read_tokens: 1_000,
        cache_write_tokens: 100,
        output_tokens: 200,
        thinking_tokens: 50,
    };
    turn
}

fn caps(setup: &Setup) -> Vec<Option<u32>> {
    setup
        .model
        .requests()
        .iter()
        .map(|request| request.max_output_tokens)
        .collect()
}

#[tokio::test]
async fn usage_is_summed_and_calls_past_a_spent_budget_are_refused_with_no_request_after() {
    let limits = TaskLimits {
        max_task_tokens: 50_000,
        ..TaskLimits::default()
    };
    let setup = setup(
        vec![
            costing(
                turn("", vec![call("shot", json!({"bytes": 10, "keep": true}))]),
                20_000,
            ),
            // 21,300 + 31,300 = 52,600: the backend spent more than estimated, so these calls
            // are not run and no report turn fits.
            costing(
                turn(
                    "Halfway: 3 of 5 found.",
                    vec![
                        call("echo", json!({"text": "a"})),
                        call("echo", json!({"text": "b"})),
                    ],
                ),
                30_000,
            ),
            turn("never asked for", vec![]),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::TokenBudget);
    assert!(
        result.report.starts_with(
            "The token budget ran out before the worker could write its report: 52600 of 50000"
        ),
        "{}",
        result.report
    );
    assert!(
        result
            .report
            .ends_with("The worker's last words:\nHalfway: 3 of 5 found."),
        "{}",
        result.report
    );
    assert_eq!(
        setup.model.requests().len(),
        2,
        "nothing sent past the budget"
    );
    assert_eq!(result.steps_used, 1);
    assert_eq!(
        setup.observed.tool_started.load(Ordering::SeqCst),
        1,
        "nothing ran past the budget"
    );
    assert_eq!(result.screenshots.len(), 1, "kept screenshots come back");
    assert_eq!(
        result.usage,
        Usage {
            input_tokens: 50_000,
            cache_read_tokens: 2_000,
            cache_write_tokens: 200,
            output_tokens: 400,
            thinking_tokens: 100,
        }
    );
    let [Some(first), Some(second)] = caps(&setup)[..] else {
        panic!(
            "every request of a budgeted task is capped: {:?}",
            caps(&setup)
        );
    };
    assert!(first < 50_000, "the cap leaves room for the input: {first}");
    assert!(
        second < first - 21_300,
        "the second cap is what is left after the first turn: {first} then {second}"
    );
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_turn_that_would_not_fit_becomes_the_report_with_the_oldest_output_left_out() {
    // Two outputs of 120,000 characters (about 40,000 tokens each, estimated): the request after
    // the first fits in 70,000; the one after the second does not, nor does its report until the
    // first output is left out. (The instructions and tools take a few thousand.)
    let limits = TaskLimits {
        max_task_tokens: 70_000,
        max_output_chars: 200_000,
        ..TaskLimits::default()
    };
    let cheap = |turn: ScriptedTurn| {
        let mut turn = turn;
        turn.usage.input_tokens = 100;
        turn
    };
    let setup = setup(
        vec![
            cheap(turn(
                "",
                vec![call("echo", json!({"text": "alpha ", "repeat": 20_000}))],
            )),
            cheap(turn(
                "",
                vec![call("echo", json!({"text": "bravo ", "repeat": 20_000}))],
            )),
            expecting(
                turn("Report within budget.", vec![]),
                shown(&[
                    "Token budget nearly spent",
                    "200 of its 70000 tokens",
                    "Write your report now",
                ]),
            ),
        ],
        limits,
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::TokenBudget, "{}", result.report);
    assert_eq!(result.report, "Report within budget.");
    assert_eq!(result.steps_used, 2);
    let requests = setup.model.requests();
    assert_eq!(requests.len(), 3);
    let report_turn = format!("{:?}", requests[2].messages);
    assert!(
        !report_turn.contains("alpha alpha"),
        "the oldest output is left out of the report turn"
    );
    assert!(
        report_turn.contains("bravo bravo"),
        "the latest output stays"
    );
    assert!(report_turn.contains("Left out to keep the task within its token budget"));
    let caps = caps(&setup);
    let report_cap = u64::from(caps[2].unwrap());
    assert!(
        (512..70_000 - 200 - 40_000).contains(&report_cap),
        "the report's answer is capped at what is left: {caps:?}"
    );
    assert!(
        u64::from(caps[1].unwrap()) + 40_000 < u64::from(caps[0].unwrap()),
        "the first output's cost came off the second turn's cap: {caps:?}"
    );
}

#[tokio::test]
async fn a_budget_smaller_than_the_first_request_sends_nothing_and_names_the_fix() {
    let limits = TaskLimits {
        max_task_tokens: 50,
        ..TaskLimits::default()
    };
    let setup = setup(vec![turn("never asked for", vec![])], limits);
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::TokenBudget);
    assert!(
        result.report.contains("0 of 50 tokens") && result.report.contains("Raise max_task_tokens"),
        "{}",
        result.report
    );
    assert!(setup.model.requests().is_empty());
    assert_eq!(result.usage.total(), 0);
    assert_eq!(setup.observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn without_a_budget_no_request_is_capped() {
    let setup = setup(
        vec![
            turn("", vec![call("echo", json!({"text": "a"}))]),
            turn("done", vec![]),
        ],
        TaskLimits::default(),
    );
    let result = run(&setup).await;
    assert_eq!(result.ended, Ended::Completed);
    assert_eq!(caps(&setup), vec![None, None]);
}
