//! The real Docker socket: one connection per forwarded request (a Unix connect costs
//! microseconds, and a hijacked exec keeps its own).

use std::path::PathBuf;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The most bytes of an inspect answer the gate reads for its own checks.
const MAX_INSPECT_BYTES: usize = 4 << 20;

/// Why the Docker daemon could not be asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// Connecting to the socket failed.
    #[error(
        "cannot connect to the Docker socket {path}: {source} (is dockerd running, and may the gate's user open it?)"
    )]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("the Docker daemon's answer could not be read: {0}")]
    Http(#[from] hyper::Error),
    /// An inspect answer was too large or not JSON.
    #[error("the Docker daemon's answer to {0} was not JSON the gate could read")]
    Unreadable(String),
}

/// The Docker daemon behind the gate.
#[derive(Debug, Clone)]
pub(crate) struct Docker {
    socket: PathBuf,
}

impl Docker {
    pub(crate) fn new(socket: PathBuf) -> Self {
        Self { socket }
    }

    /// Send one request on a fresh connection (upgrades allowed: a hijacked exec).
    pub(crate) async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|source| UpstreamError::Connect {
                path: self.socket.clone(),
                source,
            })?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the answer (or the upgraded stream) is done; its error is the request's.
            let _ = connection.with_upgrades().await;
        });
        Ok(sender.send_request(request).await?)
    }

    /// `GET path` for the gate's own checks: the status and the JSON answer.
    pub(crate) async fn get_json(&self, path: &str) -> Result<(StatusCode, Value), UpstreamError> {
        let response = self.send(request("GET", path, None)).await?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_INSPECT_BYTES)
            .collect()
            .await
            .map_err(|_| UpstreamError::Unreadable(path.to_owned()))?
            .to_bytes();
        let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok((status, value))
    }

    /// Whether dockerd answers.
    pub(crate) async fn ping(&self) -> Result<(), UpstreamError> {
        let response = self.send(request("GET", "/_ping", None)).await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(UpstreamError::Unreadable("/_ping".to_owned()))
        }
    }
}

/// A request to dockerd as the gate writes it: its method, target and body, and nothing of the
/// client's. The method is one the judgement names and the target one it wrote, so building it
/// cannot fail; were it to, the request is refused rather than sent otherwise.
pub(crate) fn request(method: &str, target: &str, body: Option<Vec<u8>>) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(target)
        .header(http::header::HOST, "docker");
    if body.is_some() {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    let body = Full::new(Bytes::from(body.unwrap_or_default()));
    builder.body(body).unwrap_or_else(|_| {
        // A request dockerd answers with an error and that changes nothing: an unknown path.
        let mut refused = Request::new(Full::new(Bytes::new()));
        *refused.uri_mut() = http::Uri::from_static("/airlock-gate/unbuildable-request");
        refused
    })
}
