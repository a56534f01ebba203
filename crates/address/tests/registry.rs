//! The registries, checked address by address: the first, last and first-outside address of every
//! block, written out by hand from the IANA tables rather than derived from our own table.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use airlock_address::{RangeKind, SPECIAL_RANGES, classify, range_of};

/// `(address, expected kind or None for public)`.
const CASES: &[(&str, Option<RangeKind>)] = &[
    // 0.0.0.0/8
    ("0.0.0.0", Some(RangeKind::ThisNetwork)),
    ("0.255.255.255", Some(RangeKind::ThisNetwork)),
    ("1.0.0.0", None),
    // 10.0.0.0/8
    ("9.255.255.255", None),
    ("10.0.0.0", Some(RangeKind::Private)),
    ("10.255.255.255", Some(RangeKind::Private)),
    ("11.0.0.0", None),
    // 100.64.0.0/10
    ("100.63.255.255", None),
    ("100.64.0.0", Some(RangeKind::CarrierGradeNat)),
    ("100.127.255.255", Some(RangeKind::CarrierGradeNat)),
    ("100.128.0.0", None),
    // 127.0.0.0/8
    ("126.255.255.255", None),
    ("127.0.0.0", Some(RangeKind::Loopback)),
    ("127.255.255.255", Some(RangeKind::Loopback)),
    ("128.0.0.0", None),
    // 169.254.0.0/16
    ("169.253.255.255", None),
    ("169.254.0.0", Some(RangeKind::LinkLocal)),
    ("169.254.169.254", Some(RangeKind::LinkLocal)),
    ("169.254.255.255", Some(RangeKind::LinkLocal)),
    ("169.255.0.0", None),
    // 172.16.0.0/12
    ("172.15.255.255", None),
    ("172.16.0.0", Some(RangeKind::Private)),
    ("172.31.255.255", Some(RangeKind::Private)),
    ("172.32.0.0", None),
    // 192.0.0.0/24
    ("191.255.255.255", None),
    ("192.0.0.0", Some(RangeKind::IetfProtocol)),
    ("192.0.0.8", Some(RangeKind::IetfProtocol)),
    ("192.0.0.9", None),  // Port Control Protocol anycast: globally reachable
    ("192.0.0.10", None), // TURN anycast: globally reachable
    ("192.0.0.11", Some(RangeKind::IetfProtocol)),
    ("192.0.0.170", Some(RangeKind::IetfProtocol)),
    ("192.0.0.192", Some(RangeKind::IetfProtocol)),
    ("192.0.0.255", Some(RangeKind::IetfProtocol)),
    ("192.0.1.0", None),
    // 192.0.2.0/24
    ("192.0.2.0", Some(RangeKind::Documentation)),
    ("192.0.2.255", Some(RangeKind::Documentation)),
    ("192.0.3.0", None),
    // 192.88.99.0/24
    ("192.88.98.255", None),
    ("192.88.99.0", Some(RangeKind::SixToFourRelay)),
    ("192.88.99.255", Some(RangeKind::SixToFourRelay)),
    ("192.88.100.0", None),
    // 192.168.0.0/16
    ("192.167.255.255", None),
    ("192.168.0.0", Some(RangeKind::Private)),
    ("192.168.255.255", Some(RangeKind::Private)),
    ("192.169.0.0", None),
    // 198.18.0.0/15
    ("198.17.255.255", None),
    ("198.18.0.0", Some(RangeKind::Benchmarking)),
    ("198.19.255.255", Some(RangeKind::Benchmarking)),
    ("198.20.0.0", None),
    // 198.51.100.0/24
    ("198.51.99.255", None),
    ("198.51.100.0", Some(RangeKind::Documentation)),
    ("198.51.100.255", Some(RangeKind::Documentation)),
    ("198.51.101.0", None),
    // 203.0.113.0/24
    ("203.0.112.255", None),
    ("203.0.113.0", Some(RangeKind::Documentation)),
    ("203.0.113.255", Some(RangeKind::Documentation)),
    ("203.0.114.0", None),
    // 224.0.0.0/4, 240.0.0.0/4, 255.255.255.255/32
    ("223.255.255.255", None),
    ("224.0.0.0", Some(RangeKind::Multicast)),
    ("239.255.255.255", Some(RangeKind::Multicast)),
    ("240.0.0.0", Some(RangeKind::Reserved)),
    ("255.255.255.254", Some(RangeKind::Reserved)),
    ("255.255.255.255", Some(RangeKind::Broadcast)),
    // Well-known public addresses, so "public" is not vacuous.
    ("8.8.8.8", None),
    ("93.184.216.34", None),
    ("192.31.196.1", None), // AS112-v4
    ("192.52.193.1", None), // AMT
    ("192.175.48.1", None), // direct delegation AS112
    // IPv6
    ("::", Some(RangeKind::Unspecified)),
    ("::1", Some(RangeKind::Loopback)),
    ("::2", Some(RangeKind::Ipv4Compatible)), // compatible form of 0.0.0.2
    ("100::", Some(RangeKind::DiscardOnly)),
    ("100::ffff:ffff:ffff:ffff", Some(RangeKind::DiscardOnly)),
    ("100:0:0:1::", Some(RangeKind::Reserved)), // dummy IPv6 prefix
    ("100:0:0:2::", Some(RangeKind::Reserved)),
    (
        "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Reserved),
    ),
    ("2000::", None),
    ("2001::", Some(RangeKind::Teredo)),
    (
        "2001:0:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Teredo),
    ),
    ("2001:1::", Some(RangeKind::IetfProtocol)),
    ("2001:1::1", None), // Port Control Protocol anycast
    ("2001:1::2", None), // TURN anycast
    ("2001:1::3", None), // DNS-SD service registration anycast
    ("2001:1::4", Some(RangeKind::IetfProtocol)),
    ("2001:2::", Some(RangeKind::Benchmarking)),
    (
        "2001:2:0:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Benchmarking),
    ),
    ("2001:2:1::", Some(RangeKind::IetfProtocol)),
    ("2001:2:ffff::", Some(RangeKind::IetfProtocol)),
    ("2001:3::", None), // AMT
    ("2001:3:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("2001:4::", Some(RangeKind::IetfProtocol)),
    (
        "2001:4:111:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::IetfProtocol),
    ),
    ("2001:4:112::", None), // AS112-v6
    ("2001:4:112:ffff:ffff:ffff:ffff:ffff", None),
    ("2001:4:113::", Some(RangeKind::IetfProtocol)),
    ("2001:10::", Some(RangeKind::Orchid)),
    (
        "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Orchid),
    ),
    ("2001:20::", None), // ORCHIDv2: globally reachable
    ("2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("2001:30::", None), // DRIP entity tags
    ("2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("2001:40::", Some(RangeKind::IetfProtocol)),
    (
        "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::IetfProtocol),
    ),
    ("2001:200::", None),
    ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("2001:db8::", Some(RangeKind::Documentation)),
    (
        "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Documentation),
    ),
    ("2001:db9::", None),
    ("2001:4860:4860::8888", None),
    ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("2002::", Some(RangeKind::SixToFour)),
    (
        "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::SixToFour),
    ),
    ("2003::", None),
    ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("3fff::", Some(RangeKind::Documentation)),
    (
        "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Documentation),
    ),
    ("3fff:1000::", None),
    ("2620:4f:8000::", None), // direct delegation AS112
    ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ("4000::", Some(RangeKind::Reserved)),
    ("5f00::1", Some(RangeKind::Reserved)), // segment routing SIDs
    (
        "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::Reserved),
    ),
    ("fc00::", Some(RangeKind::UniqueLocal)),
    ("fd00:ec2::254", Some(RangeKind::UniqueLocal)),
    (
        "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::UniqueLocal),
    ),
    ("fe00::", Some(RangeKind::Reserved)),
    ("fe80::", Some(RangeKind::LinkLocal)),
    (
        "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::LinkLocal),
    ),
    ("fec0::", Some(RangeKind::SiteLocal)),
    (
        "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::SiteLocal),
    ),
    ("ff00::", Some(RangeKind::Multicast)),
    ("ff02::1", Some(RangeKind::Multicast)),
    // Mapped and compatible forms are refused whatever they carry; NAT64 by what it carries.
    ("::ffff:127.0.0.1", Some(RangeKind::Ipv4Mapped)),
    ("::ffff:7f00:1", Some(RangeKind::Ipv4Mapped)),
    ("0:0:0:0:0:ffff:a9fe:a9fe", Some(RangeKind::Ipv4Mapped)),
    ("::ffff:8.8.8.8", Some(RangeKind::Ipv4Mapped)),
    ("::10.0.0.1", Some(RangeKind::Ipv4Compatible)),
    ("::8.8.8.8", Some(RangeKind::Ipv4Compatible)),
    ("::7f00:1", Some(RangeKind::Ipv4Compatible)),
    ("64:ff9b::10.0.0.1", Some(RangeKind::Private)),
    ("64:ff9b::192.0.0.9", None),
    ("64:ff9b::7f00:1", Some(RangeKind::Loopback)),
    ("64:ff9b::8.8.8.8", None),
    ("64:ff9b:1::8.8.8.8", Some(RangeKind::LocalNat64)),
    (
        "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
        Some(RangeKind::LocalNat64),
    ),
    ("64:ff9b:2::", Some(RangeKind::Reserved)),
    ("::ffff:0:808:808", Some(RangeKind::Reserved)), // SIIT translated form is not an embedding
];

fn kind_of(text: &str) -> Option<RangeKind> {
    let ip: IpAddr = text
        .parse()
        .unwrap_or_else(|e| panic!("{text} in the case table: {e}"));
    classify(ip).err().map(|why| why.kind())
}

#[test]
fn every_registry_case_gets_its_expected_verdict() {
    let wrong: Vec<String> = CASES
        .iter()
        .filter(|(text, expected)| kind_of(text) != *expected)
        .map(|(text, expected)| format!("{text}: expected {expected:?}, got {:?}", kind_of(text)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn first_and_last_address_of_every_refusing_block_is_refused() {
    for range in SPECIAL_RANGES
        .iter()
        .filter(|r| !r.kind.is_public() && r.kind != RangeKind::Nat64)
    {
        for ip in [range.net.network(), range.net.broadcast()] {
            let matched = range_of(ip).expect("an address in a listed block matches an entry");
            assert!(
                matched.net.prefix_len() >= range.net.prefix_len(),
                "{ip} matched {matched} instead of {range} or a narrower block"
            );
            assert!(classify(ip).is_err(), "{ip} in {range} was judged public");
        }
    }
}

#[test]
fn reasons_name_the_block_and_the_embedding() {
    let reason = |text: &str| classify(text.parse().unwrap()).unwrap_err().to_string();
    assert_eq!(reason("10.0.0.5"), "private (10.0.0.0/8)");
    assert_eq!(
        reason("169.254.169.254"),
        "link-local (169.254.0.0/16, cloud metadata lives here)"
    );
    assert_eq!(
        reason("64:ff9b::a9fe:a9fe"),
        "link-local (169.254.0.0/16, cloud metadata lives here) embedded as NAT64 169.254.169.254"
    );
    assert_eq!(
        reason("::ffff:8.8.8.8"),
        "IPv4-mapped (::ffff:0.0.0.0/96, carrying 8.8.8.8, another spelling of an IPv4 address: write that address itself)"
    );
    assert_eq!(
        reason("::7f00:1"),
        "IPv4-compatible (::/96, carrying 127.0.0.1, another spelling of an IPv4 address: write that address itself)"
    );
    assert_eq!(reason("fe80::1"), "link-local (fe80::/10)");
    assert_eq!(
        reason("4000::1"),
        "reserved (::/0, outside 2000::/3, the only global unicast block)"
    );
}

#[test]
fn range_table_snapshot() {
    let table: Vec<String> = SPECIAL_RANGES
        .iter()
        .map(|range| format!("{:<22} {range}", range.net.to_string()))
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}

#[test]
fn every_globally_reachable_entry_is_public_at_both_ends() {
    let reachable: Vec<_> = SPECIAL_RANGES
        .iter()
        .filter(|r| r.kind == RangeKind::GloballyReachable)
        .collect();
    assert_eq!(reachable.len(), 13, "{reachable:?}");
    for range in reachable {
        for ip in [range.net.network(), range.net.broadcast()] {
            assert_eq!(range_of(ip), Some(range), "{ip} is not named by {range}");
            assert!(classify(ip).is_ok(), "{ip} in {range} was refused");
        }
    }
}
