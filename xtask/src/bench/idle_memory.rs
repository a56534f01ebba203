//! Where an idle warm browser's memory goes: `airlock serve` with a warm pool of one, and once its
//! browser has waited a while, every process in that container's memory cgroup by role (Chromium's
//! browser, zygotes, GPU, network and other utility processes, renderers; agent-browser; Airlock's
//! runner and relay) as proportional set size (shared pages split between the processes that map
//! them, so the rows add up), and the cgroup's own account (anonymous memory, page cache, tmpfs and
//! shared memory, kernel). Read as root from the host: Chromium's sandboxed processes cannot be
//! read by their own user.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::bail;

use airlock_testkit::docker::task_container_pids;

use super::container::{cgroup_dir, processes_in, role_of};
use super::processes::{Children, free_port, wait_for_port};

/// How long the warm browser idles before it is measured (its start-up work done).
const SETTLE: Duration = Duration::from_secs(15);

/// One process's proportional memory, in KiB.
#[derive(Debug, Default, Clone, Copy)]
struct Pss {
    total: u64,
    anon: u64,
    file: u64,
    shmem: u64,
}

impl std::ops::AddAssign for Pss {
    fn add_assign(&mut self, other: Self) {
        self.total += other.total;
        self.anon += other.anon;
        self.file += other.file;
        self.shmem += other.shmem;
    }
}

pub(super) fn idle_memory(root: &Path, report: &mut String) -> anyhow::Result<()> {
    eprintln!("== where an idle warm browser's memory goes");
    let dir = root.join("target/bench");
    let script = dir.join("idle-memory-script.json");
    fs::write(&script, r#"{"turns": []}"#)?;
    let _ = Command::new("chmod").args(["a+r"]).arg(&script).status();
    let port = free_port()?;
    let server = Command::new("runuser")
        .args(["-u", crate::integration::TEST_USER, "--"])
        .arg(root.join("target/release/airlock"))
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--model"])
        .arg(format!("script:{}", script.display()))
        .args(["--pool-size", "1", "--cdp-pool-size", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut children = Children(vec![server]);
    wait_for_port(port, "airlock serve")?;
    let deadline = Instant::now() + Duration::from_mins(2);
    while warm_sessions(port) < 1 {
        if Instant::now() > deadline {
            bail!("no warm browser within 120 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Idle on purpose: what is measured is a browser that has waited, not one starting.
    std::thread::sleep(SETTLE);
    let measured = measure();
    children.terminate();
    let (roles, cgroup) = measured?;
    write(report, &roles, &cgroup);
    Ok(())
}

fn warm_sessions(port: u16) -> u64 {
    let out = Command::new("curl")
        .args(["-sS", &format!("http://127.0.0.1:{port}/metrics")])
        .output();
    let Ok(out) = out else { return 0 };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|line| line.starts_with("airlock_warm_sessions "))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// The pool's container: its processes by role, and its memory cgroup's account.
type Measured = (BTreeMap<String, (usize, Pss)>, Vec<(String, u64)>);

fn measure() -> anyhow::Result<Measured> {
    let pids = task_container_pids();
    let [pid] = pids.as_slice() else {
        bail!("expected the one warm container, found {}", pids.len());
    };
    let cgroup = cgroup_dir(pid, "memory")?;
    let mut roles: BTreeMap<String, (usize, Pss)> = BTreeMap::new();
    for pid in processes_in(&cgroup) {
        let Some(pss) = pss_of(&pid) else { continue };
        let entry = roles.entry(role_of(&pid)).or_default();
        entry.0 += 1;
        entry.1 += pss;
    }
    let stat = fs::read_to_string(cgroup.join("memory.stat")).unwrap_or_default();
    let wanted = [
        // cgroup v2
        "anon",
        "file",
        "shmem",
        "active_file",
        "inactive_file",
        "kernel",
        "kernel_stack",
        "slab",
        "sock",
        // cgroup v1
        "rss",
        "cache",
        "mapped_file",
    ];
    let mut account: Vec<(String, u64)> = stat
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(' ')?;
            wanted
                .contains(&key)
                .then(|| Some((key.to_owned(), value.trim().parse().ok()?)))?
        })
        .collect();
    for file in ["memory.current", "memory.usage_in_bytes"] {
        if let Ok(text) = fs::read_to_string(cgroup.join(file))
            && let Ok(bytes) = text.trim().parse()
        {
            account.insert(0, (file.to_owned(), bytes));
        }
    }
    Ok((roles, account))
}

fn pss_of(pid: &str) -> Option<Pss> {
    let text = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Some(Pss {
        total: field("Pss:"),
        anon: field("Pss_Anon:"),
        file: field("Pss_File:"),
        shmem: field("Pss_Shmem:"),
    })
}

/// KiB to MiB (a memory size fits an `f64` exactly).
#[allow(clippy::cast_precision_loss)]
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn write(report: &mut String, roles: &BTreeMap<String, (usize, Pss)>, account: &[(String, u64)]) {
    let _ = writeln!(
        report,
        "## Where an idle warm browser's memory goes\n\n\
         A warm pool of one in `airlock serve`, measured {} s after its browser was ready: every \
         process in its container by role, as proportional set size (a page shared by several \
         processes is split between them, so the rows add up), then the container's memory cgroup. \
         The cgroup's page cache (`cache`, `active_file`, `inactive_file`) holds the file pages \
         this container read first, so it moves with what the host has cached: compare `rss` and \
         `shmem` (its tmpfs) between runs.\n\n\
         | process | count | PSS (MiB) | anonymous | file | shared memory |\n|---|---|---|---|---|---|",
        SETTLE.as_secs()
    );
    let mut sum = Pss::default();
    let mut rows: Vec<_> = roles.iter().collect();
    rows.sort_by_key(|(_, (_, pss))| std::cmp::Reverse(pss.total));
    for (role, (count, pss)) in rows {
        sum += *pss;
        let _ = writeln!(
            report,
            "| {role} | {count} | {:.1} | {:.1} | {:.1} | {:.1} |",
            mib(pss.total),
            mib(pss.anon),
            mib(pss.file),
            mib(pss.shmem)
        );
    }
    let _ = writeln!(
        report,
        "| **all** | {} | **{:.1}** | {:.1} | {:.1} | {:.1} |\n\n| cgroup | MiB |\n|---|---|",
        roles.values().map(|(count, _)| count).sum::<usize>(),
        mib(sum.total),
        mib(sum.anon),
        mib(sum.file),
        mib(sum.shmem)
    );
    for (key, bytes) in account {
        let _ = writeln!(report, "| {key} | {:.1} |", mib(*bytes / 1024));
    }
    let _ = writeln!(report);
}
