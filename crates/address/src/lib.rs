//! Is this destination public? Pure answers for IP addresses and URL host spellings.
//!
//! `airlock-address` has no I/O, no async runtime and no resolver: it judges what it is given.
//! Public means globally routable unicast as the IANA special-purpose registries define it. Every
//! other address is refused with the block that refuses it, so a reason reads like
//! `private (10.0.0.0/8)` or `link-local (169.254.0.0/16, cloud metadata lives here)`.
//!
//! - [`classify`] judges an [`IpAddr`](std::net::IpAddr); a NAT64 address is judged by the IPv4
//!   address it carries, and IPv4-mapped and IPv4-compatible addresses are refused whatever they
//!   carry (they are other spellings of an IPv4 address).
//! - [`parse_host`] reads a URL host as a browser does and refuses spellings that would let a
//!   check and a browser disagree (`2130706433`, `0x7f.1`, `127.1`, `[fe80::1%25eth0]`, `localhost`).
//! - [`SPECIAL_RANGES`] is the table itself, listed once.
//!
//! ```
//! use airlock_address::{classify, parse_host, Host};
//!
//! let host = parse_host("169.254.169.254").unwrap();
//! let Host::Ip(ip) = host else { unreachable!() };
//! let why = classify(ip).unwrap_err();
//! assert_eq!(
//!     why.to_string(),
//!     "link-local (169.254.0.0/16, cloud metadata lives here)"
//! );
//!
//! assert!(classify("2606:4700::1111".parse().unwrap()).is_ok());
//! assert!(classify("64:ff9b::7f00:1".parse().unwrap()).is_err()); // NAT64 of 127.0.0.1
//! ```

mod classify;
mod host;
mod ranges;

pub use classify::{Embedded, Embedding, NotPublic, classify, embedded_ipv4, is_public};
pub use host::{Host, HostError, parse_host};
pub use ranges::{RangeKind, SPECIAL_RANGES, SpecialRange, range_of};
