//! Tie an MCP request's work to the HTTP answer that carries it. Over streamable HTTP with
//! sessions, rmcp runs a `tools/call` in the session, not in the request: a client that drops its
//! connection mid-task (no cancel notification, no DELETE) would leave the task running, and its
//! browser and capacity slot held, until it ended by itself. So each POST gets a token that is
//! cancelled when its answer's body is dropped (sent whole, or its client gone), and a task ends
//! with it.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::middleware::Next;
use http::Response;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Cancelled once the HTTP answer to this request is gone. Found by a handler in the request's
/// `http::request::Parts`, which rmcp hands over in its context.
#[derive(Debug, Clone)]
pub(crate) struct AnswerGone(pub CancellationToken);

/// The middleware: gives each POST its token, cancelled when its answer's body is dropped.
pub(crate) async fn tie_to_answer(mut request: Request, next: Next) -> Response<Body> {
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let gone = CancellationToken::new();
    request.extensions_mut().insert(AnswerGone(gone.clone()));
    next.run(request).await.map(|inner| {
        Body::new(UntilDropped {
            inner,
            _gone: gone.drop_guard(),
        })
    })
}

/// A body that cancels its token when dropped.
struct UntilDropped {
    inner: Body,
    _gone: DropGuard,
}

impl HttpBody for UntilDropped {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
