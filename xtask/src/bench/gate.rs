//! The Docker gate's cost: the same work with Airlock on `airlock-gate`'s socket against the
//! Docker socket itself, in alternation: a warm start (task requested → first snapshot, a
//! browser from the warm pool), a cold start to the first snapshot, the 100-subresource page
//! loaded inside the container, and a Playwright client's CDP connect to its page's load.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::cdp::{client, client_run, start_server};
use super::gvisor::{example, record_loads};
use super::processes::{Children, wait_for_path};
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};
use crate::integration::TEST_USER;

/// `airlock-gate` as the test user, listening in `dir` (made for it); its socket.
fn start_gate(
    root: &Path,
    dir: &Path,
    children: &mut Children,
) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    crate::util::run_loud(Command::new("chown").arg(TEST_USER).arg(dir))?;
    let socket = dir.join("gate.sock");
    let image = crate::image::default_tag();
    children.0.push(
        Command::new("runuser")
            .args(["-u", TEST_USER, "--"])
            .arg(root.join("target/release/airlock-gate"))
            .arg("--listen")
            .arg(&socket)
            .args(["--image", &image, "--egress-parent", "/tmp"])
            .env("AIRLOCK_GATE_LOG", "warn")
            .stderr(Stdio::null())
            .spawn()?,
    );
    wait_for_path(&socket, "the gate's socket")?;
    Ok(socket)
}

/// The two ways to Docker: the socket itself (the baseline), and the gate's.
const WAYS: [&str; 2] = ["the Docker socket", "through airlock-gate"];

pub(super) fn gate(root: &Path, site: u16, quick: bool, report: &mut String) -> anyhow::Result<()> {
    // Twice the other in-container sections' rounds: the gate adds milliseconds to runs whose
    // spread (Chromium's own load) is a hundred, so fewer rounds measure the noise instead.
    let (rounds, session_rounds, loads) = if quick { (2, 2, 2) } else { (16, 10, 4) };
    eprintln!("== the Docker gate against the Docker socket ({rounds} rounds after a warm-up)");
    let mut children = Children::default();
    let dir = std::env::temp_dir().join(format!("airlock-bench-gate-{}", std::process::id()));
    let socket = start_gate(root, &dir, &mut children)?;
    let gate_host = format!("unix://{}", socket.display());
    let hosts = [None, Some(gate_host.as_str())];
    let envs = |way: usize| -> Vec<(&str, &str)> {
        hosts[way]
            .map(|host| vec![("DOCKER_HOST", host)])
            .unwrap_or_default()
    };
    let first_page = format!("http://127.0.0.1:{site}/page-0.html");
    let pages = format!("http://127.0.0.1:{site}/page-{{n}}.html");
    let (script, modules) = client(root)?;
    let cdp_ports = [
        start_server(root, site, 0, None, &mut children)?,
        start_server(root, site, 0, Some(&gate_host), &mut children)?,
    ];
    let mut warm = [Samples::default(), Samples::default()];
    let mut take = [Samples::default(), Samples::default()];
    let mut cold = [Samples::default(), Samples::default()];
    let mut page = [Samples::default(), Samples::default()];
    let mut cdp = [Samples::default(), Samples::default()];
    for round in 0..total_rounds(rounds) {
        for way in rotation(round, WAYS.len()) {
            let warm_run = example(root, &envs(way), &["warmpool", "1", &first_page]);
            let cdp_run = client_run(
                &script,
                &modules,
                &[
                    "connect".to_owned(),
                    format!("http://127.0.0.1:{}/cdp", cdp_ports[way]),
                    first_page.clone(),
                ],
            );
            if is_warmup(round) {
                continue;
            }
            warm[way].record(warm_run.first().and_then(|v| v["warm_pool_ms"].as_f64()));
            take[way].record(warm_run.first().and_then(|v| v["take_ms"].as_f64()));
            cdp[way].record(cdp_run);
        }
    }
    for round in 0..total_rounds(session_rounds) {
        for way in rotation(round, WAYS.len()) {
            let start = example(root, &envs(way), &["startup", "1", &first_page]);
            let loaded = example(root, &envs(way), &["pageload", &loads.to_string(), &pages]);
            if is_warmup(round) {
                continue;
            }
            cold[way].record(start.first().and_then(|v| v["cold_ms"].as_f64()));
            record_loads(&mut page[way], &loaded);
        }
    }
    let _ = writeln!(
        report,
        "## The Docker gate: Airlock through airlock-gate against the Docker socket\n\n\
         The same driver and image, with `DOCKER_HOST` on `airlock-gate`'s socket (every call \
         judged and re-written; a container's owner is asked of dockerd once, then the gate \
         remembers its own containers and execs) or on the Docker socket itself, in alternation. Warm start: task requested → \
         first snapshot with a browser from the warm pool ({rounds} rounds), and the part of it that \
         is Docker calls alone: the claim (unpause, CPU weight). Cold start: a new \
         sealed session to its first snapshot; page load: Chromium's own load time for the \
         100-subresource page ({session_rounds} rounds of {loads} loads). CDP: a Playwright \
         client's `connectOverCDP` to `airlock cdp` (cold) until its page's `load`.\n"
    );
    for (title, samples) in [
        ("warm start, ms", &warm),
        (
            "of which the claim from the pool (unpause, CPU weight), ms",
            &take,
        ),
        ("cold start to the first snapshot, ms", &cold),
        ("page load, ms", &page),
        ("CDP connect to the page's load, ms", &cdp),
    ] {
        let _ = writeln!(report, "**{title}**\n");
        table_header(report);
        table_row(report, WAYS[0], &samples[0], None);
        table_row(report, WAYS[1], &samples[1], Some(&samples[0]));
        let _ = writeln!(report);
    }
    children.terminate();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
