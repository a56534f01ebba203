//! Nanoseconds per policy decision: URL pre-checks, resolved-answer checks and command checks.

// Benchmarks are test code: a literal input that fails to parse should stop the run.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::net::IpAddr;

use airlock_policy::{EgressPolicy, check_command};
use criterion::{Criterion, criterion_group, criterion_main};

fn decide(c: &mut Criterion) {
    let policy = EgressPolicy::new(
        airlock_policy::Profile::Public,
        None,
        ["127.0.0.1:8080".parse().expect("literal entry is valid")],
    )
    .expect("literal policy is valid");
    let urls = [
        "https://www.example.com/path?q=1",
        "http://127.0.0.1:8080/",
        "http://169.254.169.254/latest/meta-data",
        "HTTPS://bücher.example/",
        "file:///etc/passwd",
    ];
    let answers: Vec<IpAddr> = ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]
        .iter()
        .map(|text| text.parse().expect("literal address"))
        .collect();
    let commands: Vec<Vec<String>> = [
        &["open", "https://example.com"][..],
        &["snapshot", "-i", "-c"],
        &["click", "@e12"],
        &["open", "--proxy=http://x", "https://example.com"],
    ]
    .iter()
    .map(|list| list.iter().map(|s| (*s).to_owned()).collect())
    .collect();

    let mut group = c.benchmark_group("policy");
    group.bench_function("decide_url (5 urls)", |b| {
        b.iter(|| {
            for url in urls {
                black_box(policy.decide_url(black_box(url)));
            }
        });
    });
    group.bench_function("decide_resolved (2 answers)", |b| {
        b.iter(|| black_box(policy.decide_resolved("example.com", 443, black_box(&answers))));
    });
    group.bench_function("check_command (4 commands)", |b| {
        b.iter(|| {
            for args in &commands {
                black_box(check_command(black_box(args)).is_ok());
            }
        });
    });
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
