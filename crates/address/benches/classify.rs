//! Nanoseconds per decision: classifying addresses and parsing hosts.

// Benchmarks are test code: a literal input that fails to parse should stop the run.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{Criterion, criterion_group, criterion_main};

fn classify(c: &mut Criterion) {
    let addresses: Vec<IpAddr> = [
        "93.184.216.34",
        "10.1.2.3",
        "169.254.169.254",
        "2606:4700::1111",
        "::ffff:127.0.0.1",
        "64:ff9b::a00:1",
        "fe80::1",
    ]
    .iter()
    .map(|text| text.parse().expect("benchmark input is an address"))
    .collect();
    let mut group = c.benchmark_group("address");
    group.bench_function("classify (7 addresses)", |b| {
        b.iter(|| {
            for ip in &addresses {
                black_box(airlock_address::classify(black_box(*ip)).is_ok());
            }
        });
    });
    let hosts = [
        "example.com",
        "WWW.Example.COM.",
        "bücher.example",
        "127.0.0.1",
        "0x7f.1",
        "[::1]",
    ];
    group.bench_function("parse_host (6 hosts)", |b| {
        b.iter(|| {
            for host in hosts {
                black_box(airlock_address::parse_host(black_box(host)).is_ok());
            }
        });
    });
    group.finish();
}

criterion_group!(benches, classify);
criterion_main!(benches);
