//! A browser driven directly by its caller (`airlock mcp --direct`).

use super::*;

// A browser driven directly by its caller (`airlock mcp --direct`): the same limits as a task.

fn text_of(output: &DirectOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn direct(limits: TaskLimits) -> (DirectSession, Arc<Observed>, CancellationToken) {
    let observed = Arc::new(Observed::default());
    let driver = FakeDriver {
        observed: Arc::clone(&observed),
    };
    let cancel = CancellationToken::new();
    let session = DirectSession::start(&driver, limits, Scope::default(), &cancel)
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
async fn a_direct_session_counts_its_steps() {
    let limits = TaskLimits {
        max_steps: 2,
        ..TaskLimits::default()
    };
    let (session, observed, _) = direct(limits).await;
    for _ in 0..2 {
        assert!(!session.call("echo", json!({"text": "x"})).await.is_error);
    }
    let third = session.call("echo", json!({"text": "x"})).await;
    assert!(third.is_error && text_of(&third).contains("Step limit reached"));
    assert_eq!(observed.tool_started.load(Ordering::SeqCst), 2);
    session.end().await;
}

#[tokio::test(start_paused = true)]
async fn a_direct_session_ends_at_its_time_limit_with_or_without_calls() {
    let limits = TaskLimits {
        timeout: Duration::from_secs(5),
        ..TaskLimits::default()
    };
    // Idle: the browser goes at the time limit although no call comes.
    let (idle, observed, _) = direct(limits).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(observed.disposed.load(Ordering::SeqCst), 1);
    let late = idle.call("echo", json!({"text": "x"})).await;
    assert!(late.is_error && text_of(&late).contains("time limit of 5 s"));

    // Busy: a command still running at the time limit is stopped, and the browser goes.
    let (busy, observed, _) = direct(limits).await;
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
