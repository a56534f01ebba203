//! Reading an http(s) URL the way a browser reads it, far enough to know where it goes.
//!
//! Browsers forgive a lot before they parse: they trim leading and trailing C0 controls and spaces,
//! delete every tab and newline anywhere, accept the scheme in any case, and treat `\` like `/` in
//! http(s) URLs. A check that skips those steps can be walked around (`java\tscript:`), so every
//! URL decision here starts from the cleaned text.
//!
//! Other programs reuse these decisions before fetching with non-browser clients, which follow RFC
//! 3986 instead. Where the two standards would find different hosts in the same text (a `\` in or
//! before the authority, a slash count other than two, tabs or newlines inside, a percent-encoded
//! host), the URL is refused as ambiguous rather than judged by one reading of it.

use airlock_address::{Host, parse_host};

use crate::Refusal;

/// Where an http(s) URL points: scheme, host and effective port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTarget {
    /// `http` or `https`, lower case.
    pub scheme: &'static str,
    /// The host, normalised as a browser would.
    pub host: Host,
    /// The explicit port, or the scheme's default.
    pub port: u16,
}

/// The text a browser actually parses: outer C0 controls and spaces trimmed, tabs and newlines
/// removed everywhere.
pub(crate) fn browser_clean(input: &str) -> String {
    input
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

/// The scheme of a cleaned URL, lower-cased, if it starts with one (`letter (letter|digit|+|-|.)* :`).
pub(crate) fn scheme_of(cleaned: &str) -> Option<String> {
    let (candidate, _) = cleaned.split_once(':')?;
    let mut chars = candidate.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then(|| candidate.to_ascii_lowercase())
}

/// Parse an http(s) URL into where it goes. Refuses other schemes, credentials in the URL and
/// host spellings that browsers and checks could read differently.
///
/// A URL without a scheme is read as https, as agent-browser does, but only when nothing in it
/// could be taken for a scheme: `example.com/path` is https, `example.com:8080` must be written
/// with its scheme.
pub fn parse_http_url(input: &str) -> Result<UrlTarget, Refusal> {
    let cleaned = browser_clean(input);
    let explicit_scheme = scheme_of(&cleaned).is_some();
    let (scheme, rest) = match scheme_of(&cleaned) {
        Some(scheme) => {
            let rest = &cleaned[scheme.len() + 1..];
            match scheme.as_str() {
                "http" => ("http", rest),
                "https" => ("https", rest),
                // `example.com:8080` reads as scheme `example.com`; say what was meant.
                _ if !rest.starts_with('/') && rest.starts_with(|c: char| c.is_ascii_digit()) => {
                    return Err(Refusal::Unreadable {
                        input: input.to_owned(),
                        why: "write the URL with http:// or https:// in front",
                    });
                }
                _ => return Err(Refusal::Scheme { scheme }),
            }
        }
        None if cleaned.contains(':') && !cleaned.contains("://") => {
            return Err(Refusal::Unreadable {
                input: input.to_owned(),
                why: "write the URL with http:// or https:// in front",
            });
        }
        None if cleaned.starts_with("//") || cleaned.contains("://") => {
            return Err(Refusal::Unreadable {
                input: input.to_owned(),
                why: "it has no valid scheme; write http:// or https:// in front",
            });
        }
        None => ("https", cleaned.as_str()),
    };

    if let Some(why) = ambiguity(input, rest, explicit_scheme) {
        return Err(Refusal::Ambiguous {
            input: input.to_owned(),
            why,
        });
    }
    // Special schemes skip any run of slashes and backslashes before the authority.
    let after_slashes = rest.trim_start_matches(['/', '\\']);
    let authority_end = after_slashes
        .find(['/', '\\', '?', '#'])
        .unwrap_or(after_slashes.len());
    let authority = &after_slashes[..authority_end];
    if authority.contains('@') {
        return Err(Refusal::Userinfo);
    }
    let (host_text, port) = split_host_port(authority)?;
    let default_port = if scheme == "http" { 80 } else { 443 };
    let host = parse_host(host_text).map_err(Refusal::Host)?;
    Ok(UrlTarget {
        scheme,
        host,
        port: port.unwrap_or(default_port),
    })
}

/// How a browser (WHATWG) and an RFC 3986 parser would disagree on where `rest` (the cleaned text
/// after `scheme:`) goes, if they would.
fn ambiguity(input: &str, rest: &str, explicit_scheme: bool) -> Option<&'static str> {
    let inner = input.trim_matches(|c: char| c <= ' ');
    if inner.contains(['\t', '\n', '\r']) {
        return Some(
            "browsers delete tabs and newlines inside a URL and other parsers do not, so they could read different hosts; remove them",
        );
    }
    if !explicit_scheme {
        return None;
    }
    let slashes = rest.len() - rest.trim_start_matches(['/', '\\']).len();
    if !rest.starts_with("//") || slashes != 2 {
        return Some(
            "browsers read any run of slashes or backslashes after `http:` as `//`, other parsers read a different host or none; write exactly `//`",
        );
    }
    // The authority as RFC 3986 reads it ends at the first `/`, `?` or `#`; a browser also ends it
    // at `\`. A backslash there means the two see different hosts (`http://a\@b/`).
    let authority = &rest[2..];
    let rfc_end = authority.find(['/', '?', '#']).unwrap_or(authority.len());
    if authority[..rfc_end].contains('\\') {
        return Some(
            "a `\\` in the host part is `/` to browsers but part of the host or user name to other parsers; write `/`",
        );
    }
    let browser_end = authority
        .find(['/', '\\', '?', '#'])
        .unwrap_or(authority.len());
    // (A bracketed IPv6 zone, `[fe80::1%25eth0]`, is refused as a host spelling instead.)
    if !authority.starts_with('[') && authority[..browser_end].contains('%') {
        return Some(
            "browsers decode a percent-encoded host and other parsers do not, so they could read different hosts; write the host without `%`",
        );
    }
    None
}

/// Split `host[:port]` where an IPv6 host is bracketed. An empty port means the default.
pub(crate) fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), Refusal> {
    let (host, port_text) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let (host, after) = authority.split_at(end + 1);
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if after.is_empty() => (host, None),
                    None => {
                        return Err(Refusal::Unreadable {
                            input: authority.to_owned(),
                            why: "only `:port` may follow a bracketed IPv6 address",
                        });
                    }
                }
            }
            None => (authority, None),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port_text {
        None | Some("") => None,
        Some(text) => Some(parse_port(text)?),
    };
    Ok((host, port))
}

/// A port in decimal, 1–65535. Leading zeros are read as browsers read them (`0080` is 80).
pub(crate) fn parse_port(text: &str) -> Result<u16, Refusal> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Refusal::BadPort {
            port: text.to_owned(),
        });
    }
    match text.trim_start_matches('0').parse::<u16>() {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(Refusal::BadPort {
            port: text.to_owned(),
        }),
    }
}
