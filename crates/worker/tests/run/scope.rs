//! A task's scope reaches the driver, the worker's instructions and the result; what a task adds
//! to the instructions goes into its first message, so the system prompt is the same for all.

use super::*;

#[tokio::test]
async fn a_scoped_task_hands_its_scope_to_the_driver_tells_the_worker_and_reports_it() {
    let setup = setup(vec![turn("done", vec![])], TaskLimits::default());
    let scope = Scope::parse(["shop.example", "*.cdn.example"], ["ads.cdn.example"]).unwrap();
    let request = TaskRequest {
        scope: scope.clone(),
        ..request()
    };
    let result = setup
        .runner
        .run(request, CancellationToken::new())
        .await
        .unwrap();
    let context = setup.observed.context.lock().unwrap().clone().unwrap();
    assert_eq!(
        context.scope, scope,
        "the driver must enforce the task's scope"
    );
    let first = first_message(&setup.model.requests()[0]);
    assert!(
        first.contains(
            "Scope: this task may reach only shop.example, *.cdn.example, except ads.cdn.example."
        ),
        "{first}"
    );
    assert_eq!(
        result.scope.allowed_domains,
        ["shop.example", "*.cdn.example"]
    );
    assert_eq!(result.scope.blocked_domains, ["ads.cdn.example"]);
}

#[tokio::test]
async fn an_unscoped_task_says_nothing_of_scope() {
    let setup = setup(vec![turn("done", vec![])], TaskLimits::default());
    let result = run(&setup).await;
    let request = &setup.model.requests()[0];
    assert!(!request.system.contains("Scope:") && !first_message(request).contains("Scope:"));
    assert!(result.scope.allowed_domains.is_empty() && result.scope.blocked_domains.is_empty());
    let context = setup.observed.context.lock().unwrap().clone().unwrap();
    assert!(context.scope.is_unlimited());
}

/// The text of a request's first message, the task's.
fn first_message(request: &ModelRequest) -> String {
    match &request.messages[0] {
        Message::User { content } => content.iter().filter_map(Content::as_text).collect(),
        other => panic!("the first message is the task's, not {other:?}"),
    }
}

#[tokio::test]
async fn the_system_prompt_and_tools_are_the_same_bytes_whatever_the_task_adds() {
    // A provider's prompt cache reads a prefix only if it is byte-identical: two tasks that
    // differ in everything a task can add must still send the same system prompt and tools.
    let plain = setup(vec![turn("done", vec![])], TaskLimits::default());
    run(&plain).await;
    let added = setup(vec![turn("done", vec![])], TaskLimits::default());
    let secret = Secret::new("shop_pw", "hunter2-hunter2".into(), ["shop.example"]).unwrap();
    let request = TaskRequest {
        task: "Sign in and read the order".into(),
        url: Some("https://shop.example/login".into()),
        scope: Scope::parse(["shop.example"], Vec::<String>::new()).unwrap(),
        secrets: Secrets::new(vec![secret]).unwrap(),
        max_download_bytes: Some(1024),
        route: None,
        output_schema: None,
        browser: airlock_worker::BrowserSettings::default(),
        ..request()
    };
    added
        .runner
        .run(request, CancellationToken::new())
        .await
        .unwrap();
    let (plain, added) = (&plain.model.requests()[0], &added.model.requests()[0]);
    assert_eq!(plain.system, added.system);
    assert_eq!(plain.tools, added.tools);
    // What differs is told in the first message, and a task with secrets is not told it has none.
    let (plain_first, added_first) = (first_message(plain), first_message(added));
    assert!(
        plain_first.contains("Credentials: none are given"),
        "{plain_first}"
    );
    assert!(!added_first.contains("Credentials: none"), "{added_first}");
    for told in [
        "`shop_pw` (for shop.example)",
        "Scope: this task may reach",
        "Downloads:",
    ] {
        assert!(added_first.contains(told), "{told}: {added_first}");
        assert!(
            !plain.system.contains(told),
            "{told} is in the system prompt"
        );
    }
    assert!(
        plain_first.contains("Steps: you have 40 tool calls"),
        "{plain_first}"
    );
}
