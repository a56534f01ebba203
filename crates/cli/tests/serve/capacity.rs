//! Capacity under load: more clients than slots and queue places get a result or the capacity
//! answer, and the server's memory reaches a plateau over rounds of that load.

use airlock_testkit::docker::{containers_of, docker_ready};
use serde_json::Value;

use super::support::{Served, metric, request};
use super::{bearer, serve, slow_steps, tasks_at_once};

#[test]
fn twelve_clients_against_capacity_two_get_results_or_the_capacity_answer() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        &slow_steps(60),
        dir.path(),
        &[
            "--max-concurrent-tasks",
            "2",
            "--max-steps",
            "1",
            "--max-queued-tasks",
            "2",
            "--queue-timeout",
            "5",
        ],
    );
    let idle_kib = served.rss_kib();
    let port = served.port;
    let clients = tasks_at_once(port, 12);
    let answers: Vec<(u16, String)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let ran = answers.iter().filter(|(s, _)| *s == 200).count();
    let refused = answers.iter().filter(|(s, _)| *s == 503).count();
    assert_eq!(ran + refused, 12, "{answers:?}");
    assert!(ran >= 2, "{answers:?}");
    assert!(
        refused >= 1,
        "12 clients against 2 slots and 2 queue places: some must be refused"
    );
    for (status, body) in &answers {
        let value: Value = serde_json::from_str(body).unwrap();
        match status {
            200 => assert_eq!(value["ended"], "step_limit", "{value}"),
            _ => assert!(
                value["error"]
                    .as_str()
                    .unwrap()
                    .contains("max_concurrent_tasks"),
                "{value}"
            ),
        }
    }
    let metrics = request(port, "GET", "/metrics", &[&bearer()], "").1;
    assert_eq!(
        metric(
            &metrics,
            "airlock_tasks_finished_total{outcome=\"step_limit\"}"
        ),
        ran as u64,
        "{metrics}"
    );
    let refused_total = metric(&metrics, "airlock_tasks_refused_total{reason=\"full\"}")
        + metric(
            &metrics,
            "airlock_tasks_refused_total{reason=\"queue_timeout\"}",
        );
    assert_eq!(refused_total, refused as u64, "{metrics}");
    assert_eq!(metric(&metrics, "airlock_tasks_running "), 0);
    assert_eq!(metric(&metrics, "airlock_tasks_queued "), 0);
    assert_eq!(
        containers_of(served.child.id()).len(),
        0,
        "a task container was left"
    );
    // The same load again and again must reach a plateau: what the first rounds leave is the
    // allocator's working set and the kept tasks (bounded by --keep-tasks); growth that goes on
    // round after round is a leak. The live heap (jemalloc's count of bytes allocated and not
    // freed) must stop growing, and so must the resident set, between the last rounds. How busy
    // the machine is changes how the rounds overlap, not what they leave behind.
    let mut rounds = vec![Round::read(&served, served.rss_kib())];
    for _ in 0..3 {
        for client in tasks_at_once(port, 12) {
            client.join().unwrap();
        }
        rounds.push(Round::read(&served, served.rss_kib()));
    }
    eprintln!("{idle_kib} KiB resident idle; after each round: {rounds:?}");
    let [.., before_last, last] = rounds.as_slice() else {
        unreachable!("four readings")
    };
    assert!(
        last.heap_bytes <= before_last.heap_bytes + (2 << 20),
        "the live heap grew between the last rounds ({idle_kib} KiB resident idle; after each round: {rounds:?})"
    );
    assert!(
        last.rss_kib <= before_last.rss_kib + 8 * 1024,
        "the resident set grew between the last rounds ({idle_kib} KiB resident idle; after each round: {rounds:?})"
    );
}

/// The server's memory after a round of load.
#[derive(Debug)]
struct Round {
    rss_kib: u64,
    heap_bytes: u64,
}

impl Round {
    fn read(served: &Served, rss_kib: u64) -> Self {
        let metrics = request(served.port, "GET", "/metrics", &[&bearer()], "").1;
        let heap_bytes = metric(&metrics, "airlock_heap_allocated_bytes ");
        assert!(heap_bytes > 0, "/metrics shows no live heap: {metrics}");
        Self {
            rss_kib,
            heap_bytes,
        }
    }
}
