//! Host spellings: the forms browsers accept and the forms we refuse because a browser and a
//! naive check would read them differently.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use airlock_address::{Host, HostError, parse_host};

fn ip(text: &str) -> Host {
    Host::Ip(text.parse::<IpAddr>().unwrap())
}

fn domain(text: &str) -> Host {
    Host::Domain(text.to_owned())
}

#[test]
fn accepted_spellings_normalise() {
    let cases = [
        ("example.com", domain("example.com")),
        ("EXAMPLE.com", domain("example.com")),
        ("example.com.", domain("example.com")),
        ("ex%41mple.com", domain("example.com")),
        ("bücher.example", domain("xn--bcher-kva.example")),
        ("_dmarc.example.com", domain("_dmarc.example.com")),
        ("93.184.216.34", ip("93.184.216.34")),
        ("127.0.0.1", ip("127.0.0.1")),
        ("0.0.0.0", ip("0.0.0.0")),
        ("93.184.216.34.", ip("93.184.216.34")),
        // Full-width digits and dots fold to ASCII, as in browsers.
        ("１２７．０．０．１", ip("127.0.0.1")),
        ("%31%32%37.0.0.1", ip("127.0.0.1")),
        ("[::1]", ip("::1")),
        ("[0:0:0:0:0:0:0:1]", ip("::1")),
        ("[0000:0000:0000:0000:0000:0000:0000:0001]", ip("::1")),
        ("[::FFFF:127.0.0.1]", ip("::ffff:7f00:1")),
        ("[::ffff:7f00:1]", ip("::ffff:127.0.0.1")),
        ("[2001:DB8::1]", ip("2001:db8::1")),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_host(input).as_ref(), Ok(&expected), "{input}");
    }
}

#[test]
fn non_canonical_ipv4_is_refused() {
    for input in [
        "2130706433",
        "0x7f000001",
        "0x7f.1",
        "0x7F.0.0.1",
        "0177.0.0.1",
        "127.1",
        "127.0.1",
        "127.000.000.001",
        "01.2.3.4",
        "1.2.3.4.5",
        "256.0.0.1",
        "1.2.3.256",
        "example.123",
        "example.0x",
        "0x",
        "4294967296",
        "%30x7f.1",
    ] {
        assert!(
            matches!(parse_host(input), Err(HostError::NonCanonicalIpv4 { .. })),
            "{input}: {:?}",
            parse_host(input)
        );
    }
}

#[test]
fn other_refusals_say_why() {
    let refused = |input: &str| parse_host(input).unwrap_err();
    assert_eq!(refused(""), HostError::Empty);
    assert_eq!(refused("."), HostError::Empty);
    assert!(matches!(
        refused("[127.0.0.1]"),
        HostError::BracketedNotIpv6 { .. }
    ));
    assert!(matches!(
        refused("[example.com]"),
        HostError::BracketedNotIpv6 { .. }
    ));
    assert!(matches!(
        refused("[::1"),
        HostError::BracketedNotIpv6 { .. }
    ));
    assert!(matches!(
        refused("a[::1]"),
        HostError::BracketedNotIpv6 { .. }
    ));
    assert!(matches!(
        refused("[fe80::1%eth0]"),
        HostError::ScopedIpv6 { .. }
    ));
    assert!(matches!(
        refused("[fe80::1%25eth0]"),
        HostError::ScopedIpv6 { .. }
    ));
    assert!(matches!(refused("localhost"), HostError::Localhost { .. }));
    assert!(matches!(refused("LOCALHOST."), HostError::Localhost { .. }));
    assert!(matches!(
        refused("app.localhost"),
        HostError::Localhost { .. }
    ));
    assert!(matches!(refused("a..b"), HostError::InvalidName { .. }));
    assert!(matches!(refused("a b.com"), HostError::InvalidName { .. }));
    assert!(matches!(
        refused("a%00b.com"),
        HostError::InvalidName { .. }
    ));
    assert!(matches!(
        refused("a%ffb.com"),
        HostError::InvalidName { .. }
    ));
    assert!(matches!(refused("::1"), HostError::InvalidName { .. }));
    assert!(matches!(
        refused("user@host"),
        HostError::InvalidName { .. }
    ));
    assert!(matches!(
        refused(&"a".repeat(64)),
        HostError::InvalidName { .. }
    ));
    let long = vec!["abcdefghi"; 26].join(".");
    assert!(matches!(refused(&long), HostError::InvalidName { .. }));

    assert_eq!(
        refused("0x7f.1").to_string(),
        "`0x7f.1` is a non-canonical IPv4 spelling that browsers read as an address: write the address as four decimal numbers, like 93.184.216.34"
    );
}
