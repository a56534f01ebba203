//! A connection whose writes may stall for at most a bound: a client that sends (or pipelines)
//! requests and never reads the answers would otherwise keep its connection, and the answers the
//! server has buffered for it, for as long as it likes. Reads are not bounded here (an SSE stream
//! or a CDP WebSocket may rightly hear nothing from its client for minutes); hyper's header time
//! limit bounds a connection waiting for its next request.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, whose writes fail once one has waited `limit` for the peer to make room.
pub(super) struct WriteDeadline<T> {
    inner: T,
    limit: Duration,
    /// Running while a write (or flush) waits for room.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteDeadline<T> {
    pub(super) fn new(inner: T, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Turn a pending write into a time-out once it has waited `limit`; clear the wait when the
    /// write makes progress.
    fn bounded<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read its answer in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.bounded(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.bounded(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.bounded(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn a_peer_that_never_reads_fails_the_write_after_the_limit_and_a_reader_never_does() {
        // A pipe with a small buffer; nobody reads the far end.
        let (near, far) = tokio::io::duplex(1024);
        let mut writer = WriteDeadline::new(near, Duration::from_millis(200));
        let chunk = vec![b'x'; 64 * 1024];
        let error = writer.write_all(&chunk).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        drop(far);

        // A peer that reads, however slowly in total, is never cut off.
        let (near, mut far) = tokio::io::duplex(1024);
        let mut writer = WriteDeadline::new(near, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut far, &mut sink)
                .await
                .unwrap();
            sink.len()
        });
        writer.write_all(&chunk).await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        assert_eq!(reader.await.unwrap(), chunk.len());
    }
}
