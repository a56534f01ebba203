//! This server's own origin as a request names it, so its own pages (the dashboard) may call it:
//! a browser sends `Origin` on every `POST` and WebSocket, and a page we served sends ours. The
//! Host check has already judged the host, so an origin equal to `scheme://host` is one of ours.

use http::header::{HOST, ORIGIN};
use http::{HeaderMap, Uri};

/// `scheme://host[:port]`, lowercased, of this server as the request names it: the request
/// line's authority when it has one, else its one `Host` header.
pub(super) fn own_origin(uri: &Uri, headers: &HeaderMap, tls: bool) -> Option<String> {
    let host = if let Some(authority) = uri.authority() {
        authority.as_str().to_owned()
    } else {
        let mut hosts = headers.get_all(HOST).iter();
        let host = hosts.next()?.to_str().ok()?.to_owned();
        if hosts.next().is_some() {
            return None;
        }
        host
    };
    let scheme = if tls { "https" } else { "http" };
    Some(format!("{scheme}://{}", host.to_ascii_lowercase()))
}

/// Whether the request's `Origin` is this server's own.
pub(super) fn from_own_page(uri: &Uri, headers: &HeaderMap, tls: bool) -> bool {
    let Some(origin) = headers.get(ORIGIN).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    own_origin(uri, headers, tls).is_some_and(|own| own == origin.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_page_of_ours_names_our_scheme_and_host() {
        let root = Uri::from_static("/ui");
        let ours = headers(&[
            ("host", "127.0.0.1:8700"),
            ("origin", "http://127.0.0.1:8700"),
        ]);
        assert!(from_own_page(&root, &ours, false));
        assert!(!from_own_page(&root, &ours, true), "another scheme");
        let other_port = headers(&[
            ("host", "127.0.0.1:8700"),
            ("origin", "http://127.0.0.1:8701"),
        ]);
        assert!(!from_own_page(&root, &other_port, false));
        let other_site = headers(&[
            ("host", "127.0.0.1:8700"),
            ("origin", "http://evil.example"),
        ]);
        assert!(!from_own_page(&root, &other_site, false));
        let opaque = headers(&[("host", "127.0.0.1:8700"), ("origin", "null")]);
        assert!(!from_own_page(&root, &opaque, false));
        let no_origin = headers(&[("host", "127.0.0.1:8700")]);
        assert!(!from_own_page(&root, &no_origin, false));
        let two_hosts = headers(&[
            ("host", "127.0.0.1:8700"),
            ("host", "evil.example"),
            ("origin", "http://127.0.0.1:8700"),
        ]);
        assert!(!from_own_page(&root, &two_hosts, false));
    }

    #[test]
    fn the_request_lines_authority_wins_over_host() {
        let absolute = Uri::from_static("https://Airlock.example/ui");
        let named = headers(&[
            ("host", "evil.example"),
            ("origin", "https://airlock.example"),
        ]);
        assert!(from_own_page(&absolute, &named, true));
    }
}
