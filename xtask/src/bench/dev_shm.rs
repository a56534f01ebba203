//! Chromium's shared memory in `/tmp` (`--disable-dev-shm-usage`, Airlock's default) against a
//! sized `/dev/shm`, in alternation: the 100-subresource page loaded inside the container through
//! the proxy. The hardening review keeps `/tmp` unless `/dev/shm` is faster.

use std::fmt::Write as _;
use std::path::Path;

use super::gvisor::{example, record_loads};
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};

/// `/dev/shm` size tried against `/tmp`: four times Docker's default, enough for a heavy page.
const DEV_SHM_MIB: &str = "256";

pub(super) fn dev_shm(root: &Path, site: u16, rounds: usize, loads: usize, report: &mut String) {
    eprintln!("== /tmp against /dev/shm ({rounds} rounds after a warm-up, alternating)");
    let pages = format!("http://127.0.0.1:{site}/page-{{n}}.html");
    let settings: [&[(&str, &str)]; 2] = [&[], &[("AIRLOCK_BENCH_DEV_SHM_MIB", DEV_SHM_MIB)]];
    let mut page = [Samples::default(), Samples::default()];
    for round in 0..total_rounds(rounds) {
        for index in rotation(round, settings.len()) {
            let loaded = example(
                root,
                settings[index],
                &["pageload", &loads.to_string(), &pages],
            );
            if is_warmup(round) {
                continue;
            }
            record_loads(&mut page[index], &loaded);
        }
    }
    let _ = writeln!(
        report,
        "## Chromium's shared memory: /tmp (the default) against a {DEV_SHM_MIB} MiB /dev/shm\n"
    );
    table_header(report);
    table_row(
        report,
        "/tmp (--disable-dev-shm-usage): 100-subresource page load",
        &page[0],
        None,
    );
    table_row(
        report,
        "/dev/shm: 100-subresource page load",
        &page[1],
        Some(&page[0]),
    );
    let _ = writeln!(report);
}
