//! A CONNECT tunnel once it is open: the kernel moves the bytes between the two sockets with
//! `splice(2)` through a pipe, so they are never copied into the proxy. The pipe is made when a
//! direction has bytes to move and closed as soon as it has none, so an idle tunnel holds no
//! buffer at all: two registered sockets and a small task. The idle time-out, the byte cap and
//! the byte counters hold as they do on every bounded stream. A tunnel inside a TLS session with
//! an `https://` parent cannot be spliced (the proxy must decrypt and encrypt): its bytes are
//! copied through a [`Bounded`] stream, which keeps the same limits.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};
use tokio::time::Instant;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;

use crate::bounded::{Bounded, ByteCounters, Way};
use crate::client::Client;
use crate::upstream::Upstream;

/// The most bytes one splice moves, and the pipe's capacity (a read then never waits on it).
/// Four times the default pipe: a bulk transfer takes a quarter of the system calls, and the
/// kernel holds the pages only while they are in flight.
const CHUNK: usize = 256 * 1024;

/// What both directions of one tunnel share.
struct Shared {
    /// Bytes the tunnel may still move, both ways together (the per-connection cap).
    budget: AtomicU64,
    /// Milliseconds from `opened` to the last progress in either direction.
    last_progress_ms: AtomicU64,
    opened: Instant,
    counters: ByteCounters,
}

impl Shared {
    fn progress(&self, bytes: usize, way: Way) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.counters.add(way, bytes);
        let elapsed = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_progress_ms.store(elapsed, Ordering::Relaxed);
    }

    /// Take up to `wanted` bytes of the budget; none left is the cap's error.
    fn take(&self, wanted: usize) -> io::Result<usize> {
        let wanted = u64::try_from(wanted).unwrap_or(u64::MAX);
        let mut left = self.budget.load(Ordering::Relaxed);
        loop {
            if left == 0 {
                return Err(io::Error::other("connection reached its byte cap"));
            }
            let taken = left.min(wanted);
            match self.budget.compare_exchange_weak(
                left,
                left - taken,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                // `taken` is at most `wanted`, which came from a usize.
                Ok(_) => return Ok(usize::try_from(taken).unwrap_or(usize::MAX)),
                Err(now) => left = now,
            }
        }
    }

    /// Give back what a splice did not move.
    fn refund(&self, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.budget.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// The two sockets of an open tunnel and its limits.
pub(crate) struct Tunnel {
    pub(crate) client: Client,
    pub(crate) upstream: Upstream,
    /// What the client sent after its CONNECT head, read by the HTTP parser already.
    pub(crate) early: Bytes,
    pub(crate) idle: Duration,
    pub(crate) budget: u64,
    /// Upstream's counters: `read` is what came down, `written` what went up.
    pub(crate) counters: ByteCounters,
}

impl Tunnel {
    /// Move bytes both ways until both sides have finished, either fails, the tunnel idles past
    /// its time-out or the proxy stops.
    pub(crate) async fn run(self, shutdown: &CancellationToken) -> io::Result<()> {
        let upstream = match self.upstream {
            Upstream::Plain(socket) => socket,
            Upstream::Tls(session) => {
                let upstream = Bounded::new(
                    Upstream::Tls(session),
                    self.idle,
                    self.budget,
                    self.counters,
                );
                return tokio::select! {
                    result = copied(self.client, upstream, self.early) => result,
                    () = shutdown.cancelled() => Ok(()),
                };
            }
        };
        let shared = Shared {
            budget: AtomicU64::new(self.budget),
            last_progress_ms: AtomicU64::new(0),
            opened: Instant::now(),
            counters: self.counters,
        };
        let early = self.early;
        let moved = async {
            match self.client {
                Either::Left(unix) => both_ways(&unix, &upstream, early, &shared).await,
                Either::Right(tcp) => both_ways(&tcp, &upstream, early, &shared).await,
            }
        };
        tokio::select! {
            result = moved => result,
            error = watch_idle(&shared, self.idle) => Err(error),
            () = shutdown.cancelled() => Ok(()),
        }
    }
}

/// Both ways through the proxy's own buffers, for an upstream the kernel cannot splice.
async fn copied(
    mut client: Client,
    mut upstream: Bounded<Upstream>,
    early: Bytes,
) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    upstream.write_all(&early).await?;
    upstream.flush().await?;
    drop(early);
    tokio::io::copy_bidirectional(&mut client, &mut upstream)
        .await
        .map(|_| ())
}

async fn both_ways(
    client: &impl Socket,
    upstream: &TcpStream,
    early: Bytes,
    shared: &Shared,
) -> io::Result<()> {
    write_all(upstream, &early, shared).await?;
    // It may hold the HTTP parser's whole read buffer: not for the tunnel's life.
    drop(early);
    tokio::try_join!(
        pump(client, upstream, shared, Way::Written),
        pump(upstream, client, shared, Way::Read),
    )
    .map(|_| ())
}

/// A socket on tokio's reactor: wait for a readiness, then try a call that clears it when the
/// kernel says it would block.
trait Socket: AsFd {
    async fn wait(&self, interest: Interest) -> io::Result<()>;
    fn attempt<R>(&self, interest: Interest, call: impl FnOnce() -> io::Result<R>)
    -> io::Result<R>;
}

/// Tokio's two stream types have the same readiness methods, but no trait of their own for them.
macro_rules! socket {
    ($stream:ty) => {
        impl Socket for $stream {
            async fn wait(&self, interest: Interest) -> io::Result<()> {
                self.ready(interest).await.map(|_| ())
            }
            fn attempt<R>(
                &self,
                interest: Interest,
                call: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                self.try_io(interest, call)
            }
        }
    };
}

socket!(TcpStream);
socket!(UnixStream);

/// Fails with `TimedOut` once `idle` passes with no progress either way.
async fn watch_idle(shared: &Shared, idle: Duration) -> io::Error {
    loop {
        let last = Duration::from_millis(shared.last_progress_ms.load(Ordering::Relaxed));
        let due = shared.opened + last + idle;
        if Instant::now() >= due {
            return io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long");
        }
        tokio::time::sleep_until(due).await;
    }
}

/// A pipe, made only while a direction has bytes to move.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // A host whose pipe-max-size is lower keeps the default: splices are then smaller.
        let _ = rustix::pipe::fcntl_setpipe_size(&write, CHUNK);
        Ok(Self { read, write })
    }
}

/// One direction: whatever `from` has goes to `to`, until `from` ends (then `to` is told no
/// more will come).
async fn pump(
    from: &impl Socket,
    to: &impl Socket,
    shared: &Shared,
    // Which way for upstream's counters: what the client sends is written to upstream.
    way: Way,
) -> io::Result<()> {
    // Kept while bytes keep coming; dropped (both ends closed) when the source has none ready.
    let mut pipe: Option<Pipe> = None;
    loop {
        from.wait(Interest::READABLE).await?;
        let wanted = shared.take(CHUNK)?;
        let pipe_now = match &pipe {
            Some(pipe) => pipe,
            None => pipe.insert(Pipe::new()?),
        };
        let spliced = from.attempt(Interest::READABLE, || {
            rustix::pipe::splice(
                from.as_fd(),
                None,
                pipe_now.write.as_fd(),
                None,
                wanted,
                SpliceFlags::NONBLOCK | SpliceFlags::MOVE,
            )
            .map_err(io::Error::from)
        });
        match spliced {
            Ok(0) => {
                shared.refund(wanted);
                // The source is done: so is this direction of the other side.
                return match rustix::net::shutdown(to.as_fd(), rustix::net::Shutdown::Write) {
                    Ok(()) | Err(rustix::io::Errno::NOTCONN) => Ok(()),
                    Err(error) => Err(error.into()),
                };
            }
            Ok(moved) => {
                shared.refund(wanted - moved);
                drain(pipe_now, moved, to).await?;
                shared.progress(moved, way);
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                shared.refund(wanted);
                // Nothing in flight this way: hold no pipe while waiting.
                pipe = None;
            }
            Err(error) => {
                shared.refund(wanted);
                return Err(error);
            }
        }
    }
}

/// Send the `bytes` waiting in `pipe` on to `to`.
async fn drain(pipe: &Pipe, mut bytes: usize, to: &impl Socket) -> io::Result<()> {
    while bytes > 0 {
        to.wait(Interest::WRITABLE).await?;
        let sent = to.attempt(Interest::WRITABLE, || {
            rustix::pipe::splice(
                pipe.read.as_fd(),
                None,
                to.as_fd(),
                None,
                bytes,
                SpliceFlags::NONBLOCK | SpliceFlags::MOVE,
            )
            .map_err(io::Error::from)
        });
        match sent {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(sent) => bytes -= sent,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Write `bytes` (the client's early bytes) to `to`, within the cap.
async fn write_all(to: &TcpStream, mut bytes: &[u8], shared: &Shared) -> io::Result<()> {
    while !bytes.is_empty() {
        let wanted = shared.take(bytes.len())?;
        to.wait(Interest::WRITABLE).await?;
        match to.try_write(&bytes[..wanted]) {
            Ok(written) => {
                shared.refund(wanted - written);
                shared.progress(written, Way::Written);
                bytes = &bytes[written..];
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => shared.refund(wanted),
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
