//! Shared by the `airlock` tests that need Docker: the gate, a test site, a DNS responder for
//! lab names, and container bookkeeping.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// Whether Docker, the image and a non-root user are here; with `AIRLOCK_REQUIRE_DOCKER=1`
/// (set by `cargo xtask integration`) a missing one fails the test instead of skipping it.
pub fn docker_ready() -> bool {
    let required = std::env::var("AIRLOCK_REQUIRE_DOCKER").is_ok_and(|v| v == "1");
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let image = format!("airlock-browser:{}", env!("CARGO_PKG_VERSION"));
    let missing = if root {
        Some(
            "these tests run as a non-root user; `cargo xtask integration` runs them as one"
                .to_owned(),
        )
    } else if !Command::new("docker")
        .args(["image", "inspect", &image])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        Some(format!(
            "Docker with {image} is needed: run `cargo xtask image`"
        ))
    } else {
        None
    };
    match missing {
        None => true,
        Some(why) if required => panic!("{why}"),
        Some(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// Task containers whose owner label names this process id.
pub fn containers_of(pid: u32) -> usize {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=airlock.task",
            "--format",
            "{{.Label \"airlock.owner\"}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|o| o.contains(&format!("pid={pid};")))
        .count()
}

/// A page: (status line, extra headers, body).
pub type Page = (&'static str, String, String);

/// An HTTP server on 127.0.0.1 serving the pages `pages(port)` returns, by path (404 otherwise);
/// it records every path asked. Pages get the port so they can link to themselves.
pub fn site(
    pages: impl FnOnce(u16) -> HashMap<&'static str, Page>,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pages = pages(port);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&seen);
    let pages = Arc::new(pages);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let pages = Arc::clone(&pages);
            let record = Arc::clone(&record);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    return;
                }
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let path = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
                record.lock().unwrap().push(path.clone());
                let (status, extra, body) = pages.get(path.as_str()).cloned().unwrap_or((
                    "404 Not Found",
                    String::new(),
                    String::new(),
                ));
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    (port, seen)
}

/// A DNS responder on 127.0.0.1 (UDP) for lab names. Each name has a list of IPv4 answers used in
/// turn, one per A query (so a name can alternate). AAAA queries get no records; unknown names
/// NXDOMAIN. Answers have TTL 0, so nothing is cached.
pub fn dns(names: HashMap<&'static str, Vec<Ipv4Addr>>) -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let turns: Mutex<HashMap<String, usize>> = Mutex::default();
    std::thread::spawn(move || {
        let mut buf = [0_u8; 512];
        loop {
            let Ok((len, peer)) = socket.recv_from(&mut buf) else {
                return;
            };
            if let Some(answer) = respond(&buf[..len], &names, &turns) {
                let _ = socket.send_to(&answer, peer);
            }
        }
    });
    port
}

fn respond(
    query: &[u8],
    names: &HashMap<&'static str, Vec<Ipv4Addr>>,
    turns: &Mutex<HashMap<String, usize>>,
) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    // The question: labels, then type and class.
    let mut labels = Vec::new();
    let mut at = 12;
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question_end = at + 4;
    let name = labels.join(".");
    let mut answer = query[..question_end].to_vec();
    answer[2] = 0x81 | (query[2] & 0x01); // response, recursion desired echoed
    answer[3] = 0x80; // recursion available, NOERROR
    answer[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
    let Some(addresses) = names.get(name.as_str()) else {
        answer[3] = 0x83; // NXDOMAIN
        return Some(answer);
    };
    if qtype == 1 {
        let mut turns = turns.lock().unwrap();
        let turn = turns.entry(name).or_default();
        let ip = addresses[*turn % addresses.len()];
        *turn += 1;
        answer[7] = 1; // one answer
        answer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
        answer.extend_from_slice(&ip.octets());
    }
    Some(answer)
}

/// A one-page site for tests that only need something to open.
pub fn simple_site(title: &'static str, text: &'static str) -> u16 {
    site(move |_| {
        HashMap::from([(
            "/",
            (
                "200 OK",
                String::new(),
                format!(
                    "<html><head><title>{title}</title></head><body><p>{text}</p></body></html>"
                ),
            ),
        )])
    })
    .0
}

/// Start `airlock task` with a script, and return once its first step has begun.
pub fn spawn_task_at_first_step(
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
