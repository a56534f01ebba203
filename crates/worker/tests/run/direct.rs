//! A browser driven directly by its caller (`airlock mcp --direct`): outputs held to the task
//! limits, its life to its own (idle time, lifetime, a step limit only when set).

use super::*;

fn text_of(output: &DirectOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn direct(limits: TaskLimits) -> (DirectSession, Arc<Observed>, CancellationToken) {
    living(limits, DirectLimits::default()).await
}

async fn living(
    limits: TaskLimits,
    life: DirectLimits,
) -> (DirectSession, Arc<Observed>, CancellationToken) {
    let observed = Arc::new(Observed::default());
    let driver = FakeDriver {
        observed: Arc::clone(&observed),
    };
    let cancel = CancellationToken::new();
    let session = DirectSession::start(&driver, limits, life, Scope::default(), &cancel)
        .await
        .unwrap();
    (session, observed, cancel)
}

#[tokio::test]
async fn a_direct_session_shows_output_as_a_worker_would_see_it() {
    let limits = TaskLimits {
        max_output_chars: 1000,
        max_screenshot_bytes: 2048,
        ..TaskLimits::default()
    };
    let (session, observed, _) = direct(limits).await;
    let long = session
        .call("echo", json!({"text": "word ", "repeat": 1000}))
        .await;
    assert!(!long.is_error);
    let shown = text_of(&long);
    assert!(
        shown.len() < 1400 && shown.contains("out-1: this output has 5000 characters"),
        "{shown}"
    );
    assert_eq!(
        session.read_output_definition().unwrap().name,
        "read_output"
    );
    let rest = session
        .call("read_output", json!({"id": "out-1", "offset": 4_990}))
        .await;
    assert!(!rest.is_error);
    assert!(text_of(&rest).ends_with("word word "), "{}", text_of(&rest));
    let context = session.context_use();
    assert_eq!((context.outputs_kept, context.output_reads), (1, 1));

    let secret = session
        .call(
            "refuse",
            json!({"message": "denied with password=hunter22 at /home/alice/x"}),
        )
        .await;
    assert!(secret.is_error);
    let shown = text_of(&secret);
    assert!(
        !shown.contains("hunter22") && !shown.contains("alice"),
        "{shown}"
    );

    let failed = session
        .call(
            "fail",
            json!({"message": "socket /var/run/docker.sock: EACCES"}),
        )
        .await;
    assert!(failed.is_error);
    assert!(text_of(&failed).contains("failed unexpectedly"));
    assert!(!text_of(&failed).contains("docker.sock"));

    let big = session.call("shot", json!({"bytes": 4096})).await;
    assert!(
        big.content.iter().all(|c| c.as_text().is_some()),
        "an oversized image was shown"
    );
    assert!(text_of(&big).contains("over the 2048-byte limit"));
    let small = session.call("shot", json!({"bytes": 100})).await;
    assert_eq!(
        small
            .content
            .iter()
            .filter(|c| c.as_text().is_none())
            .count(),
        1
    );
    session.end().await;
    session.end().await;
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1, "disposed once");
    let after = session.call("echo", json!({"text": "x"})).await;
    assert!(after.is_error && text_of(&after).contains("browser is gone"));
}

#[tokio::test]
async fn a_direct_session_has_no_step_limit_unless_one_is_set() {
    // The task's step limit does not apply: an agent driving its own browser makes many calls.
    let limits = TaskLimits {
        max_steps: 2,
        ..TaskLimits::default()
    };
    let (session, observed, _) = direct(limits).await;
    for _ in 0..5 {
        assert!(!session.call("echo", json!({"text": "x"})).await.is_error);
    }
    assert_eq!(observed.tool_started.load(Ordering::SeqCst), 5);
    session.end().await;

    let life = DirectLimits {
        max_steps: Some(2),
        ..DirectLimits::default()
    };
    let (session, observed, _) = living(TaskLimits::default(), life).await;
    for _ in 0..2 {
        assert!(!session.call("echo", json!({"text": "x"})).await.is_error);
    }
    let third = session.call("echo", json!({"text": "x"})).await;
    assert!(third.is_error && text_of(&third).contains("direct_max_steps"));
    assert_eq!(observed.tool_started.load(Ordering::SeqCst), 2);
    session.end().await;
}

#[tokio::test(start_paused = true)]
async fn a_direct_session_lasts_while_used_and_ends_when_left_idle() {
    let life = DirectLimits {
        idle: Duration::from_secs(60),
        lifetime: Duration::from_secs(3600),
        max_steps: None,
    };
    let (session, observed, _) = living(TaskLimits::default(), life).await;
    // Used every 50 s for 20 minutes: four times the task time limit, never idle for 60 s.
    for _ in 0..24 {
        tokio::time::sleep(Duration::from_secs(50)).await;
        assert!(!session.call("echo", json!({"text": "x"})).await.is_error);
    }
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 0);
    // A command running longer than the idle time does not count as idle.
    let hung = tokio::time::timeout(Duration::from_secs(90), session.call("hang", json!({}))).await;
    assert!(hung.is_err(), "the command still ran after 90 s");
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 0);
    // Left alone: gone after its idle time, and the next call says why.
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
    let late = session.call("echo", json!({"text": "x"})).await;
    assert!(
        late.is_error && text_of(&late).contains("idle for 60 s (direct_idle_timeout)"),
        "{late:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_direct_session_ends_at_its_lifetime_with_or_without_calls() {
    let life = DirectLimits {
        idle: Duration::from_secs(600),
        lifetime: Duration::from_secs(5),
        max_steps: None,
    };
    // Idle: the browser goes at its lifetime although no call comes.
    let (idle, observed, _) = living(TaskLimits::default(), life).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
    let late = idle.call("echo", json!({"text": "x"})).await;
    assert!(late.is_error && text_of(&late).contains("lifetime of 5 s"));

    // Busy: a command still running at the lifetime is stopped, and the browser goes.
    let (busy, observed, _) = living(TaskLimits::default(), life).await;
    let hung = busy.call("hang", json!({})).await;
    assert!(
        hung.is_error && text_of(&hung).contains("ran out"),
        "{hung:?}"
    );
    tokio::task::yield_now().await;
    busy.end().await;
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancelling_a_direct_session_disposes_its_browser() {
    let (session, observed, cancel) = direct(TaskLimits::default()).await;
    cancel.cancel();
    // The watchdog disposes on cancellation; ending again waits for nothing new.
    session.end().await;
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
}
