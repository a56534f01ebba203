//! `cargo xtask soak --tasks N`: N tasks through the real binary, ended every way a task can end,
//! then proof that nothing was left behind.
//!
//! Part one rotates `airlock task` through: a normal end, a time-out, SIGINT, SIGKILL of the host
//! followed by `airlock cleanup`, and a Docker daemon restart mid-task followed by `airlock
//! cleanup`. Part two runs N tasks through one long-running `airlock mcp`, every other one
//! cancelled by the client, and measures the server's memory. At the end there must be no task
//! container, no proxy directory, no `airlock` process and no zombie, and the server's resident
//! memory must have grown by less than 10 MiB. With `--serve-tasks N`, a third part runs N tasks
//! through one `airlock serve` and samples its memory (`soak_serve.rs`). It prints a table and
//! fails on any leak.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::integration::ensure_test_user;
use crate::soak_support::{as_test_user, rss_mib, wait_for_no_container_of};
use crate::util::{egress_dirs, is_root, output, run_loud, succeeds, workspace_root};

/// Arguments of `cargo xtask soak`.
#[derive(Debug, Args)]
pub(crate) struct SoakArgs {
    /// Tasks in each part (the CLI rotation and the long-running MCP server).
    #[arg(long, default_value_t = 100)]
    tasks: usize,
    /// Tasks through one long-running `airlock serve` (JSON API, two clients), with its memory
    /// sampled every 50; 0 skips it. 1,000 shows whether it plateaus.
    #[arg(long, default_value_t = 0)]
    serve_tasks: usize,
}

/// The most the long-running server's memory may grow over the run.
const MAX_GROWTH_MIB: f64 = 10.0;

/// How a CLI task is made to end.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Normal,
    TimeOut,
    Interrupt,
    KillThenCleanup,
    DockerRestart,
}

const ENDINGS: [Ending; 5] = [
    Ending::Normal,
    Ending::TimeOut,
    Ending::Interrupt,
    Ending::KillThenCleanup,
    Ending::DockerRestart,
];

impl Ending {
    fn label(self) -> &'static str {
        match self {
            Self::Normal => "normal end",
            Self::TimeOut => "time-out",
            Self::Interrupt => "SIGINT",
            Self::KillThenCleanup => "SIGKILL, then airlock cleanup",
            Self::DockerRestart => "Docker restart mid-task, then airlock cleanup",
        }
    }
}

pub(crate) fn run(args: &SoakArgs) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "cargo xtask soak restarts the Docker daemon and runs Airlock as a non-root user: run it as root"
        );
    }
    if args.tasks == 0 {
        bail!("--tasks must be at least 1");
    }
    crate::image::run(&crate::image::ImageArgs::for_integration())?;
    ensure_test_user()?;
    let root = workspace_root();
    run_loud(Command::new(env!("CARGO")).args(["build", "-p", "airlock"]))?;
    let airlock = root.join("target/debug/airlock");
    let work = root.join("target/soak");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    // The test user reads the scripts and runs the binary.
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&work)
        .status();
    let site = serve_lab_page()?;
    let egress_before = egress_dirs();

    let mut rows: Vec<(String, usize, usize)> = Vec::new();
    for ending in ENDINGS {
        rows.push((ending.label().to_owned(), 0, 0));
    }
    for index in 0..args.tasks {
        let slot = index % ENDINGS.len();
        let ending = ENDINGS[slot];
        eprintln!(
            "== task {} of {}: {}",
            index + 1,
            args.tasks,
            ending.label()
        );
        let ok = match cli_task(&airlock, &work, site, ending) {
            Ok(()) => true,
            Err(error) => {
                eprintln!("soak: {}: {error:#}", ending.label());
                false
            }
        };
        rows[slot].1 += 1;
        if ok {
            rows[slot].2 += 1;
        }
    }

    eprintln!("== {} tasks through one airlock mcp", args.tasks);
    let mcp = mcp_tasks(&airlock, &work, site, args.tasks);
    let serve = (args.serve_tasks > 0).then(|| {
        eprintln!("== {} tasks through one airlock serve", args.serve_tasks);
        crate::soak_serve::serve_tasks(&airlock, &work, site, args.serve_tasks)
    });

    let mut leaks = Vec::new();
    let containers =
        output(Command::new("docker").args(["ps", "-aq", "--filter", "label=airlock.task"]))?;
    if !containers.trim().is_empty() {
        leaks.push(format!(
            "task containers left: {}",
            containers.split_whitespace().count()
        ));
    }
    let left: Vec<String> = egress_dirs().difference(&egress_before).cloned().collect();
    if !left.is_empty() {
        leaks.push(format!("proxy directories left: {}", left.join(", ")));
    }
    // This checkout's binary only: another Airlock on the machine is not the soak's to judge.
    if succeeds(
        Command::new("pgrep")
            .arg("-f")
            .arg(format!("^{} ", airlock.display())),
    ) {
        leaks.push("an airlock process the soak started is still running".to_owned());
    }
    let zombies = zombies_of(std::process::id());
    if zombies > 0 {
        leaks.push(format!("{zombies} zombie process(es) under xtask"));
    }

    report(&rows, &mcp, &mut leaks);
    if let Some(serve) = &serve {
        crate::soak_serve::report(serve, &mut leaks);
    }
    if leaks.is_empty() {
        println!("\nnothing left behind");
        return Ok(());
    }
    for leak in &leaks {
        eprintln!("soak: {leak}");
    }
    bail!("{} problem(s) after the soak", leaks.len())
}

/// Print the table, and add to `leaks` what the runs themselves got wrong.
fn report(
    rows: &[(String, usize, usize)],
    mcp: &anyhow::Result<McpReport>,
    leaks: &mut Vec<String>,
) {
    println!("\n| ending | tasks | clean |\n|---|---|---|");
    for (label, tasks, clean) in rows {
        println!("| {label} | {tasks} | {clean} |");
    }
    match mcp {
        Ok(report) => {
            println!(
                "| airlock mcp: completed / cancelled | {} | {} |",
                report.tasks, report.clean
            );
            println!(
                "\nairlock mcp resident memory: {:.1} MiB after the first tasks, {:.1} MiB at the end ({:+.1} MiB; at most {MAX_GROWTH_MIB} allowed)",
                report.rss_start_mib,
                report.rss_end_mib,
                report.rss_end_mib - report.rss_start_mib
            );
            if report.rss_end_mib - report.rss_start_mib >= MAX_GROWTH_MIB {
                leaks.push("the MCP server's memory grew by 10 MiB or more".to_owned());
            }
            if report.clean < report.tasks {
                leaks.push(format!(
                    "{} MCP task(s) did not end cleanly",
                    report.tasks - report.clean
                ));
            }
        }
        Err(error) => leaks.push(format!("the MCP part failed: {error:#}")),
    }
    for (label, tasks, clean) in rows {
        if clean < tasks {
            leaks.push(format!(
                "{}: {} of {tasks} task(s) did not end cleanly",
                label,
                tasks - clean
            ));
        }
    }
}

/// One `airlock task`, ended the way `ending` says; Ok when it ended as expected and left nothing.
fn cli_task(airlock: &Path, work: &Path, site: u16, ending: Ending) -> anyhow::Result<()> {
    let script = work.join(format!("{ending:?}.json"));
    let turns = match ending {
        Ending::Normal => json!([
            {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{site}/")]}}]},
            {"text": "Done."}
        ]),
        _ => {
            json!([{"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]}])
        }
    };
    std::fs::write(&script, json!({ "turns": turns }).to_string())?;
    let _ = Command::new("chmod").arg("a+r").arg(&script).status();
    let mut command = as_test_user(airlock);
    command
        .args([
            "task",
            "soak",
            "--allow",
            &format!("127.0.0.1:{site}"),
            "--model",
        ])
        .arg(format!("script:{}", script.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if matches!(ending, Ending::TimeOut) {
        command.args(["--timeout", "5"]);
    }
    let mut child = command.spawn().context("starting airlock task")?;
    let pid = child.id();
    let stderr = child.stderr.take().context("no stderr")?;
    let lines = forward_lines(stderr);
    match ending {
        Ending::Normal | Ending::TimeOut => {}
        _ => {
            // The container is up and the command runs once the first step is announced.
            let deadline = Instant::now() + Duration::from_mins(1);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let line = lines
                    .recv_timeout(left)
                    .context("no first step within 60 s")?;
                if line.contains("step 1/") {
                    break;
                }
            }
        }
    }
    let expected_ok = matches!(ending, Ending::Normal);
    match ending {
        Ending::Interrupt => signal(pid, "INT")?,
        Ending::KillThenCleanup => signal(pid, "KILL")?,
        Ending::DockerRestart => crate::docker_restart::restart_docker()?,
        Ending::Normal | Ending::TimeOut => {}
    }
    let status = wait_bounded(&mut child, Duration::from_mins(2))?;
    if matches!(ending, Ending::KillThenCleanup | Ending::DockerRestart) {
        let cleaned = as_test_user(airlock).arg("cleanup").output()?;
        if !cleaned.status.success() {
            bail!(
                "airlock cleanup failed: {}",
                String::from_utf8_lossy(&cleaned.stderr)
            );
        }
    } else if status.success() != expected_ok {
        bail!("airlock task ended with {status}");
    }
    if !wait_for_no_container_of(pid, Duration::from_secs(30)) {
        bail!("its container is still there");
    }
    Ok(())
}

/// Send `signal` to `pid` with kill(1).
fn signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    run_loud(Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]))
}

/// Wait for `child`, killing it if it outlives `limit`.
fn wait_bounded(child: &mut Child, limit: Duration) -> anyhow::Result<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("did not end within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Lines of `reader`, forwarded to this process's stderr and to the returned channel.
fn forward_lines(reader: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            eprintln!("  | {line}");
            let _ = sender.send(line);
        }
    });
    receiver
}

/// What the MCP part saw.
struct McpReport {
    tasks: usize,
    clean: usize,
    rss_start_mib: f64,
    rss_end_mib: f64,
}

/// N tasks through one `airlock mcp`: even ones complete, odd ones are cancelled by the client.
fn mcp_tasks(airlock: &Path, work: &Path, site: u16, tasks: usize) -> anyhow::Result<McpReport> {
    let open = json!({"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{site}/")]}}]});
    let wait =
        json!({"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]});
    let mut turns = Vec::new();
    for index in 0..tasks {
        if index % 2 == 0 {
            turns.push(open.clone());
            turns.push(json!({"text": "Done."}));
        } else {
            turns.push(wait.clone());
        }
    }
    let script = work.join("mcp.json");
    std::fs::write(&script, json!({ "turns": turns }).to_string())?;
    let _ = Command::new("chmod").arg("a+r").arg(&script).status();
    let mut child = spawn_mcp(airlock, site, &script)?;
    let pid = child.id();
    let mut stdin = child.stdin.take().context("no stdin")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let (sender, messages) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str(&line) {
                let _ = sender.send(value);
            }
        }
    });
    let send = |stdin: &mut ChildStdin, value: Value| -> anyhow::Result<()> {
        writeln!(stdin, "{value}")?;
        Ok(stdin.flush()?)
    };
    let next = |what: &str| -> anyhow::Result<Value> {
        messages
            .recv_timeout(Duration::from_mins(2))
            .with_context(|| format!("no {what} within 120 s"))
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}}}),
    )?;
    while next("initialize answer")?["id"] != 0 {}
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )?;

    let mut clean = 0;
    let mut rss_start_mib = 0.0;
    for index in 0..tasks {
        let id = index + 1;
        send(
            &mut stdin,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "browser_task", "arguments": {"task": "soak"}, "_meta": {"progressToken": id}}}),
        )?;
        let ended = if index % 2 == 0 {
            loop {
                let message = next("task answer")?;
                if message["id"] == id {
                    break message["result"]["isError"] == false;
                }
            }
        } else {
            loop {
                let message = next("first progress")?;
                if message["params"]["progressToken"] == id {
                    break;
                }
            }
            send(
                &mut stdin,
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "soak"}}),
            )?;
            wait_for_no_container_of(pid, Duration::from_mins(1))
        };
        if ended && wait_for_no_container_of(pid, Duration::from_mins(1)) {
            clean += 1;
        }
        // The first tasks warm the server's allocator and caches; growth is measured after them.
        if index + 1 == tasks.min(4) {
            rss_start_mib = rss_mib(pid)?;
        }
    }
    let rss_end_mib = rss_mib(pid)?;
    drop(stdin);
    wait_bounded(&mut child, Duration::from_mins(2))?;
    Ok(McpReport {
        tasks,
        clean,
        rss_start_mib,
        rss_end_mib,
    })
}

/// `airlock mcp` as the test user with a scripted worker, over pipes. Without a warm pool, so
/// each task's end must leave no container at all.
fn spawn_mcp(airlock: &Path, site: u16, script: &Path) -> anyhow::Result<std::process::Child> {
    as_test_user(airlock)
        .args([
            "mcp",
            "--pool-size",
            "0",
            "--allow",
            &format!("127.0.0.1:{site}"),
        ])
        .arg("--model")
        .arg(format!("script:{}", script.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting airlock mcp")
}

/// Zombie children of `parent`.
fn zombies_of(parent: u32) -> usize {
    output(Command::new("ps").args(["-eo", "stat=,ppid="]))
        .unwrap_or_default()
        .lines()
        .filter(|line| {
            let mut fields = line.split_whitespace();
            fields.next().is_some_and(|stat| stat.starts_with('Z'))
                && fields.next() == Some(&parent.to_string())
        })
        .count()
}

/// A one-page lab site on loopback, served from a thread for the whole soak.
fn serve_lab_page() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut reader = BufReader::new(match stream.try_clone() {
                    Ok(clone) => clone,
                    Err(_) => return,
                });
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = "<!doctype html><title>Soak</title><p>soak page</p>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Ok(port)
}
