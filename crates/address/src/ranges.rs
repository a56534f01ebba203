//! The special-purpose address table: every block that is not public, listed once, as data.
//!
//! Sources: the IANA IPv4 and IPv6 Special-Purpose Address Registries, plus the blocks IANA
//! lists elsewhere (multicast, site-local, unique-local). Lookups pick the longest matching
//! prefix, so a narrow block (for example `255.255.255.255/32` inside `240.0.0.0/4`) names itself.
//!
//! The registries mark each entry "globally reachable" or not. Entries marked not globally
//! reachable are refused; entries marked globally reachable are listed too, as
//! [`RangeKind::GloballyReachable`], because some sit inside a refused block (the anycast services
//! `192.0.0.9/32` and `192.0.0.10/32` inside `192.0.0.0/24`; PCP, TURN, DNS-SD SRP, AMT, AS112,
//! ORCHIDv2 and DRIP inside `2001::/23`) and the most specific entry must win.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// What a special-purpose block is for, which decides how an address inside it is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeKind {
    /// `0.0.0.0/8`: "this network"; on Linux a connect to it reaches the local machine.
    ThisNetwork,
    /// `::/128`: the unspecified address.
    Unspecified,
    /// `127.0.0.0/8`, `::1/128`.
    Loopback,
    /// RFC 1918 space.
    Private,
    /// `100.64.0.0/10`, shared address space used by carrier-grade NAT.
    CarrierGradeNat,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `192.0.0.0/24`, `2001::/23`: IETF protocol assignments.
    IetfProtocol,
    /// TEST-NET-1/2/3, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// `192.88.99.0/24`, the deprecated 6to4 relay anycast block.
    SixToFourRelay,
    /// `240.0.0.0/4`, and IPv6 space outside `2000::/3`.
    Reserved,
    /// `255.255.255.255/32`.
    Broadcast,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `fc00::/7`.
    UniqueLocal,
    /// `fec0::/10`, deprecated but still routed by some stacks.
    SiteLocal,
    /// `2001::/32`: tunnels to an address we cannot see.
    Teredo,
    /// `2002::/16`: tunnels to an address we cannot see.
    SixToFour,
    /// `2001:10::/28`: deprecated cryptographic identifiers, not locators (ORCHIDv2,
    /// `2001:20::/28`, is globally reachable).
    Orchid,
    /// `100::/64`: discard-only.
    DiscardOnly,
    /// `64:ff9b:1::/48`: NAT64 prefix for local use, whose reach is not ours to judge.
    LocalNat64,
    /// `::ffff:0:0/96`: never public unicast, whatever IPv4 address it carries (a host's stack
    /// delivers it to that IPv4 address, so it would be a second spelling of it).
    Ipv4Mapped,
    /// `::/96` (deprecated): never public unicast, whatever IPv4 address it carries.
    Ipv4Compatible,
    /// `64:ff9b::/96`: judged by the embedded IPv4 address.
    Nat64,
    /// `2000::/3`: the only IPv6 block from which public unicast is allocated.
    GlobalUnicast,
    /// A special-purpose entry the registry marks globally reachable (an anycast service, AS112,
    /// AMT, ORCHIDv2, DRIP): public, even inside a refused block.
    GloballyReachable,
}

impl RangeKind {
    /// A short human label, used at the start of every refusal reason.
    pub const fn label(self) -> &'static str {
        match self {
            Self::ThisNetwork => "this-network",
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::CarrierGradeNat => "carrier-grade NAT",
            Self::LinkLocal => "link-local",
            Self::IetfProtocol => "IETF protocol assignment",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::SixToFourRelay => "6to4 relay anycast",
            Self::Reserved => "reserved",
            Self::Broadcast => "broadcast",
            Self::Multicast => "multicast",
            Self::UniqueLocal => "unique-local",
            Self::SiteLocal => "site-local",
            Self::Teredo => "Teredo",
            Self::SixToFour => "6to4",
            Self::Orchid => "ORCHID",
            Self::DiscardOnly => "discard-only",
            Self::LocalNat64 => "local-use NAT64",
            Self::Ipv4Mapped => "IPv4-mapped",
            Self::Ipv4Compatible => "IPv4-compatible",
            Self::Nat64 => "NAT64",
            Self::GlobalUnicast => "global unicast",
            Self::GloballyReachable => "globally reachable special-purpose",
        }
    }

    /// Whether addresses in this block carry an IPv4 address in their low 32 bits. Only NAT64
    /// addresses are judged by it; mapped and compatible ones are refused whatever they carry.
    pub const fn embeds_ipv4(self) -> bool {
        matches!(self, Self::Ipv4Mapped | Self::Ipv4Compatible | Self::Nat64)
    }

    /// Whether the block is public space: `2000::/3`, and the entries the registries mark
    /// globally reachable (other IPv4 public space is simply not listed).
    pub const fn is_public(self) -> bool {
        matches!(self, Self::GlobalUnicast | Self::GloballyReachable)
    }
}

/// One entry of the table: a block, its kind, and an optional note for people reading a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialRange {
    /// The block.
    pub net: IpNet,
    /// What it is for.
    pub kind: RangeKind,
    /// Extra context shown after the block, such as where cloud metadata lives.
    pub note: Option<&'static str>,
}

impl fmt::Display for SpecialRange {
    /// `private (10.0.0.0/8)` or `link-local (169.254.0.0/16, cloud metadata lives here)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.kind.label(), self.net)?;
        if let Some(note) = self.note {
            write!(f, ", {note}")?;
        }
        f.write_str(")")
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, kind: RangeKind) -> SpecialRange {
    SpecialRange {
        net: IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)),
        kind,
        note: None,
    }
}

const fn v6(segments: [u16; 8], len: u8, kind: RangeKind) -> SpecialRange {
    let [s0, s1, s2, s3, s4, s5, s6, s7] = segments;
    SpecialRange {
        net: IpNet::V6(Ipv6Net::new_assert(
            Ipv6Addr::new(s0, s1, s2, s3, s4, s5, s6, s7),
            len,
        )),
        kind,
        note: None,
    }
}

const fn noted(range: SpecialRange, note: &'static str) -> SpecialRange {
    SpecialRange {
        note: Some(note),
        ..range
    }
}

use RangeKind as K;

/// `::/0`: every IPv6 address matches it, so any IPv6 address outside the listed blocks and
/// outside `2000::/3` is refused as reserved.
pub(crate) const IPV6_RESERVED: SpecialRange = noted(
    v6([0, 0, 0, 0, 0, 0, 0, 0], 0, K::Reserved),
    "outside 2000::/3, the only global unicast block",
);

/// Every IPv4 and IPv6 block that is not plain public unicast, plus the IPv6 blocks that decide how
/// the rest of IPv6 is read (`::/0` reserved, `2000::/3` global unicast, the embedding prefixes).
///
/// An IPv4 address that matches no entry is public. An IPv6 address always matches `::/0` at least.
pub static SPECIAL_RANGES: &[SpecialRange] = &[
    // IPv4
    v4(0, 0, 0, 0, 8, K::ThisNetwork),
    v4(10, 0, 0, 0, 8, K::Private),
    v4(100, 64, 0, 0, 10, K::CarrierGradeNat),
    v4(127, 0, 0, 0, 8, K::Loopback),
    noted(
        v4(169, 254, 0, 0, 16, K::LinkLocal),
        "cloud metadata lives here",
    ),
    v4(172, 16, 0, 0, 12, K::Private),
    v4(192, 0, 0, 0, 24, K::IetfProtocol),
    noted(
        v4(192, 0, 0, 9, 32, K::GloballyReachable),
        "Port Control Protocol anycast",
    ),
    noted(v4(192, 0, 0, 10, 32, K::GloballyReachable), "TURN anycast"),
    noted(v4(192, 0, 2, 0, 24, K::Documentation), "TEST-NET-1"),
    noted(v4(192, 31, 196, 0, 24, K::GloballyReachable), "AS112-v4"),
    noted(v4(192, 52, 193, 0, 24, K::GloballyReachable), "AMT"),
    noted(v4(192, 88, 99, 0, 24, K::SixToFourRelay), "deprecated"),
    v4(192, 168, 0, 0, 16, K::Private),
    noted(
        v4(192, 175, 48, 0, 24, K::GloballyReachable),
        "direct delegation AS112 service",
    ),
    v4(198, 18, 0, 0, 15, K::Benchmarking),
    noted(v4(198, 51, 100, 0, 24, K::Documentation), "TEST-NET-2"),
    noted(v4(203, 0, 113, 0, 24, K::Documentation), "TEST-NET-3"),
    v4(224, 0, 0, 0, 4, K::Multicast),
    v4(240, 0, 0, 0, 4, K::Reserved),
    v4(255, 255, 255, 255, 32, K::Broadcast),
    // IPv6
    IPV6_RESERVED,
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, K::Unspecified),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, K::Loopback),
    noted(
        v6([0, 0, 0, 0, 0, 0, 0, 0], 96, K::Ipv4Compatible),
        "another spelling of an IPv4 address: write that address itself",
    ),
    noted(
        v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, K::Ipv4Mapped),
        "another spelling of an IPv4 address: write that address itself",
    ),
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, K::Nat64),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, K::LocalNat64),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, K::DiscardOnly),
    noted(
        v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, K::Reserved),
        "dummy IPv6 prefix",
    ),
    v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, K::GlobalUnicast),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, K::IetfProtocol),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, K::Teredo),
    noted(
        v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128, K::GloballyReachable),
        "Port Control Protocol anycast",
    ),
    noted(
        v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, K::GloballyReachable),
        "TURN anycast",
    ),
    noted(
        v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128, K::GloballyReachable),
        "DNS-SD service registration anycast",
    ),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, K::Benchmarking),
    noted(
        v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, K::GloballyReachable),
        "AMT",
    ),
    noted(
        v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, K::GloballyReachable),
        "AS112-v6",
    ),
    noted(
        v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, K::Orchid),
        "deprecated",
    ),
    noted(
        v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, K::GloballyReachable),
        "ORCHIDv2",
    ),
    noted(
        v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28, K::GloballyReachable),
        "DRIP entity tags",
    ),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, K::Documentation),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, K::SixToFour),
    noted(
        v6(
            [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
            48,
            K::GloballyReachable,
        ),
        "direct delegation AS112 service",
    ),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, K::Documentation),
    noted(
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, K::Reserved),
        "segment routing (SRv6) SIDs",
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, K::UniqueLocal),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, K::LinkLocal),
    noted(
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, K::SiteLocal),
        "deprecated",
    ),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, K::Multicast),
];

/// The most specific table entry containing `ip`, if any (IPv4 public space has none).
pub fn range_of(ip: std::net::IpAddr) -> Option<&'static SpecialRange> {
    SPECIAL_RANGES
        .iter()
        .filter(|range| range.net.contains(&ip))
        .max_by_key(|range| range.net.prefix_len())
}
