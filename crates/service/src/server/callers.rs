//! The checks every request passes before any handler: the `Host` header names this server (DNS
//! rebinding), a browser `Origin` is one the operator allowed (a web page cannot drive a local
//! Airlock through the user's browser), and, for everything but the health probes, a bearer token
//! (compared in constant time; never logged).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderMap, Response, StatusCode, Uri};
use subtle::{ConditionallySelectable, ConstantTimeEq};

pub use super::callers_error::CallersError;
use super::callers_error::MIN_TOKEN_CHARS;
use crate::scope_request::Ceiling;

/// Who may call, from where.
#[derive(Clone)]
pub struct Callers {
    /// Bearer tokens; empty means no authentication (loopback only).
    tokens: Vec<Vec<u8>>,
    /// Each token's ceiling, in the same order.
    ceilings: Vec<Arc<Ceiling>>,
    /// The ceiling of callers without a token (a loopback server with no tokens).
    open: Arc<Ceiling>,
    /// Lowercased hosts (`name`, `name:port`, `[v6]:port`), each with whether it matches its name
    /// on any port (an operator's entry without a port), or `None` for any host (`*`).
    hosts: Option<Vec<(String, bool)>>,
    /// Lowercased `scheme://host[:port]` origins.
    origins: Vec<String>,
}

impl std::fmt::Debug for Callers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("Callers")
            .field("tokens", &self.tokens.len())
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .field("ceilings", &self.ceilings)
            .field("open", &self.open)
            .finish()
    }
}

impl Callers {
    /// A guard for a server listening on `listen`. `hosts` empty: the listen address (and
    /// `localhost` on loopback); `*` alone: any host.
    ///
    /// # Errors
    /// A weak token, no token off loopback, no host to check, or an origin that is not one.
    pub fn new(
        listen: SocketAddr,
        tokens: Vec<String>,
        hosts: &[String],
        origins: &[String],
    ) -> Result<Self, CallersError> {
        for (index, token) in tokens.iter().enumerate() {
            if token.chars().count() < MIN_TOKEN_CHARS || token.chars().any(char::is_whitespace) {
                return Err(CallersError::WeakToken(index + 1));
            }
            // HTTP clients send header values as they please outside printable ASCII, so such a
            // token would start the server and then never match.
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(CallersError::TokenNotAscii(index + 1));
            }
        }
        let loopback = listen.ip().is_loopback();
        if tokens.is_empty() && !loopback {
            return Err(CallersError::NoToken(listen));
        }
        let hosts = if hosts.iter().any(|h| h == "*") {
            None
        } else if hosts.is_empty() {
            if listen.ip().is_unspecified() {
                return Err(CallersError::NoHost(listen));
            }
            let mut names = vec![
                authority(listen.ip(), None),
                authority(listen.ip(), Some(listen.port())),
            ];
            if loopback {
                names.push("localhost".to_owned());
                names.push(format!("localhost:{}", listen.port()));
            }
            // The defaults are exact: the listen port, or none.
            Some(names.into_iter().map(|name| (name, false)).collect())
        } else {
            Some(
                hosts
                    .iter()
                    .map(|h| {
                        let host = h.trim().to_ascii_lowercase();
                        let any_port = name_of(&host) == host;
                        (host, any_port)
                    })
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
                    Err(CallersError::NotAnOrigin(origin))
                }
            })
            .collect::<Result<_, _>>()?;
        let open = Arc::new(Ceiling::server(airlock_policy::Scope::default()));
        // Until `with_ceilings` says more, each token's tasks and contexts are its own.
        let ceilings = tokens
            .iter()
            .map(|token| {
                Arc::new(Ceiling {
                    context_owner: crate::contexts::token_owner(token.as_bytes()),
                    ..Ceiling::server(airlock_policy::Scope::default())
                })
            })
            .collect();
        Ok(Self {
            ceilings,
            open,
            tokens: tokens.into_iter().map(String::into_bytes).collect(),
            hosts,
            origins,
        })
    }

    /// The refusal for a request that fails the Host or Origin check, if it does. The host judged
    /// is the one a proxy in front of us would use: the request line's authority when it has one
    /// (absolute form; RFC 9112 §3.2.2 says it wins over `Host`), else the one `Host` header. Two
    /// `Host` headers are a bad request (RFC 9110 §7.2).
    /// An `Origin` of this very server (its dashboard's pages, `tls` naming the scheme) passes.
    pub fn check_site(&self, uri: &Uri, headers: &HeaderMap, tls: bool) -> Option<Response<Body>> {
        if headers.get_all(HOST).iter().count() > 1 {
            return Some(refuse(
                StatusCode::BAD_REQUEST,
                "more than one Host header: send exactly one",
            ));
        }
        if let Some(hosts) = &self.hosts {
            let host = match uri.authority() {
                Some(authority) => Some(authority.as_str().to_ascii_lowercase()),
                None => headers
                    .get(HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_ascii_lowercase),
            };
            if !host.is_some_and(|host| host_allowed(hosts, &host)) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "the Host header does not name this server: call it by an allowed host (the operator adds names with --allowed-host)",
                ));
            }
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
            if !self.origins.contains(&origin) && !super::origin::from_own_page(uri, headers, tls) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "requests from web pages are refused: this origin is not allowed (the operator adds origins with --allowed-origin)",
                ));
            }
        }
        None
    }

    /// Give each token its ceiling (in the tokens' order) and callers without a token `open`.
    #[must_use]
    pub fn with_ceilings(mut self, tokens: Vec<Arc<Ceiling>>, open: Arc<Ceiling>) -> Self {
        debug_assert_eq!(tokens.len(), self.tokens.len());
        self.ceilings = tokens;
        self.open = open;
        self
    }

    /// The refusal for a request without a valid token, if it lacks one.
    pub fn check_token(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        self.authorize(headers).is_none().then(unauthorized)
    }

    /// The ceiling of the caller's token, or `None` for a request without a valid one.
    pub fn authorize(&self, headers: &HeaderMap) -> Option<Arc<Ceiling>> {
        if self.tokens.is_empty() {
            return Some(Arc::clone(&self.open));
        }
        let given = headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        self.ceiling_of(given?)
    }

    /// The ceiling of `given` if it is one of the tokens (the dashboard's sign-in form sends it).
    pub fn ceiling_of(&self, given: &str) -> Option<Arc<Ceiling>> {
        if self.tokens.is_empty() {
            return Some(Arc::clone(&self.open));
        }
        // Compare with every token and pick the match without a branch, so the time taken
        // does not say which one matched.
        let (found, index) = self.tokens.iter().enumerate().fold(
            (subtle::Choice::from(0), 0u32),
            |(found, index), (i, token)| {
                let equal = token.as_slice().ct_eq(given.as_bytes());
                let i = u32::try_from(i).unwrap_or(u32::MAX);
                (found | equal, u32::conditional_select(&index, &i, equal))
            },
        );
        if !bool::from(found) {
            return None;
        }
        usize::try_from(index)
            .ok()
            .and_then(|i| self.ceilings.get(i))
            .map(Arc::clone)
    }
}

/// The answer to a request without a valid token.
pub(super) fn unauthorized() -> Response<Body> {
    let mut response = refuse(
        StatusCode::UNAUTHORIZED,
        "a bearer token is required: send `Authorization: Bearer <token>` with one of the server's tokens",
    );
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"airlock\""),
    );
    response
}

/// Whether `host` (`name`, `name:port`, `[v6]`, `[v6]:port`, lowercased) is allowed: an entry with
/// a port matches exactly; an operator's entry without one matches its name on any port, since
/// this server serves only its listen port and a proxy in front may forward from another (443).
fn host_allowed(allowed: &[(String, bool)], host: &str) -> bool {
    let name = name_of(host);
    allowed
        .iter()
        .any(|(entry, any_port)| entry == host || (*any_port && entry == name))
}

/// The host without its port.
fn name_of(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.find(']').map_or(host, |end| &host[..end + 2]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
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
pub(super) fn refuse(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, &serde_json::json!({ "error": message }))
}

/// `503` with `Retry-After`: the server has no room now (capacity, sessions), so try again soon.
pub(super) fn busy(message: &str) -> Response<Body> {
    let mut response = refuse(StatusCode::SERVICE_UNAVAILABLE, message);
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("5"),
    );
    response
}

/// A JSON answer with this status.
pub(super) fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    let mut response = Response::new(Body::from(serde_json::to_string(value).unwrap_or_default()));
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

    impl Callers {
        fn check_site_plain(&self, uri: &Uri, headers: &HeaderMap) -> Option<Response<Body>> {
            self.check_site(uri, headers, false)
        }
    }

    fn root() -> Uri {
        Uri::from_static("/")
    }

    fn loopback() -> Callers {
        Callers::new(
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
                guard
                    .check_site_plain(&root(), &headers(&[("host", host)]))
                    .is_none(),
                "{host}"
            );
        }
        for host in [
            "evil.example:8700",
            "127.0.0.1.nip.io:8700",
            "localhost:9999",
        ] {
            let refused = guard
                .check_site_plain(&root(), &headers(&[("host", host)]))
                .unwrap();
            assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{host}");
        }
        assert!(
            guard.check_site_plain(&root(), &HeaderMap::new()).is_some(),
            "no Host at all"
        );
    }

    #[test]
    fn a_browser_origin_is_refused_unless_allowed() {
        let guard = loopback();
        let from = |origin| headers(&[("host", "127.0.0.1:8700"), ("origin", origin)]);
        assert!(
            guard
                .check_site_plain(&root(), &from("https://evil.example"))
                .is_some()
        );
        assert!(guard.check_site_plain(&root(), &from("null")).is_some());
        let allowing = Callers::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec![],
            &[],
            &["https://App.example.com/".into()],
        )
        .unwrap();
        assert!(
            allowing
                .check_site_plain(&root(), &from("https://app.example.com"))
                .is_none()
        );
        assert!(
            allowing
                .check_site_plain(&root(), &from("http://app.example.com"))
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
    fn each_token_brings_its_own_ceiling() {
        let ceiling = |allowed: &str, owner| {
            let scope = airlock_policy::Scope::parse([allowed], [] as [&str; 0]).unwrap();
            Arc::new(Ceiling {
                scope,
                owner,
                secret_names: None,
                context_owner: "local".to_owned(),
                route_names: None,
            })
        };
        let guard = loopback().with_ceilings(
            vec![
                ceiling("a.example", "this token"),
                ceiling("b.example", "this token"),
            ],
            ceiling("open.example", "the server"),
        );
        let with = |value: &str| headers(&[("authorization", value)]);
        let allowed = |value: &str| guard.authorize(&with(value)).unwrap().scope.to_string();
        assert_eq!(allowed(&format!("Bearer {TOKEN}")), "only a.example");
        assert_eq!(allowed("Bearer second-token-0123456"), "only b.example");
        assert!(
            guard
                .authorize(&with("Bearer third-token-0123456"))
                .is_none()
        );
    }

    #[test]
    fn unsafe_setups_are_refused_at_start_with_the_fix() {
        let open = Callers::new(
            "0.0.0.0:8700".parse().unwrap(),
            vec![],
            &["a.example".into()],
            &[],
        );
        assert!(open.unwrap_err().to_string().contains("AIRLOCK_TOKENS"));
        let anywhere = Callers::new(
            "0.0.0.0:8700".parse().unwrap(),
            vec![TOKEN.into()],
            &[],
            &[],
        );
        assert!(anywhere.unwrap_err().to_string().contains("--allowed-host"));
        let short = Callers::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec!["abc".into()],
            &[],
            &[],
        );
        assert!(short.unwrap_err().to_string().contains("shorter than 16"));
        let origin = Callers::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec![],
            &[],
            &["app.example".into()],
        );
        assert!(origin.unwrap_err().to_string().contains("scheme://host"));
    }

    #[test]
    fn a_non_ascii_token_is_refused_at_start() {
        let refused = Callers::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec!["0123456789abcdef-tökén".into()],
            &[],
            &[],
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("outside printable ASCII")
        );
    }

    #[test]
    fn two_host_headers_are_a_bad_request_and_the_request_lines_authority_wins() {
        let guard = loopback();
        let two = headers(&[("host", "127.0.0.1:8700"), ("host", "evil.example")]);
        let refused = guard.check_site_plain(&root(), &two).unwrap();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        let good_host = headers(&[("host", "127.0.0.1:8700")]);
        let absolute = Uri::from_static("http://evil.example/metrics");
        let refused = guard.check_site_plain(&absolute, &good_host).unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let own = Uri::from_static("http://127.0.0.1:8700/metrics");
        let evil_host = headers(&[("host", "evil.example")]);
        assert!(guard.check_site_plain(&own, &evil_host).is_none());
    }

    #[test]
    fn an_allowed_name_without_a_port_matches_it_on_any_port() {
        // deploy/airlock.service's own flags: --allowed-host airlock.internal.example.
        let guard = Callers::new(
            "127.0.0.1:8700".parse().unwrap(),
            vec![TOKEN.into()],
            &[
                "airlock.internal.example".into(),
                "[::1]".into(),
                "pinned.example:443".into(),
            ],
            &[],
        )
        .unwrap();
        for host in [
            "airlock.internal.example",
            "airlock.internal.example:8700",
            "AIRLOCK.internal.example:443",
            "[::1]:8700",
            "pinned.example:443",
        ] {
            assert!(
                guard
                    .check_site_plain(&root(), &headers(&[("host", host)]))
                    .is_none(),
                "{host}"
            );
        }
        for host in [
            "airlock.internal.example.evil:8700",
            "evil-airlock.internal.example",
            "pinned.example:8700",
            "pinned.example",
            "[::2]:8700",
            "airlock.internal.example:",
        ] {
            assert!(
                guard
                    .check_site_plain(&root(), &headers(&[("host", host)]))
                    .is_some(),
                "{host}"
            );
        }
    }

    #[test]
    fn the_shipped_systemd_units_flags_accept_a_request_naming_its_port() {
        let unit = include_str!("../../../../deploy/airlock.service");
        let words: Vec<&str> = unit
            .split_whitespace()
            .filter(|word| *word != "\\")
            .collect();
        let flag = |name: &str| {
            words
                .windows(2)
                .filter(|pair| pair[0] == name)
                .map(|pair| pair[1].to_owned())
                .collect::<Vec<String>>()
        };
        let listen: SocketAddr = flag("--listen")[0].parse().unwrap();
        let hosts = flag("--allowed-host");
        assert!(!hosts.is_empty(), "the unit names its host");
        let guard = Callers::new(listen, vec![TOKEN.into()], &hosts, &[]).unwrap();
        for host in &hosts {
            let with_port = format!("{host}:{}", listen.port());
            assert!(
                guard
                    .check_site_plain(&root(), &headers(&[("host", &with_port)]))
                    .is_none(),
                "{with_port}"
            );
        }
    }
}
