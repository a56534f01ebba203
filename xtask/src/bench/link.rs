//! A network link with a rate and a delay between this host and a network namespace of its own, so
//! that the proxy's bench can put its destinations where a real deployment has them: behind a
//! network, not on loopback.
//!
//! The kernel here has no `sch_netem` (a Firecracker guest's kernel, built without it and without
//! modules), so the link is made in user space: a TUN device at each end and a thread per
//! direction that paces each packet to the link's rate, holds it for the link's delay and drops
//! at the tail past 1000 packets in flight, as netem's default `limit` does. Both ends use a
//! 9000-byte MTU (a data centre's jumbo frames) so that the threads move a gigabit with few
//! packets and take little CPU from what is measured.

use std::collections::VecDeque;
use std::fs::File;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use tun_rs::{DeviceBuilder, SyncDevice};

use crate::util::run_loud;

/// The far end's address: RFC 2544's range for benchmarking, which no real network routes.
pub(super) const FAR_ADDRESS: &str = "198.18.0.2";
const NEAR_ADDRESS: &str = "198.18.0.1";
/// The namespace the far end lives in, under `/run/netns`.
pub(super) const NAMESPACE: &str = "airlock-bench-far";
const NEAR_DEVICE: &str = "airlock-near";
const FAR_DEVICE: &str = "airlock-far";
const MTU: &str = "9000";
/// Packets queued in one direction before the tail is dropped (netem's default `limit`).
const QUEUE_LIMIT: usize = 1000;
/// How long a carrying thread waits for a packet before it looks whether it should stop.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// The link's shape: the same in both directions.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    pub(super) bits_per_second: u64,
    pub(super) one_way: Duration,
}

impl Shape {
    pub(super) fn describe(self) -> String {
        format!(
            "{} Mbit/s each way, {} ms each way ({} ms round trip), MTU {MTU}",
            self.bits_per_second / 1_000_000,
            self.one_way.as_secs_f64() * 1e3,
            self.one_way.as_secs_f64() * 2e3
        )
    }
}

/// The link while it is up; dropping it takes it down (the threads stop, the namespace and both
/// devices go).
pub(super) struct ShapedLink {
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl ShapedLink {
    /// Makes the namespace, both devices and their addresses, and starts carrying packets. As root.
    pub(super) fn up(shape: Shape) -> anyhow::Result<Self> {
        // What an interrupted run left behind would hold the names (usually there is none).
        let _ = Command::new("ip")
            .args(["netns", "del", NAMESPACE])
            .stderr(std::process::Stdio::null())
            .status();
        run_loud(Command::new("ip").args(["netns", "add", NAMESPACE]))?;
        let near = DeviceBuilder::new()
            .name(NEAR_DEVICE)
            .build_sync()
            .context("making the near TUN device")?;
        let far = std::thread::spawn(|| -> anyhow::Result<SyncDevice> {
            // A TUN device belongs to the namespace of the thread that opens it.
            let namespace = File::open(format!("/run/netns/{NAMESPACE}"))?;
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&namespace),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            Ok(DeviceBuilder::new().name(FAR_DEVICE).build_sync()?)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the thread making the far TUN device panicked"))?
        .context("making the far TUN device in its namespace")?;
        run_loud(Command::new("ip").args([
            "addr",
            "add",
            NEAR_ADDRESS,
            "peer",
            FAR_ADDRESS,
            "dev",
            NEAR_DEVICE,
        ]))?;
        run_loud(Command::new("ip").args(["link", "set", NEAR_DEVICE, "mtu", MTU, "up"]))?;
        let in_far =
            |args: &[&str]| run_loud(Command::new("ip").args(["-n", NAMESPACE]).args(args));
        in_far(&[
            "addr",
            "add",
            FAR_ADDRESS,
            "peer",
            NEAR_ADDRESS,
            "dev",
            FAR_DEVICE,
        ])?;
        in_far(&["link", "set", FAR_DEVICE, "mtu", MTU, "up"])?;
        in_far(&["link", "set", "lo", "up"])?;

        let (near, far) = (Arc::new(near), Arc::new(far));
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let threads = [(near.clone(), far.clone()), (far, near)]
            .into_iter()
            .map(|(from, to)| {
                let (stop, dropped) = (stop.clone(), dropped.clone());
                std::thread::spawn(move || carry(&from, &to, shape, &stop, &dropped))
            })
            .collect();
        Ok(Self {
            stop,
            dropped,
            threads,
        })
    }

    /// Packets dropped at a full queue so far, in both directions.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for ShapedLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", NAMESPACE])
            .status();
    }
}

/// One direction: read what `from` sends, release each packet to `to` once the line has carried
/// it and the delay has passed, in order.
fn carry(from: &SyncDevice, to: &SyncDevice, shape: Shape, stop: &AtomicBool, dropped: &AtomicU64) {
    if let Err(error) = from.set_nonblocking(true) {
        eprintln!("the shaped link cannot carry packets: {error}");
        return;
    }
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut line = Line {
        free_at: Instant::now(),
    };
    let mut buffer = vec![0_u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let wait = queue.front().map_or(IDLE_WAIT, |(due, _)| {
            due.saturating_duration_since(Instant::now()).min(IDLE_WAIT)
        });
        let mut ready = [rustix::event::PollFd::new(
            from,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        if rustix::event::poll(&mut ready, Some(&timeout)).is_err() {
            continue;
        }
        loop {
            match from.recv(&mut buffer) {
                Ok(length) => {
                    if queue.len() >= QUEUE_LIMIT {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let due = line.due(Instant::now(), length, shape);
                    queue.push_back((due, buffer[..length].to_vec()));
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(error) => {
                    eprintln!("the shaped link stopped carrying packets: {error}");
                    return;
                }
            }
        }
        let now = Instant::now();
        while queue.front().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, packet)) = queue.pop_front() {
                // A packet the far side cannot take now is lost, as on a wire.
                let _ = to.send(&packet);
            }
        }
    }
}

/// One direction's wire: when it is free to carry the next packet.
struct Line {
    free_at: Instant,
}

impl Line {
    /// When a packet of `length` bytes that arrives at `now` reaches the far end: after the
    /// packets ahead of it are on the wire, its own time on the wire at the link's rate, and the
    /// link's delay.
    fn due(&mut self, now: Instant, length: usize, shape: Shape) -> Instant {
        let bits = u64::try_from(length).unwrap_or(u64::MAX).saturating_mul(8);
        let on_the_line =
            Duration::from_nanos(bits.saturating_mul(1_000_000_000) / shape.bits_per_second);
        self.free_at = self.free_at.max(now) + on_the_line;
        self.free_at + shape.one_way
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Line, Shape};

    #[test]
    fn packets_queue_behind_each_other_at_the_rate_and_each_is_delayed() {
        let shape = Shape {
            bits_per_second: 1_000_000_000,
            one_way: Duration::from_micros(2500),
        };
        let start = Instant::now();
        let mut line = Line { free_at: start };
        // 9000 bytes at 1 Gbit/s are 72 µs on the wire.
        assert_eq!(
            line.due(start, 9000, shape),
            start + Duration::from_micros(72 + 2500)
        );
        assert_eq!(
            line.due(start, 9000, shape),
            start + Duration::from_micros(144 + 2500),
            "the second waits for the first"
        );
        let later = start + Duration::from_millis(10);
        assert_eq!(
            line.due(later, 9000, shape),
            later + Duration::from_micros(72 + 2500),
            "an idle line carries a packet at once"
        );
    }
}
