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
    /// `private (10.0.0.0/8)`, `loopback (127.0.0.0/8) embedded as NAT64 127.0.0.1`, or
    /// `IPv4-mapped (::ffff:0.0.0.0/96, carrying 8.8.8.8, another spelling of …)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = self.range;
        match self.embedded {
            // `IPv4-mapped (::ffff:0.0.0.0/96, carrying 8.8.8.8, another spelling of …)`
            Some(embedded) if range.kind.embeds_ipv4() => {
                write!(
                    f,
                    "{} ({}, carrying {}",
                    range.kind.label(),
                    range.net,
                    embedded.ipv4
                )?;
                if let Some(note) = range.note {
                    write!(f, ", {note}")?;
                }
                f.write_str(")")
            }
            Some(embedded) => write!(
                f,
                "{range} embedded as {} {}",
                embedded.via.label(),
                embedded.ipv4
            ),
            None => write!(f, "{range}"),
        }
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

/// Judge an address: `Ok(())` when it is globally reachable unicast, otherwise the block that
/// refuses it. A NAT64 address (`64:ff9b::/96`) is judged by the IPv4 address it carries;
/// IPv4-mapped and IPv4-compatible addresses are never public, whatever they carry.
///
/// ```
/// use std::net::IpAddr;
/// let why = airlock_address::classify("::ffff:8.8.8.8".parse().unwrap()).unwrap_err();
/// assert!(why.to_string().starts_with("IPv4-mapped (::ffff:0.0.0.0/96, carrying 8.8.8.8, "));
/// let why = airlock_address::classify("64:ff9b::10.1.2.3".parse().unwrap()).unwrap_err();
/// assert_eq!(why.to_string(), "private (10.0.0.0/8) embedded as NAT64 10.1.2.3");
/// assert!(airlock_address::classify("93.184.216.34".parse().unwrap()).is_ok());
/// ```
pub fn classify(ip: IpAddr) -> Result<(), NotPublic> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4, None),
        IpAddr::V6(v6) => {
            if let Some(embedded) = embedded_ipv4(v6) {
                return match embedded.via {
                    Embedding::Nat64 => classify_v4(embedded.ipv4, Some(embedded)),
                    // A second spelling of an IPv4 address: refused, so that nothing (no allow
                    // entry, no profile) opens an IPv4 address under another name.
                    Embedding::Mapped | Embedding::Compatible => Err(NotPublic {
                        range: range_of(ip).unwrap_or(&IPV6_RESERVED),
                        embedded: Some(embedded),
                    }),
                };
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
        Some(range) if range.kind.is_public() => Ok(()),
        Some(range) => Err(NotPublic { range, embedded }),
    }
}

/// Shorthand for `classify(ip).is_ok()`.
pub fn is_public(ip: IpAddr) -> bool {
    classify(ip).is_ok()
}
