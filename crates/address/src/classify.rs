//! Judging one IP address: public, or not public with the block that says why.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ranges::{IPV6_RESERVED, RangeKind, SpecialRange, range_of};

/// How an IPv6 address carries an IPv4 address in its low 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Embedding {
    /// `::ffff:a.b.c.d`.
    Mapped,
    /// `::a.b.c.d` (deprecated).
    Compatible,
    /// `64:ff9b::a.b.c.d`.
    Nat64,
}

impl Embedding {
    /// How the embedding is named in reasons.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Mapped => "IPv4-mapped",
            Self::Compatible => "IPv4-compatible",
            Self::Nat64 => "NAT64",
        }
    }
}

/// An IPv4 address found inside an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Embedded {
    /// Which prefix carried it.
    pub via: Embedding,
    /// The embedded address.
    pub ipv4: Ipv4Addr,
}

/// Why an address is not public: the block it falls in, and the IPv4 address that was judged
/// when the block is an embedding prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPublic {
    /// The most specific block that refuses the (embedded) address.
    pub range: &'static SpecialRange,
    /// Set when an embedded IPv4 address was judged instead of the IPv6 address itself.
    pub embedded: Option<Embedded>,
}

impl NotPublic {
    /// The kind of the refusing block.
    pub const fn kind(&self) -> RangeKind {
        self.range.kind
    }
}

impl fmt::Display for NotPublic {
    /// `private (10.0.0.0/8)`, or `loopback (127.0.0.0/8) embedded as IPv4-mapped 127.0.0.1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.range)?;
        if let Some(embedded) = self.embedded {
            write!(f, " embedded as {} {}", embedded.via.label(), embedded.ipv4)?;
        }
        Ok(())
    }
}

impl std::error::Error for NotPublic {}

/// The IPv4 address embedded in `ip`, when its prefix is one that embeds (mapped, compatible,
/// NAT64). `::` and `::1` are not embeddings: they have blocks of their own.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<Embedded> {
    let range = range_of(IpAddr::V6(ip))?;
    let via = match range.kind {
        RangeKind::Ipv4Mapped => Embedding::Mapped,
        RangeKind::Ipv4Compatible => Embedding::Compatible,
        RangeKind::Nat64 => Embedding::Nat64,
        _ => return None,
    };
    // Work on the bytes: the low 32 bits are the IPv4 address in every embedding we accept.
    let [.., a, b, c, d] = ip.octets();
    Some(Embedded {
        via,
        ipv4: Ipv4Addr::new(a, b, c, d),
    })
}

/// Judge an address: `Ok(())` when it is globally routable unicast, otherwise the block that
/// refuses it. IPv6 addresses that embed IPv4 are judged by the embedded address.
///
/// ```
/// use std::net::IpAddr;
/// let ip: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
/// let why = airlock_address::classify(ip).unwrap_err();
/// assert_eq!(why.to_string(), "private (10.0.0.0/8) embedded as IPv4-mapped 10.1.2.3");
/// assert!(airlock_address::classify("93.184.216.34".parse().unwrap()).is_ok());
/// ```
pub fn classify(ip: IpAddr) -> Result<(), NotPublic> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4, None),
        IpAddr::V6(v6) => {
            if let Some(embedded) = embedded_ipv4(v6) {
                return classify_v4(embedded.ipv4, Some(embedded));
            }
            match range_of(IpAddr::V6(v6)) {
                Some(range) if range.kind.is_public() => Ok(()),
                Some(range) => Err(NotPublic {
                    range,
                    embedded: None,
                }),
                // `::/0` is in the table, so this arm only guards against a future edit of it.
                None => Err(NotPublic {
                    range: &IPV6_RESERVED,
                    embedded: None,
                }),
            }
        }
    }
}

fn classify_v4(ip: Ipv4Addr, embedded: Option<Embedded>) -> Result<(), NotPublic> {
    match range_of(IpAddr::V4(ip)) {
        None => Ok(()),
        Some(range) => Err(NotPublic { range, embedded }),
    }
}

/// Shorthand for `classify(ip).is_ok()`.
pub fn is_public(ip: IpAddr) -> bool {
    classify(ip).is_ok()
}
