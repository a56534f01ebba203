//! The checks every request passes before any handler: the `Host` header names this server (DNS
//! rebinding), a browser `Origin` is one the operator allowed (a web page cannot drive a local
//! Airlock through the user's browser), and, for everything but the health probes, a bearer token
//! (compared in constant time; never logged).

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderMap, Response, StatusCode};
use subtle::ConstantTimeEq;

/// The shortest token accepted: a guessable token is no token.
pub(crate) const MIN_TOKEN_CHARS: usize = 16;

/// Who may call, from where.
#[derive(Clone)]
pub(crate) struct Guard {
    /// Bearer tokens; empty means no authentication (loopback only).
    tokens: Vec<Vec<u8>>,
    /// Lowercased hosts (`name`, `name:port`, `[v6]:port`), or `None` for any (`*`).
    hosts: Option<Vec<String>>,
    /// Lowercased `scheme://host[:port]` origins.
    origins: Vec<String>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("Guard")
            .field("tokens", &self.tokens.len())
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .finish()
    }
}

impl Guard {
    /// A guard for a server listening on `listen`. `hosts` empty: the listen address (and
    /// `localhost` on loopback); `*` alone: any host.
    pub(crate) fn new(
        listen: SocketAddr,
        tokens: Vec<String>,
        hosts: &[String],
        origins: &[String],
    ) -> anyhow::Result<Self> {
        for (index, token) in tokens.iter().enumerate() {
            if token.chars().count() < MIN_TOKEN_CHARS || token.chars().any(char::is_whitespace) {
                anyhow::bail!(
                    "token {} is shorter than {MIN_TOKEN_CHARS} characters or holds spaces: use long random tokens (for example `openssl rand -hex 32`)",
                    index + 1
                );
            }
        }
        let loopback = listen.ip().is_loopback();
        if tokens.is_empty() && !loopback {
            anyhow::bail!(
                "--listen {listen} is not a loopback address, and no token is set: anyone who reaches it could run browsers. Set AIRLOCK_TOKENS (comma-separated) or --tokens-file, or listen on 127.0.0.1"
            );
        }
        let hosts = if hosts.iter().any(|h| h == "*") {
            None
        } else if hosts.is_empty() {
            if listen.ip().is_unspecified() {
                anyhow::bail!(
                    "--listen {listen} accepts any address, so the Host header cannot be checked against it: name the hosts clients use with --allowed-host (repeatable), or --allowed-host '*' behind a proxy that checks Host"
                );
            }
            let mut names = vec![
                authority(listen.ip(), None),
                authority(listen.ip(), Some(listen.port())),
            ];
            if loopback {
                names.push("localhost".to_owned());
                names.push(format!("localhost:{}", listen.port()));
            }
            Some(names)
        } else {
            Some(
                hosts
                    .iter()
                    .map(|h| h.trim().to_ascii_lowercase())
                    .collect(),
            )
        };
        let origins = origins
            .iter()
            .map(|origin| {
                let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
                if origin.starts_with("http://") || origin.starts_with("https://") {
                    Ok(origin)
                } else {
                    anyhow::bail!(
                        "--allowed-origin `{origin}` is not an origin: write scheme://host[:port], like https://app.example.com"
                    )
                }
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            tokens: tokens.into_iter().map(String::into_bytes).collect(),
            hosts,
            origins,
        })
    }

    /// The refusal for a request that fails the Host or Origin check, if it does.
    pub(crate) fn check_site(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        if let Some(hosts) = &self.hosts {
            let host = headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_ascii_lowercase);
            match host {
                Some(host) if hosts.contains(&host) => {}
                _ => {
                    return Some(refuse(
                        StatusCode::FORBIDDEN,
                        "the Host header does not name this server: call it by an allowed host (the operator adds names with --allowed-host)",
                    ));
                }
            }
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
            if !self.origins.contains(&origin) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "requests from web pages are refused: this origin is not allowed (the operator adds origins with --allowed-origin)",
                ));
            }
        }
        None
    }

    /// The refusal for a request without a valid token, if it lacks one.
    pub(crate) fn check_token(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        if self.tokens.is_empty() {
            return None;
        }
        let given = headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let valid = given.is_some_and(|given| {
            // Compare with every token, so the time taken does not say which one matched.
            self.tokens
                .iter()
                .fold(subtle::Choice::from(0), |found, token| {
                    found | token.as_slice().ct_eq(given.as_bytes())
                })
                .into()
        });
        if valid {
            return None;
        }
        let mut response = refuse(
            StatusCode::UNAUTHORIZED,
            "a bearer token is required: send `Authorization: Bearer <token>` with one of the server's tokens",
        );
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"airlock\""),
        );
        Some(response)
    }
}

fn authority(ip: IpAddr, port: Option<u16>) -> String {
    let host = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    match port {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// A JSON error answer: `{"error": "..."}`.
pub(crate) fn refuse(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, &serde_json::json!({ "error": message }))
}

/// A JSON answer with this status.
pub(crate) fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-token";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn loopback() -> Guard {
        Guard::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec![TOKEN.into(), "second-token-0123456".into()],
            &[],
            &[],
        )
        .unwrap()
    }

    #[test]
    fn hosts_default_to_the_listen_address_and_localhost() {
        let guard = loopback();
        for host in [
            "127.0.0.1:8700",
            "localhost:8700",
            "LOCALHOST:8700",
            "127.0.0.1",
        ] {
            assert!(
                guard.check_site(&headers(&[("host", host)])).is_none(),
                "{host}"
            );
        }
        for host in [
            "evil.example:8700",
            "127.0.0.1.nip.io:8700",
            "localhost:9999",
        ] {
            let refused = guard.check_site(&headers(&[("host", host)])).unwrap();
            assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{host}");
        }
        assert!(
            guard.check_site(&HeaderMap::new()).is_some(),
            "no Host at all"
        );
    }

    #[test]
    fn a_browser_origin_is_refused_unless_allowed() {
        let guard = loopback();
        let from = |origin| headers(&[("host", "127.0.0.1:8700"), ("origin", origin)]);
        assert!(guard.check_site(&from("https://evil.example")).is_some());
        assert!(guard.check_site(&from("null")).is_some());
        let allowing = Guard::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec![],
            &[],
            &["https://App.example.com/".into()],
        )
        .unwrap();
        assert!(
            allowing
                .check_site(&from("https://app.example.com"))
                .is_none()
        );
        assert!(
            allowing
                .check_site(&from("http://app.example.com"))
                .is_some()
        );
    }

    #[test]
    fn tokens_are_bearer_any_of_several_and_answer_401_with_a_challenge() {
        let guard = loopback();
        let with = |value: &str| headers(&[("authorization", value)]);
        assert!(
            guard
                .check_token(&with(&format!("Bearer {TOKEN}")))
                .is_none()
        );
        assert!(
            guard
                .check_token(&with("bearer second-token-0123456"))
                .is_none(),
            "rotation"
        );
        for bad in [&format!("Bearer {TOKEN}x"), "Bearer ", "Basic abc", TOKEN] {
            let refused = guard.check_token(&with(bad)).unwrap();
            assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(
                refused.headers()[WWW_AUTHENTICATE],
                "Bearer realm=\"airlock\""
            );
        }
        assert!(guard.check_token(&HeaderMap::new()).is_some());
        assert!(
            !format!("{guard:?}").contains(TOKEN),
            "Debug shows no token"
        );
    }

    #[test]
    fn unsafe_setups_are_refused_at_start_with_the_fix() {
        let open = Guard::new(
            "0.0.0.0:8700".parse().unwrap(),
            vec![],
            &["a.example".into()],
            &[],
        );
        assert!(open.unwrap_err().to_string().contains("AIRLOCK_TOKENS"));
        let anywhere = Guard::new(
            "0.0.0.0:8700".parse().unwrap(),
            vec![TOKEN.into()],
            &[],
            &[],
        );
        assert!(anywhere.unwrap_err().to_string().contains("--allowed-host"));
        let short = Guard::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec!["abc".into()],
            &[],
            &[],
        );
        assert!(short.unwrap_err().to_string().contains("shorter than 16"));
        let origin = Guard::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec![],
            &[],
            &["app.example".into()],
        );
        assert!(origin.unwrap_err().to_string().contains("scheme://host"));
    }
}
