//! Asking a route's parent proxy for a tunnel to a destination the policy allowed
//! (`airlock_policy::route` says why and when). What comes back is the plain TCP socket to the
//! parent with the tunnel open on it, so a tunnel through a parent is spliced like a direct one.
//!
//! The parent hears only what the policy allowed: the vetted address (pinned), or the judged name
//! (parent resolves). Its credentials go in one header or one SOCKS5 exchange and nowhere else:
//! every error here names the route and the parent's answer, never them.

use std::net::SocketAddr;
use std::time::Duration;

use airlock_policy::{Parent, ParentKind};
use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::parent_tls::ParentTls;
use crate::upstream::Upstream;

/// The largest answer head a parent may send to `CONNECT`.
const MAX_ANSWER_HEAD: usize = 16 * 1024;

/// What the parent is asked to reach.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A vetted address (a pinned route).
    Address(SocketAddr),
    /// A judged name the parent resolves.
    Name(&'a str, u16),
}

impl std::fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // `SocketAddr` writes IPv6 in brackets, as an authority wants it.
            Self::Address(address) => write!(f, "{address}"),
            Self::Name(name, port) => write!(f, "{name}:{port}"),
        }
    }
}

/// Why a parent gave no tunnel. Never carries its credentials.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParentError {
    /// The parent could not be reached.
    #[error("its parent proxy could not be reached: {0}")]
    Unreachable(std::io::Error),
    /// TLS with an `https://` parent failed (its certificate, most often).
    #[error(
        "TLS with its parent proxy failed ({0}): its certificate must name the parent's host and chain to a public root or a CA given with --ca-cert"
    )]
    Tls(String),
    /// The parent asked for credentials, or refused the ones it was given (how it said so).
    #[error("its parent proxy refused the credentials ({0}): check the route's credentials file")]
    Credentials(&'static str),
    /// The parent refused the destination.
    #[error("its parent proxy refused the destination ({0})")]
    Refused(String),
    /// The parent's answer was not one a proxy gives.
    #[error("its parent proxy answered with something that is not a proxy's answer ({0})")]
    Garbled(&'static str),
}

/// A tunnel to `target` through `parent`, within `timeout` for the whole exchange (TLS
/// included).
pub(crate) async fn tunnel(
    parent: &Parent,
    target: Target<'_>,
    timeout: Duration,
    tls: &ParentTls,
) -> Result<Upstream, TunnelStop> {
    match tokio::time::timeout(timeout, open(parent, target, tls)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error)) => Err(TunnelStop::Failed(error)),
        Err(_) => Err(TunnelStop::TimedOut),
    }
}

/// How a tunnel through a parent did not open.
#[derive(Debug)]
pub(crate) enum TunnelStop {
    /// The parent failed or refused.
    Failed(ParentError),
    /// The exchange took longer than the connect time-out.
    TimedOut,
}

async fn open(
    parent: &Parent,
    target: Target<'_>,
    tls: &ParentTls,
) -> Result<Upstream, ParentError> {
    let socket = TcpStream::connect((parent.host.as_str(), parent.port))
        .await
        .map_err(ParentError::Unreachable)?;
    // Tunnelled bytes are small writes both ways (TLS records), as on a direct connection.
    let _ = socket.set_nodelay(true);
    match parent.kind {
        ParentKind::HttpConnect => http_connect(socket, parent, target)
            .await
            .map(Upstream::Plain),
        ParentKind::HttpsConnect => {
            let session = tls
                .connect(&parent.host, socket)
                .await
                .map_err(ParentError::Tls)?;
            http_connect(session, parent, target)
                .await
                .map(|session| Upstream::Tls(Box::new(session)))
        }
        ParentKind::Socks5 => socks5(socket, parent, target).await.map(Upstream::Plain),
    }
}

async fn http_connect<S: AsyncRead + AsyncWrite + Unpin>(
    mut socket: S,
    parent: &Parent,
    target: Target<'_>,
) -> Result<S, ParentError> {
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(credentials) = &parent.credentials {
        let pair = format!("{}:{}", credentials.user, credentials.password);
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        head.push_str(&format!("Proxy-Authorization: Basic {encoded}\r\n"));
    }
    head.push_str("\r\n");
    socket
        .write_all(head.as_bytes())
        .await
        .map_err(ParentError::Unreachable)?;
    // A TLS session holds what was written until flushed.
    socket.flush().await.map_err(ParentError::Unreachable)?;
    let answer = read_head(&mut socket).await?;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&answer) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) | Err(_) => {
            return Err(ParentError::Garbled("not an HTTP answer"));
        }
    }
    match response.code {
        Some(200..=299) => Ok(socket),
        Some(407) => Err(ParentError::Credentials("407")),
        Some(code) => Err(ParentError::Refused(format!(
            "{code} {}",
            response.reason.unwrap_or_default()
        ))),
        None => Err(ParentError::Garbled("no status")),
    }
}

/// The answer's head, read a byte at a time so nothing past it (the destination's first bytes)
/// is taken from the socket (over TLS, it stays in the session's buffer).
async fn read_head(socket: &mut (impl AsyncRead + Unpin)) -> Result<Vec<u8>, ParentError> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_ANSWER_HEAD {
            return Err(ParentError::Garbled("an answer head over 16 KiB"));
        }
        match socket.read(&mut byte).await {
            Ok(0) => return Err(ParentError::Garbled("it closed before answering")),
            Ok(_) => head.push(byte[0]),
            Err(error) => return Err(ParentError::Unreachable(error)),
        }
    }
    Ok(head)
}

async fn socks5(
    socket: TcpStream,
    parent: &Parent,
    target: Target<'_>,
) -> Result<TcpStream, ParentError> {
    use tokio_socks::tcp::Socks5Stream;
    let connected = match (target, &parent.credentials) {
        (Target::Address(address), None) => {
            Socks5Stream::connect_with_socket(socket, address).await
        }
        (Target::Name(name, port), None) => {
            Socks5Stream::connect_with_socket(socket, (name, port)).await
        }
        (Target::Address(address), Some(c)) => {
            Socks5Stream::connect_with_password_and_socket(socket, address, &c.user, &c.password)
                .await
        }
        (Target::Name(name, port), Some(c)) => {
            Socks5Stream::connect_with_password_and_socket(
                socket,
                (name, port),
                &c.user,
                &c.password,
            )
            .await
        }
    };
    connected.map(Socks5Stream::into_inner).map_err(|error| {
        use tokio_socks::Error;
        match error {
            Error::Io(error) => ParentError::Unreachable(error),
            Error::PasswordAuthFailure(_) | Error::NoAcceptableAuthMethods => {
                ParentError::Credentials("SOCKS5 username and password")
            }
            Error::InvalidResponseVersion
            | Error::InvalidReservedByte
            | Error::UnknownAddressType
            | Error::UnknownAuthMethod => ParentError::Garbled("not a SOCKS5 answer"),
            // Its own words name the condition (ruleset, unreachable, refused, …), no credential.
            other => ParentError::Refused(other.to_string()),
        }
    })
}
