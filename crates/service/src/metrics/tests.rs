//! The metrics' own arithmetic: what a scrape shows after what happened.

use super::*;

#[test]
fn egress_failures_count_by_fixed_class_and_bytes_by_route() {
    use airlock_worker::{EgressBytes, EgressFailure};
    let metrics = Metrics::new(2);
    let failure = |class: &str, count| EgressFailure {
        at_unix_ms: 0,
        target: "lab.test:443".into(),
        class: class.into(),
        reason: "route `corp`: its parent proxy refused the credentials (407)".into(),
        count,
        step: None,
    };
    let by_route = std::collections::BTreeMap::from([
        ("corp".to_owned(), EgressBytes { up: 10, down: 900 }),
        ("direct".to_owned(), EgressBytes { up: 1, down: 2 }),
    ]);
    metrics.egress(
        &[
            failure("parent-credentials", 2),
            failure("made-up-by-a-driver", 1),
        ],
        &std::collections::BTreeMap::new(),
        EgressBytes { up: 11, down: 902 },
        &by_route,
    );
    // A driver that reports no routes dialled directly.
    metrics.egress(
        &[],
        &std::collections::BTreeMap::new(),
        EgressBytes { up: 5, down: 5 },
        &std::collections::BTreeMap::new(),
    );
    let text = metrics.encode();
    for line in [
        "airlock_egress_failures_total{class=\"parent-credentials\"} 2",
        "airlock_egress_failures_total{class=\"other\"} 1",
        "airlock_egress_bytes_total{direction=\"down\",route=\"corp\"} 900",
        "airlock_egress_bytes_total{direction=\"up\",route=\"direct\"} 6",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

#[test]
fn a_pool_that_cannot_fill_shows_in_the_metrics() {
    let metrics = Metrics::new(2);
    assert!(metrics.encode().contains("airlock_warm_pool_failing 0"));
    metrics.warm_pool_failing.set(1);
    let text = metrics.encode();
    assert!(text.contains("airlock_warm_pool_failing 1"), "{text}");
    assert!(text.contains("# HELP airlock_warm_pool_failing"), "{text}");
}

#[test]
fn the_pools_claims_are_its_own_totals_however_often_scraped() {
    let metrics = Metrics::new(2);
    metrics.warm_pool_target.set(3);
    for _ in 0..2 {
        metrics.set_pool_claims(crate::PoolClaims {
            warm: 5,
            taken_over: 3,
            cold: 2,
        });
    }
    let text = metrics.encode();
    assert!(
        text.contains("airlock_warm_pool_claims_total{start=\"warm\"} 5"),
        "{text}"
    );
    assert!(
        text.contains("airlock_warm_pool_claims_total{start=\"cold\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("airlock_warm_pool_claims_total{start=\"taken_over\"} 3"),
        "{text}"
    );
    assert!(text.contains("airlock_warm_pool_target 3"), "{text}");
}

#[test]
fn the_pools_held_time_is_the_drivers_total_however_often_scraped() {
    let metrics = Metrics::new(2);
    for held in [1500, 1500, 2250] {
        metrics.set_pool_refill_held(std::time::Duration::from_millis(held));
    }
    let text = metrics.encode();
    assert!(
        text.contains("airlock_warm_pool_refill_held_seconds_total 2.25"),
        "{text}"
    );
    assert!(
        text.contains("# UNIT airlock_warm_pool_refill_held_seconds seconds"),
        "{text}"
    );
}
