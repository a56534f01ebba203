//! The client's side of a connection: either kind of socket, and a close that lets the client
//! read the last answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::either::Either;

/// A browser's connection: made to `proxy.sock` (left), or handed off by the relay (right).
pub(crate) type Client = Either<UnixStream, TcpStream>;

/// Close a client connection so that it can still read what was written: shut down our side,
/// then discard what it sent until it closes too (bounded in time and bytes). Closing a socket
/// with unread input makes the peer's next read fail with a reset, losing the answer (a `431`
/// for an oversized head, a `503` when busy).
pub(crate) async fn linger(mut stream: Client) {
    const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
    const MAX_DISCARD: usize = 256 * 1024;
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut discarded = 0;
    let mut scratch = [0_u8; 8192];
    let drain = async {
        while discarded < MAX_DISCARD {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n,
            }
        }
    };
    // Time running out is the expected end for a client that never closes.
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// The client's socket, handed to hyper; when hyper lets go of it, it closes by [`linger`].
pub(crate) struct LingeringClose(pub(crate) Option<Client>);

impl Drop for LingeringClose {
    fn drop(&mut self) {
        if let (Some(stream), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(linger(stream));
        }
    }
}

impl AsyncRead for LingeringClose {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(stream) => Pin::new(stream).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for LingeringClose {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.0.as_mut() {
            Some(stream) => Pin::new(stream).poll_write(cx, data),
            None => Poll::Ready(Err(std::io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(stream) => Pin::new(stream).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(stream) => Pin::new(stream).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}
