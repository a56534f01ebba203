//! Why gVisor costs what it does on this machine: what one system call costs under each runtime
//! (`dd` moving single bytes, two calls a byte, timed by `dd` itself inside a sealed container),
//! and whether gVisor's faster KVM platform can run here at all (the CPU's virtualisation
//! extensions, the host's KVM modules, and `runsc do` on each platform, bounded).

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use super::gvisor_releases::Runtime;
use super::stats::{Samples, is_warmup, rotation, total_rounds};

/// Bytes `dd` moves one at a time: a read and a write each.
const BYTES: u32 = 20_000;
const ROUNDS: usize = 3;
/// How long `runsc do /bin/true` may take before it counts as hung.
const PLATFORM_LIMIT: Duration = Duration::from_secs(30);

pub(super) fn gvisor_cause(runtimes: &[Runtime], report: &mut String) {
    eprintln!("== why gVisor costs what it does: system calls, and the KVM platform");
    let mut per_call: Vec<Samples> = runtimes.iter().map(|_| Samples::default()).collect();
    for round in 0..total_rounds(ROUNDS) {
        for index in rotation(round, runtimes.len()) {
            let micros = syscall_micros(runtimes[index].name);
            if !is_warmup(round) {
                per_call[index].record(micros);
            }
        }
    }
    let _ = writeln!(
        report,
        "### Why: what a system call costs, and the KVM platform\n\n\
         `dd` copying {BYTES} single bytes from `/dev/zero` to `/dev/null` in a container with no \
         network, as an unprivileged user ({ROUNDS} rounds after a warm-up, alternating): µs per \
         system call (a read and a write per byte), timed by `dd` itself.\n\n\
         | runtime | µs per system call (median) | ratio |\n|---|---|---|"
    );
    let base = per_call[0].summary().map(|s| s.median);
    for (index, runtime) in runtimes.iter().map(|r| &r.label).enumerate() {
        match (per_call[index].summary(), base) {
            (Some(s), Some(base)) => {
                let _ = writeln!(
                    report,
                    "| {runtime} | {:.2} | {:.1}x |",
                    s.median,
                    s.median / base
                );
            }
            _ => {
                let _ = writeln!(report, "| {runtime} | – | n/a: no run succeeded |");
            }
        }
    }
    write_platforms(report);
}

/// µs per system call of one `dd` run under `runtime`.
fn syscall_micros(runtime: &str) -> Option<f64> {
    let out = Command::new("docker")
        .args(["run", "--rm", "--runtime", runtime, "--network", "none"])
        .args(["--user", "65534:65534", "--entrypoint", "/bin/dd"])
        .arg(crate::image::default_tag())
        .args([
            "if=/dev/zero",
            "of=/dev/null",
            "bs=1",
            &format!("count={BYTES}"),
        ])
        .output()
        .ok()?;
    // dd's last line: "100000 bytes (100 kB, 98 KiB) copied, 0.0981 s, 1.0 MB/s".
    let text = String::from_utf8_lossy(&out.stderr);
    let seconds: f64 = text
        .lines()
        .last()?
        .split(", ")
        .find_map(|part| part.strip_suffix(" s"))?
        .trim()
        .parse()
        .ok()?;
    Some(seconds * 1e6 / (2.0 * f64::from(BYTES)))
}

/// What this machine offers gVisor's KVM platform, and what each platform does with a trivial
/// sandbox.
fn write_platforms(report: &mut String) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("flags"))
        .map(|rest| {
            rest.trim_start_matches([' ', '\t', ':'])
                .split_whitespace()
                .collect()
        })
        .unwrap_or_default();
    let has = |flag: &str| if flags.contains(&flag) { "yes" } else { "no" };
    let modules: Vec<String> = std::fs::read_dir("/sys/module")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with("kvm"))
        .collect();
    let _ = writeln!(
        report,
        "\n| the KVM platform's needs | here |\n|---|---|\n\
         | `/dev/kvm` | {} |\n\
         | the CPU's virtualisation extensions (`svm` or `vmx` in its flags) | {} |\n\
         | running under a hypervisor (`hypervisor` in its flags) | {} |\n\
         | the host's KVM modules | {} |",
        if std::path::Path::new("/dev/kvm").exists() {
            "present"
        } else {
            "absent"
        },
        if flags.contains(&"svm") || flags.contains(&"vmx") {
            "yes"
        } else {
            "no"
        },
        has("hypervisor"),
        if modules.is_empty() {
            "none".to_owned()
        } else {
            modules.join(", ")
        },
    );
    for platform in ["ptrace", "kvm"] {
        let _ = writeln!(
            report,
            "| `runsc --platform={platform} do /bin/true` | {} |",
            platform_try(platform)
        );
    }
    if modules.iter().any(|name| name == "kvm_pvm")
        && !flags.contains(&"svm")
        && !flags.contains(&"vmx")
    {
        let _ = writeln!(
            report,
            "\nThis host is itself a virtual machine whose CPU has no virtualisation extensions; its \
             `/dev/kvm` is `kvm_pvm`, KVM by shadow paging, which runs guests whose kernels are built for \
             it. gVisor's KVM platform brings its own small guest kernel, which is not, so its sandbox \
             never runs. On ptrace every system call and fault of the browser is a round trip through \
             the host's scheduler, at the cost per call above."
        );
    }
    let _ = writeln!(report);
}

/// One trivial sandbox on `platform`, bounded by `PLATFORM_LIMIT`.
fn platform_try(platform: &str) -> String {
    let Ok(state) = tempfile::tempdir() else {
        return "not tried: no temporary directory".to_owned();
    };
    let started = Instant::now();
    let status = Command::new("timeout")
        .args(["--kill-after=5", &format!("{}", PLATFORM_LIMIT.as_secs())])
        .arg("runsc")
        // `runsc do` keeps its bundle under TMPDIR: in the directory removed after the try.
        .env("TMPDIR", state.path())
        .arg(format!("--root={}", state.path().display()))
        .args([
            "--network=none",
            &format!("--platform={platform}"),
            "do",
            "/bin/true",
        ])
        .output();
    let took = started.elapsed().as_secs_f64();
    match status {
        Ok(out) if out.status.success() => format!("exits in {took:.1} s"),
        Ok(out) if out.status.code() == Some(124) || out.status.code() == Some(137) => {
            format!("no exit within {} s (stopped)", PLATFORM_LIMIT.as_secs())
        }
        Ok(out) => format!(
            "fails in {took:.1} s: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
                .replace('|', "/")
        ),
        Err(error) => format!("not tried: {error}"),
    }
}
