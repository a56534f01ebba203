//! `airlock serve`: a one-page task through `POST /v1/tasks` against the same task through
//! `airlock task` (a process per task: what the HTTP layer costs, or saves, as a ratio), then
//! throughput with 1, 2 and 4 clients sending tasks back to back. The worker is a script, so the
//! model costs nothing and the browser is what is measured.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::processes::{Children, free_port, timed, wait_for_port};
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};

/// Every turn opens the page; with one step allowed, a task is: open, a refused call, the report.
/// Identical turns, so tasks sharing the server's scripted worker never get each other's turn.
fn script(dir: &Path, site: u16, turns: usize) -> anyhow::Result<std::path::PathBuf> {
    let turn = serde_json::json!({"text": "done", "tool_calls": [{"name": "agent_browser",
        "input": {"args": ["open", format!("http://127.0.0.1:{site}/page-0.html")]}}]});
    let path = dir.join("serve-script.json");
    fs::write(
        &path,
        serde_json::json!({"turns": vec![turn; turns]}).to_string(),
    )?;
    let _ = Command::new("chmod").args(["a+r"]).arg(&path).status();
    Ok(path)
}

fn as_user(root: &Path) -> Command {
    let mut command = Command::new("runuser");
    command
        .args(["-u", crate::integration::TEST_USER, "--"])
        .arg(root.join("target/release/airlock"))
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml");
    command
}

/// One task through the JSON API, by curl; its time in ms.
fn post_task(port: u16) -> anyhow::Result<f64> {
    timed(
        Command::new("curl")
            .args([
                "-sS",
                "--fail",
                "-o",
                "/dev/null",
                "-H",
                "content-type: application/json",
            ])
            .args(["--data", r#"{"task": "open the page"}"#])
            .arg(format!("http://127.0.0.1:{port}/v1/tasks")),
    )
}

pub(super) fn serve(
    root: &Path,
    site: u16,
    rounds: usize,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== airlock serve: /v1/tasks against airlock task, and throughput");
    let dir = root.join("target/bench");
    let one_task = script(&dir, site, 3)?;
    let allow = format!("127.0.0.1:{site}");
    let port = free_port()?;
    let levels = [1_usize, 2, 4];
    let per_client = if rounds < 5 { 2 } else { 4 };
    let served_tasks = total_rounds(rounds) + levels.iter().map(|c| c * per_client).sum::<usize>();
    let many = script(&dir, site, 3 * served_tasks + 3)?;
    let server = as_user(root)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--model"])
        .arg(format!("script:{}", many.display()))
        .args([
            "--allow",
            &allow,
            "--max-steps",
            "1",
            "--max-concurrent-tasks",
            "4",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    // Killed if the bench fails half-way; stopped gracefully (SIGTERM, drained) below.
    let mut children = Children(vec![server]);
    wait_for_port(port, "airlock serve")?;

    let (mut http, mut cli) = (Samples::default(), Samples::default());
    for round in 0..total_rounds(rounds) {
        for contender in rotation(round, 2) {
            let time = if contender == 0 {
                post_task(port)
            } else {
                timed(
                    as_user(root)
                        .args(["task", "open the page", "--json", "--model"])
                        .arg(format!("script:{}", one_task.display()))
                        .args(["--allow", &allow, "--max-steps", "1"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null()),
                )
            };
            if !is_warmup(round) {
                [&mut http, &mut cli][contender].record(time.ok());
            }
        }
    }
    let _ = writeln!(
        report,
        "## airlock serve: a one-page task through POST /v1/tasks against airlock task\n\n\
         The same scripted task (open a local page, then report). `airlock task` is a process per task \
         (start, Docker check, task, exit); the server has those behind it already.\n"
    );
    table_header(report);
    table_row(report, "airlock task (a process per task)", &cli, None);
    table_row(
        report,
        "POST /v1/tasks to airlock serve (curl)",
        &http,
        Some(&cli),
    );

    let _ = writeln!(
        report,
        "\n### Throughput: clients sending tasks back to back ({per_client} each; capacity 4)\n\n\
         | clients | tasks | failed | seconds | tasks per minute | ratio to 1 client |\n|---|---|---|---|---|---|"
    );
    let mut single = None;
    for clients in levels {
        let began = Instant::now();
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                std::thread::spawn(move || {
                    (0..per_client).filter(|_| post_task(port).is_err()).count()
                })
            })
            .collect();
        let failed: usize = workers
            .into_iter()
            .map(|w| w.join().unwrap_or(per_client))
            .sum();
        let seconds = began.elapsed().as_secs_f64();
        let tasks = clients * per_client;
        let done = u32::try_from(tasks - failed).unwrap_or(0);
        let per_minute = f64::from(done) * 60.0 / seconds;
        let base = *single.get_or_insert(per_minute);
        let _ = writeln!(
            report,
            "| {clients} | {tasks} | {failed} | {seconds:.1} | {per_minute:.1} | {:.2}x |",
            per_minute / base
        );
    }
    let _ = writeln!(report);
    // runuser passes SIGTERM on; the server drains and removes its containers.
    if let Some(server) = children.0.first_mut() {
        let _ = Command::new("kill")
            .args(["-TERM", &server.id().to_string()])
            .status();
        let _ = server.wait();
    }
    Ok(())
}
