//! A pool with a minimum and a maximum: empty while no task comes, grown by a task that found
//! it empty, claimed warm, and shrunk back to its minimum once a window passes with no task.

use super::*;
use airlock_driver_docker::PoolClaims;

/// Wait (bounded) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn context() -> TaskContext {
    TaskContext::new(
        CancellationToken::new(),
        airlock_worker::TaskLimits::default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_grows_with_demand_and_falls_back_to_its_minimum() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let config = DriverConfig {
        pool: airlock_driver_docker::PoolConfig {
            size: 0,
            max_size: 2,
            // Longer than making two browsers here, short enough to wait out in a test.
            demand_window: Duration::from_secs(12),
            ..airlock_driver_docker::PoolConfig::default()
        },
        ..lab_config(site)
    };
    let driver = DockerDriver::connect(config).await.unwrap();
    driver.check().await.unwrap();
    driver.start_pool().unwrap();
    // Nobody asked yet: nothing is held, nothing is being made.
    assert_eq!((driver.pool_target(), driver.warm_sessions()), (0, 0));
    assert!(my_containers().is_empty(), "{:?}", my_containers());

    // A task finds the pool empty and starts cold; after its first answer the pool grows to
    // what that miss says: one for the arrival and one for the miss.
    let cold = driver.start(context()).await.unwrap();
    assert!(!cold.warm);
    assert_eq!(
        driver.pool_claims(),
        PoolClaims {
            cold: 1,
            ..PoolClaims::default()
        }
    );
    let opened = cold.tools[0]
        .execute(json!({"args": ["open", format!("http://127.0.0.1:{site}/")]}))
        .await
        .unwrap();
    assert!(!opened.is_error(), "{}", opened.text);
    assert_eq!(driver.pool_target(), 2);
    until("the pool growing to 2", || driver.warm_sessions() == 2).await;

    // The next task is warm.
    let warm = driver.start(context()).await.unwrap();
    assert!(warm.warm);
    assert_eq!(
        driver.pool_claims(),
        PoolClaims {
            warm: 1,
            cold: 1,
            ..PoolClaims::default()
        }
    );
    warm.dispose.dispose().await;
    cold.dispose.dispose().await;

    // A window with no task: back to the minimum, its browsers removed.
    until("the pool falling back to 0", || {
        driver.pool_target() == 0 && driver.warm_sessions() == 0
    })
    .await;
    until("the surplus containers going", || {
        my_containers().is_empty()
    })
    .await;
    driver.shutdown().await;
}
