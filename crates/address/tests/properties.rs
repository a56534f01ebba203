//! Properties that must hold for every address, not just the ones we thought of.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use airlock_address::{Embedding, Host, RangeKind, classify, parse_host};
use proptest::prelude::*;

fn nat64(v4: Ipv4Addr) -> Ipv6Addr {
    let [a, b, c, d] = v4.octets();
    Ipv6Addr::from([0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d])
}

proptest! {
    #[test]
    fn nat64_gets_the_verdict_of_the_ipv4_it_carries(bits in any::<u32>()) {
        let v4 = Ipv4Addr::from(bits);
        let expected = classify(IpAddr::V4(v4)).is_ok();
        prop_assert_eq!(classify(IpAddr::V6(nat64(v4))).is_ok(), expected);
    }

    #[test]
    fn mapped_and_compatible_forms_are_refused_whatever_they_carry(bits in any::<u32>()) {
        let v4 = Ipv4Addr::from(bits);
        let mapped = classify(IpAddr::V6(v4.to_ipv6_mapped())).unwrap_err();
        prop_assert_eq!(mapped.kind(), RangeKind::Ipv4Mapped);
        // `::` and `::1` are compatible-form spellings with blocks of their own.
        let compatible = classify(IpAddr::V6(v4.to_ipv6_compatible())).unwrap_err();
        prop_assert!(matches!(
            compatible.kind(),
            RangeKind::Ipv4Compatible | RangeKind::Unspecified | RangeKind::Loopback
        ));
    }

    #[test]
    fn every_mapped_spelling_parses_and_is_refused(bits in any::<u32>()) {
        let v4 = Ipv4Addr::from(bits);
        let [a, b, c, d] = v4.octets();
        for spelling in [
            format!("[::ffff:{v4}]"),
            format!("[::FFFF:{:x}:{:x}]", u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d])),
            format!("[0:0:0:0:0:ffff:{v4}]"),
        ] {
            let Ok(Host::Ip(ip)) = parse_host(&spelling) else {
                return Err(TestCaseError::fail(format!("{spelling} did not parse as an address")));
            };
            prop_assert_eq!(ip, IpAddr::V6(v4.to_ipv6_mapped()), "{}", spelling);
            prop_assert!(classify(ip).is_err(), "{}", spelling);
        }
    }

    #[test]
    fn ipv6_outside_2000_slash_3_is_never_public_unless_nat64(bits in any::<u128>()) {
        let ip = Ipv6Addr::from(bits);
        let in_global = bits >> 125 == 0b001;
        let nat64 = airlock_address::embedded_ipv4(ip).is_some_and(|e| e.via == Embedding::Nat64);
        if !in_global && !nat64 {
            prop_assert!(classify(IpAddr::V6(ip)).is_err());
        }
    }

    #[test]
    fn only_the_canonical_ipv4_spelling_parses_as_ipv4(bits in any::<u32>(), style in 0_u8..4) {
        let v4 = Ipv4Addr::from(bits);
        let [a, b, c, d] = v4.octets();
        let spelling = match style {
            0 => bits.to_string(),
            1 => format!("0x{bits:x}"),
            2 => format!("{a}.{}", u32::from_be_bytes([0, b, c, d])),
            _ => format!("0{a}.{b}.{c}.{d}"),
        };
        prop_assert!(parse_host(&spelling).is_err(), "{} was accepted", spelling);
        prop_assert_eq!(parse_host(&v4.to_string()), Ok(Host::Ip(IpAddr::V4(v4))));
    }

    #[test]
    fn parsing_never_panics(input in "\\PC{0,40}") {
        let _ = parse_host(&input);
    }
}
