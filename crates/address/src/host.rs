//! Reading a URL host the way a browser reads it, and refusing the spellings an attacker uses to
//! smuggle an address past a check that reads it differently.
//!
//! The steps follow the WHATWG URL host parser (which Chromium follows for http and https):
//! brackets mean IPv6; otherwise percent-decode, map to ASCII with IDNA (which also lower-cases and
//! folds full-width digits), and if the last label looks like a number, read the host as IPv4.
//! Browsers accept many IPv4 spellings (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`); we accept
//! only the canonical dotted quad, so the address we judge is the one anybody would read.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use idna::AsciiDenyList;

/// The longest host name DNS can carry, without the trailing dot.
const MAX_NAME_LEN: usize = 253;
/// The longest DNS label.
const MAX_LABEL_LEN: usize = 63;

/// A host as a browser would use it: an address literal or a lower-case ASCII name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// An IP literal (IPv6 came in brackets).
    Ip(IpAddr),
    /// A domain name in ASCII (punycode for IDN), lower case, without a trailing dot.
    Domain(String),
}

impl fmt::Display for Host {
    /// The URL spelling: IPv6 in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Self::Domain(name) => f.write_str(name),
        }
    }
}

/// Why a host spelling is refused. Each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing between the scheme and the path.
    #[error("the host is empty: write a domain name or an IP address")]
    Empty,
    /// An IPv4 spelling other than `a.b.c.d` in decimal, which browsers still read as an address.
    #[error(
        "`{spelling}` is a non-canonical IPv4 spelling that browsers read as an address: write the address as four decimal numbers, like 93.184.216.34"
    )]
    NonCanonicalIpv4 {
        /// The host as given.
        spelling: String,
    },
    /// Brackets around something that is not an IPv6 address.
    #[error("`{spelling}` has brackets, which are only for IPv6 addresses")]
    BracketedNotIpv6 {
        /// The host as given.
        spelling: String,
    },
    /// An IPv6 address with a zone (`%eth0`), which names an interface of this machine.
    #[error("`{spelling}` is a scoped IPv6 address; zones name local interfaces and are refused")]
    ScopedIpv6 {
        /// The host as given.
        spelling: String,
    },
    /// `localhost` and names under it always mean this machine.
    #[error("`{name}` always means this machine and is refused")]
    Localhost {
        /// The name after normalisation.
        name: String,
    },
    /// IDNA mapping failed, or the host holds a character no host may hold.
    #[error("`{spelling}` is not a valid host name: {why}")]
    InvalidName {
        /// The host as given.
        spelling: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Parse and normalise a URL host (the part between `//` or `@` and the port).
///
/// ```
/// use airlock_address::{parse_host, Host, HostError};
/// assert_eq!(parse_host("Example.COM.").unwrap(), Host::Domain("example.com".into()));
/// assert_eq!(parse_host("[::1]").unwrap(), Host::Ip("::1".parse().unwrap()));
/// assert!(matches!(parse_host("2130706433"), Err(HostError::NonCanonicalIpv4 { .. })));
/// ```
pub fn parse_host(input: &str) -> Result<Host, HostError> {
    if input.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(inner) = input.strip_prefix('[') {
        return parse_bracketed(input, inner);
    }
    if input.contains(['[', ']']) {
        return Err(HostError::BracketedNotIpv6 {
            spelling: input.to_owned(),
        });
    }

    let decoded = percent_encoding::percent_decode_str(input)
        .decode_utf8()
        .map_err(|_| invalid(input, "percent-escapes do not decode to UTF-8"))?;
    // IDNA with the URL deny list is the WHATWG "domain to ASCII" step: it lower-cases, folds
    // full-width forms, converts to punycode and refuses characters no host may contain.
    let ascii =
        idna::domain_to_ascii_cow(decoded.as_bytes(), AsciiDenyList::URL).map_err(|_| {
            invalid(
                input,
                "it has characters that are not allowed in a host name",
            )
        })?;
    let name = ascii.strip_suffix('.').unwrap_or(&ascii);
    if name.is_empty() {
        return Err(HostError::Empty);
    }

    if ends_in_number(name) {
        return canonical_ipv4(name)
            .map(|ip| Host::Ip(IpAddr::V4(ip)))
            .ok_or_else(|| HostError::NonCanonicalIpv4 {
                spelling: input.to_owned(),
            });
    }

    if name.len() > MAX_NAME_LEN {
        return Err(invalid(input, "it is longer than 253 characters"));
    }
    if name.split('.').any(str::is_empty) {
        return Err(invalid(input, "it has an empty label (two dots in a row)"));
    }
    if name.split('.').any(|label| label.len() > MAX_LABEL_LEN) {
        return Err(invalid(input, "a label is longer than 63 characters"));
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(HostError::Localhost {
            name: name.to_owned(),
        });
    }
    Ok(Host::Domain(name.to_owned()))
}

fn parse_bracketed(input: &str, inner: &str) -> Result<Host, HostError> {
    let Some(literal) = inner.strip_suffix(']') else {
        return Err(HostError::BracketedNotIpv6 {
            spelling: input.to_owned(),
        });
    };
    if literal.contains('%') {
        return Err(HostError::ScopedIpv6 {
            spelling: input.to_owned(),
        });
    }
    literal
        .parse::<Ipv6Addr>()
        .map(|ip| Host::Ip(IpAddr::V6(ip)))
        .map_err(|_| HostError::BracketedNotIpv6 {
            spelling: input.to_owned(),
        })
}

fn invalid(spelling: &str, why: &'static str) -> HostError {
    HostError::InvalidName {
        spelling: spelling.to_owned(),
        why,
    }
}

/// WHATWG's "ends in a number": the last label is all digits, or `0x` followed by hex digits.
/// Such a host is parsed as IPv4 by browsers, whatever else it contains.
fn ends_in_number(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    last.strip_prefix("0x")
        .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `Some` only for four decimal parts, each 0–255 without leading zeros.
fn canonical_ipv4(name: &str) -> Option<Ipv4Addr> {
    let mut octets = [0_u8; 4];
    let mut parts = name.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        let canonical = !part.is_empty()
            && part.len() <= 3
            && part.bytes().all(|b| b.is_ascii_digit())
            && (part == "0" || !part.starts_with('0'));
        if !canonical {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Ipv4Addr::from(octets))
}
