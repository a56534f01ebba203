//! A stream wrapper that enforces the idle time-out and the byte cap, and counts bytes.
//!
//! Wrapping the stream (rather than the copy loop) means the same limits hold for CONNECT
//! tunnels, forwarded requests and the client's own connection, in both directions.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Where a bounded stream adds the bytes it moved: the proxy's totals and, for a connection to a
/// destination, that connection's own (reported when it closes).
#[derive(Debug, Clone)]
pub(crate) struct ByteCounters {
    pub(crate) read: Arc<AtomicU64>,
    pub(crate) written: Arc<AtomicU64>,
    pub(crate) own: Option<Arc<OwnBytes>>,
}

/// One connection's bytes.
#[derive(Debug, Default)]
pub(crate) struct OwnBytes {
    pub(crate) read: AtomicU64,
    pub(crate) written: AtomicU64,
}

/// Which way bytes moved, from the bounded stream's side.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Way {
    Read,
    Written,
}

impl ByteCounters {
    pub(crate) fn add(&self, way: Way, bytes: u64) {
        let (total, own) = match way {
            Way::Read => (&self.read, self.own.as_deref().map(|own| &own.read)),
            Way::Written => (&self.written, self.own.as_deref().map(|own| &own.written)),
        };
        total.fetch_add(bytes, Ordering::Relaxed);
        if let Some(own) = own {
            own.fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

/// A stream that fails with `TimedOut` after `idle` without progress in either direction, and
/// with an error once it has moved `budget` bytes in total.
pub(crate) struct Bounded<S> {
    inner: S,
    idle: Duration,
    /// Armed for `idle` after some earlier progress; moved forward lazily when it fires, so a busy
    /// stream does not touch the timer wheel on every read and write.
    deadline: Pin<Box<Sleep>>,
    last_progress: Instant,
    budget: u64,
    counters: ByteCounters,
}

impl<S> Bounded<S> {
    pub(crate) fn new(inner: S, idle: Duration, budget: u64, counters: ByteCounters) -> Self {
        Self {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            last_progress: Instant::now(),
            budget,
            counters,
        }
    }

    /// The stream and what is left of its limits, for a tunnel that enforces them itself.
    pub(crate) fn into_parts(self) -> (S, Duration, u64, ByteCounters) {
        (self.inner, self.idle, self.budget, self.counters)
    }

    /// This connection's own byte counts, if it keeps them.
    pub(crate) fn own_bytes(&self) -> Option<Arc<OwnBytes>> {
        self.counters.own.clone()
    }

    fn progress(&mut self, bytes: usize, way: Way) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.budget = self.budget.saturating_sub(bytes);
        self.counters.add(way, bytes);
        self.last_progress = Instant::now();
    }

    /// Whether `idle` has passed since the last progress; otherwise the timer is (re)armed so
    /// this task wakes when it could have.
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = self.last_progress + self.idle;
            if Instant::now() >= due {
                return true;
            }
            self.deadline.as_mut().reset(due);
        }
    }
}

fn idle_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")
}

fn cap_error() -> io::Error {
    io::Error::other("connection reached its byte cap")
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.budget == 0 {
            return Poll::Ready(Err(cap_error()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                // Bytes past the cap are dropped: the reader sees the cut, then an error.
                let allowed = usize::try_from(this.budget).unwrap_or(usize::MAX).min(read);
                buf.set_filled(before + allowed);
                this.progress(allowed, Way::Read);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let allowed = usize::try_from(this.budget)
            .unwrap_or(usize::MAX)
            .min(data.len());
        if allowed == 0 && !data.is_empty() {
            return Poll::Ready(Err(cap_error()));
        }
        match Pin::new(&mut this.inner).poll_write(cx, &data[..allowed]) {
            Poll::Ready(Ok(written)) => {
                this.progress(written, Way::Written);
                Poll::Ready(Ok(written))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(idle_error())),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }
}
