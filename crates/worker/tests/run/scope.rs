//! A task's scope reaches the driver, the worker's instructions and the result.

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
    let system = &setup.model.requests()[0].system;
    assert!(
        system.contains(
            "Scope: this task may reach only shop.example, *.cdn.example, except ads.cdn.example."
        ),
        "{system}"
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
    assert!(!setup.model.requests()[0].system.contains("Scope:"));
    assert!(result.scope.allowed_domains.is_empty() && result.scope.blocked_domains.is_empty());
    let context = setup.observed.context.lock().unwrap().clone().unwrap();
    assert!(context.scope.is_unlimited());
}
