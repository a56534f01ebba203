//! Why the operator's settings make no [`super::callers::Callers`]: each reason names its flag and fix.

use std::net::SocketAddr;

/// The shortest token accepted: a guessable token is no token.
pub(super) const MIN_TOKEN_CHARS: usize = 16;

/// Why a guard could not be built from the operator's settings.
#[derive(Debug, thiserror::Error)]
pub enum CallersError {
    /// A token is short or holds spaces.
    #[error(
        "token {0} is shorter than {MIN_TOKEN_CHARS} characters or holds spaces: use long random tokens (for example `openssl rand -hex 32`)"
    )]
    WeakToken(usize),
    /// A token holds bytes HTTP clients do not send reliably.
    #[error(
        "token {0} holds characters outside printable ASCII, which no HTTP client sends reliably in a header: use letters, digits and punctuation only (for example `openssl rand -hex 32`)"
    )]
    TokenNotAscii(usize),
    /// Reachable from the network with no token.
    #[error(
        "--listen {0} is not a loopback address, and no token is set: anyone who reaches it could run browsers. Set AIRLOCK_TOKENS (comma-separated) or --tokens-file, or listen on 127.0.0.1"
    )]
    NoToken(SocketAddr),
    /// Any address, with no host named to check `Host` against.
    #[error(
        "--listen {0} accepts any address, so the Host header cannot be checked against it: name the hosts clients use with --allowed-host (repeatable), or --allowed-host '*' behind a proxy that checks Host"
    )]
    NoHost(SocketAddr),
    /// An allowed origin that is not one.
    #[error(
        "--allowed-origin `{0}` is not an origin: write scheme://host[:port], like https://app.example.com"
    )]
    NotAnOrigin(String),
}
