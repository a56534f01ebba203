//! Shared by the `airlock` binary's tests: starting a task and waiting for its first step; a
//! running server (`serve`, `cdp`) and raw HTTP exchanges with it. The
//! Docker gate, the lab site and the DNS responder are in `airlock-testkit`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub(crate) mod scripted;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Start `airlock task` with a script, and return once its first step has begun.
pub(crate) fn spawn_task_at_first_step(
    script_path: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args([
            "task",
            "wait",
            "--model",
            &format!("script:{}", script_path.display()),
        ])
        .args(extra)
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("step 1/") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "airlock ended before its first step"
        );
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    child
}

/// A running `airlock serve` or `airlock cdp`, stopped (SIGTERM, then waited for) when dropped.
pub(crate) struct Served {
    pub child: Child,
    pub port: u16,
    pub log: Arc<Mutex<String>>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Served {
    /// Start `airlock ARGS` with these tokens (AIRLOCK_TOKENS), no config file and info logs;
    /// return once it listens.
    pub(crate) fn start(args: &[String], tokens: &str) -> Self {
        Self::start_with_env(args, tokens, &[])
    }

    /// [`Served::start`] with more environment variables.
    pub(crate) fn start_with_env(args: &[String], tokens: &str, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
            .args(args)
            // A test's server is stopped when the test ends, often with a task or a session
            // still running on purpose: a short drain keeps each of those from costing the
            // default minute. A test of the drain passes `--drain-timeout` (the flag wins).
            .env("AIRLOCK_DRAIN_TIMEOUT", "3")
            .envs(env.iter().copied())
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .env("AIRLOCK_TOKENS", tokens)
            // Info: tests wait for the server's own word that something happened.
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let port = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the server ended before listening"
            );
            let line = line.trim().replace("https://", "http://");
            let listening = line
                .strip_prefix("airlock serve: listening on http://127.0.0.1:")
                .or_else(|| line.strip_prefix("airlock cdp: listening on http://127.0.0.1:"));
            if let Some(rest) = listening {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        };
        let log = Arc::new(Mutex::new(String::new()));
        let keep = Arc::clone(&log);
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                keep.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = sender.send(line);
            }
        });
        Self {
            child,
            port,
            log,
            lines,
        }
    }

    /// Wait for a log line containing `needle` (panics after 60 s).
    pub(crate) fn wait_for_log(&self, needle: &str) {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("the server never logged `{needle}`"));
            if line.contains(needle) {
                return;
            }
        }
    }

    /// Its `/metrics` text, asked with this token.
    pub(crate) fn metrics(&self, token: &str) -> String {
        request(
            self.port,
            "GET",
            "/metrics",
            &[&format!("authorization: Bearer {token}")],
            "",
        )
        .1
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The server's resident memory now.
    pub(crate) fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The most resident memory the server has held since it started.
    pub(crate) fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            signal(self.child.id(), "-TERM");
            let _ = self.child.wait();
        }
        // A failed test shows what the server said (the harness shows a failed test's output).
        if std::thread::panicking() {
            let log = self.log.lock().map(|log| log.clone()).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let from = lines.len().saturating_sub(200);
            eprintln!("--- the server's last {} log lines ---", lines.len() - from);
            for line in &lines[from..] {
                eprintln!("{line}");
            }
        }
    }
}

pub(crate) fn signal(pid: u32, which: &str) {
    assert!(
        Command::new("kill")
            .args([which, &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// One raw HTTP/1.1 exchange: the whole answer, head and body.
pub(crate) fn exchange(port: u16, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    // A server that answers early (413) may close before it has read everything we send.
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).to_string()
}

/// One raw HTTP/1.1 exchange: the status and the body.
pub(crate) fn raw(port: u16, request: &[u8]) -> (u16, String) {
    let text = exchange(port, request);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (u16, String) {
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        text.push_str(&format!("host: 127.0.0.1:{port}\r\n"));
    }
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text.push_str(body);
    raw(port, text.as_bytes())
}

/// A counter's or gauge's value (0 when absent, as Prometheus reads it).
pub(crate) fn metric(text: &str, line_start: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Where the tests keep what a person should look at afterwards, in the folder `name`:
/// `AIRLOCK_TEST_ARTIFACTS` (`cargo xtask integration` sets it to `target/test-artifacts`), else
/// the temp dir.
pub(crate) fn artifacts(name: &str) -> std::path::PathBuf {
    let dir = std::env::var_os("AIRLOCK_TEST_ARTIFACTS")
        .map_or_else(
            || std::env::temp_dir().join("airlock-test-artifacts"),
            std::path::PathBuf::from,
        )
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `name=value` of the cookie a raw HTTP answer sets.
pub(crate) fn cookie_set_by(answer: &str) -> String {
    answer
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .and_then(|value| value.split(';').next())
        .unwrap_or_else(|| panic!("no cookie set: {answer}"))
        .to_owned()
}

/// The mean colour of a JPEG, as (red, green, blue).
pub(crate) fn mean_colour(jpeg: &[u8]) -> (u64, u64, u64) {
    let picture = image::load_from_memory(jpeg).unwrap().to_rgb8();
    let count = u64::from(picture.width()) * u64::from(picture.height());
    let (mut red, mut green, mut blue) = (0, 0, 0);
    for pixel in picture.pixels() {
        red += u64::from(pixel[0]);
        green += u64::from(pixel[1]);
        blue += u64::from(pixel[2]);
    }
    (red / count, green / count, blue / count)
}
