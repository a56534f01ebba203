//! Why a request stopped before its destination answered: one variant per condition, each with
//! the HTTP status the browser gets and the text that goes with it.

use std::net::SocketAddr;

use airlock_policy::Refusal;
use http::StatusCode;

use crate::network::ResolveError;
use crate::parent::ParentError;

/// A request the proxy stopped. `Display` is the reason people and the worker read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stop {
    /// The egress policy refused the destination (`403`).
    #[error(transparent)]
    Refused(Refusal),
    /// `CONNECT` without `host:port` (`400`).
    #[error("CONNECT needs host:port")]
    ConnectWithoutAuthority,
    /// An origin-form request: the client does not know it talks to a proxy (`400`).
    #[error(
        "this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port"
    )]
    NotAbsoluteForm,
    /// `GET https://…` instead of a tunnel (`400`).
    #[error("https goes through CONNECT host:443")]
    HttpsWithoutConnect,
    /// A scheme the proxy does not forward (`400`).
    #[error("scheme `{scheme}` is not proxied: only http (and https through CONNECT)")]
    SchemeNotProxied {
        /// The scheme as written.
        scheme: String,
    },
    /// `Upgrade` on a forwarded request; WebSockets use tunnels (`400`).
    #[error("Upgrade over plain HTTP is not proxied; WebSockets go through CONNECT")]
    UpgradeOverHttp,
    /// The name has no addresses, or the lookup failed (`502`).
    #[error(transparent)]
    Unresolved(ResolveError),
    /// The lookup took longer than `resolve_timeout` (`504`).
    #[error("looking up `{name}` timed out")]
    ResolveTimedOut {
        /// The name looked up.
        name: String,
    },
    /// Nothing was left to try (`502`).
    #[error("no address to connect to")]
    NoAddress,
    /// The last vetted address refused or failed the connection (`502`).
    #[error("connecting to {address} failed: {source}")]
    ConnectFailed {
        /// The vetted address tried.
        address: SocketAddr,
        /// What the connection said.
        source: std::io::Error,
    },
    /// The last vetted address did not answer within `connect_timeout` (`504`).
    #[error("connecting to {address} timed out")]
    ConnectTimedOut {
        /// The vetted address tried.
        address: SocketAddr,
    },
    /// The route's parent proxy gave no tunnel (`502`).
    #[error("route `{route}`: {error}")]
    Parent {
        /// The route.
        route: String,
        /// What the parent did.
        error: crate::parent::ParentError,
    },
    /// The route's parent proxy did not open a tunnel within `connect_timeout` (`504`).
    #[error("route `{route}`: its parent proxy did not open a tunnel in time")]
    ParentTimedOut {
        /// The route.
        route: String,
    },
    /// A forwarded request's destination failed before answering (`502`).
    #[error("the destination did not answer: {0}")]
    UpstreamFailed(hyper::Error),
    /// A forwarded request's destination went idle past `idle_timeout` (`504`).
    #[error("the destination did not answer: {0}")]
    UpstreamTimedOut(hyper::Error),
}

impl Stop {
    /// What the page is told: the reason, without what the host's resolver answered for a
    /// refused name ([`Refusal::for_page`]).
    pub(crate) fn page_text(&self) -> String {
        match self {
            Self::Refused(refusal) => refusal.for_page(),
            other => other.to_string(),
        }
    }

    /// The status the browser is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Refused(_) => StatusCode::FORBIDDEN,
            Self::ConnectWithoutAuthority
            | Self::NotAbsoluteForm
            | Self::HttpsWithoutConnect
            | Self::SchemeNotProxied { .. }
            | Self::UpgradeOverHttp => StatusCode::BAD_REQUEST,
            Self::Unresolved(_)
            | Self::NoAddress
            | Self::ConnectFailed { .. }
            | Self::Parent { .. }
            | Self::UpstreamFailed(_) => StatusCode::BAD_GATEWAY,
            Self::ResolveTimedOut { .. }
            | Self::ConnectTimedOut { .. }
            | Self::ParentTimedOut { .. }
            | Self::UpstreamTimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// What the proxy saw when the request failed rather than was refused, for events.
    pub(crate) fn failure_class(&self) -> &'static str {
        match self {
            Self::Refused(refusal) => refusal.class(),
            Self::ConnectWithoutAuthority
            | Self::NotAbsoluteForm
            | Self::HttpsWithoutConnect
            | Self::SchemeNotProxied { .. }
            | Self::UpgradeOverHttp => "bad-request",
            Self::Unresolved(ResolveError::NotFound { .. }) => "no-dns-answer",
            Self::Unresolved(ResolveError::Failed { .. }) => "dns-failed",
            Self::ResolveTimedOut { .. } => "dns-timeout",
            Self::NoAddress => "no-address",
            Self::ConnectFailed { source, .. }
                if source.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                "connect-refused"
            }
            Self::ConnectFailed { .. } => "connect-failed",
            Self::ConnectTimedOut { .. } => "connect-timeout",
            Self::Parent { error, .. } => match error {
                ParentError::Unreachable(_) => "parent-unreachable",
                ParentError::Credentials(_) => "parent-credentials",
                ParentError::Refused(_) => "parent-refused",
                ParentError::Garbled(_) => "parent-failed",
                ParentError::Tls(_) => "parent-tls",
            },
            Self::ParentTimedOut { .. } => "parent-timeout",
            Self::UpstreamFailed(_) => "upstream-failed",
            Self::UpstreamTimedOut(_) => "upstream-timeout",
        }
    }

    /// The refusal's class when the policy refused, for counters and events.
    pub(crate) fn refusal_class(&self) -> Option<&'static str> {
        match self {
            Self::Refused(refusal) => Some(refusal.class()),
            _ => None,
        }
    }

    /// A forwarded exchange that failed: a time-out anywhere in the error's chain is a `504`.
    pub(crate) fn upstream(error: hyper::Error) -> Self {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = source {
            if let Some(io) = current.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::TimedOut
            {
                return Self::UpstreamTimedOut(error);
            }
            source = current.source();
        }
        Self::UpstreamFailed(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_condition_answers_its_own_status() {
        let address: SocketAddr = "192.0.2.1:443".parse().unwrap();
        let refused = airlock_policy::EgressPolicy::default().decide_authority("127.0.0.1:80");
        let airlock_policy::Decision::Refuse(refusal) = refused else {
            panic!("loopback must be refused")
        };
        let cases = [
            (Stop::Refused(refusal), 403),
            (Stop::ConnectWithoutAuthority, 400),
            (Stop::NotAbsoluteForm, 400),
            (Stop::HttpsWithoutConnect, 400),
            (
                Stop::SchemeNotProxied {
                    scheme: "ftp".into(),
                },
                400,
            ),
            (Stop::UpgradeOverHttp, 400),
            (
                Stop::Unresolved(ResolveError::NotFound { name: "x".into() }),
                502,
            ),
            (Stop::ResolveTimedOut { name: "x".into() }, 504),
            (Stop::NoAddress, 502),
            (
                Stop::ConnectFailed {
                    address,
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                },
                502,
            ),
            (Stop::ConnectTimedOut { address }, 504),
            (parent(ParentError::Credentials("407")), 502),
            (parent(ParentError::Refused("403".into())), 502),
            (parent(ParentError::Garbled("no status line")), 502),
            (parent(ParentError::Tls("UnknownIssuer".into())), 502),
            (
                parent(ParentError::Unreachable(
                    std::io::ErrorKind::ConnectionRefused.into(),
                )),
                502,
            ),
            (
                Stop::ParentTimedOut {
                    route: "corp".into(),
                },
                504,
            ),
        ];
        for (stop, status) in cases {
            assert_eq!(stop.status().as_u16(), status, "{stop}");
            assert_eq!(stop.refusal_class().is_some(), status == 403, "{stop}");
            if status != 403 {
                // What `/metrics` may label a failure with: a fixed set, so a fixed cardinality.
                assert!(
                    crate::FAILURE_CLASSES.contains(&stop.failure_class()),
                    "{stop}: {}",
                    stop.failure_class()
                );
            }
        }
    }

    fn parent(error: ParentError) -> Stop {
        Stop::Parent {
            route: "corp".into(),
            error,
        }
    }
}
