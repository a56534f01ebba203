//! Rewriting requests for the upstream and writing the proxy's own answers.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

/// The body of every response the proxy sends.
pub(crate) type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// `http://host:port/path` without the query, which may carry secrets the logs need not hold.
pub(crate) fn event_target(uri: &Uri) -> String {
    match (uri.scheme_str(), uri.authority()) {
        (Some(scheme), Some(authority)) => format!("{scheme}://{authority}{}", uri.path()),
        _ => uri.path().to_owned(),
    }
}

/// The request target an origin server expects: path and query, nothing else.
pub(crate) fn origin_form(uri: &Uri) -> Uri {
    let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
    path.parse().unwrap_or_else(|_| Uri::from_static("/"))
}

/// Remove hop-by-hop headers (RFC 9110 §7.6.1), the ones `Connection` names, and every `Proxy-*`.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        HeaderName::from_static("keep-alive"),
    ] {
        headers.remove(name);
    }
    let proxy_headers: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy_headers {
        headers.remove(name);
    }
}

/// A response with no body (`200` to a CONNECT).
pub(crate) fn empty_response(status: StatusCode) -> Response<ProxyBody> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    response
}

/// The proxy's own answer: `Airlock: <reason>` as the body, and the reason in `header_name`.
pub(crate) fn text_response(
    status: StatusCode,
    header_name: &'static str,
    reason: &str,
) -> Response<ProxyBody> {
    let body = format!("Airlock: {reason}\n");
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    // Header values must be visible ASCII; the body keeps the exact text.
    let printable: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if let Ok(value) = HeaderValue::from_str(&printable) {
        headers.insert(HeaderName::from_static(header_name), value);
    }
    response
}
