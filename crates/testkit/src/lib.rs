//! Shared test support for Airlock's crates. Dev-only (`publish = false`): a dev-dependency of the
//! crates whose tests and benchmarks need it, a dependency of `xtask`, and of no library.
//!
//! - [`docker`]: the gate for tests that need Docker, the image and a non-root user, and
//!   bookkeeping of task containers.
//! - [`site`]: a lab site on loopback serving fixed pages and recording what was asked.
//! - [`login`]: a lab site with a login form and a cookie session, keeping what was posted.
//! - [`files`]: a lab site with a PDF, a CSV and a large file to download.
//! - [`parents`]: real parent proxies on loopback (squid, microsocks) asking for a password.
//! - [`certs`]: a self-signed certificate and key from Debian's `openssl`.
//! - [`dns`]: a lab DNS responder on loopback for names that must not need the public DNS.
//! - [`http`]: reading a response head, and bounding a wait.
//! - [`host`]: a process's CPU time and cgroup, as the host's `/proc` tells them (benchmarks).
//! - [`stats`]: the one way every benchmark summarizes, rotates and warms up (also used by xtask).
//!
//! Everything here is real (sockets, servers, the `docker` CLI); nothing stands in for Airlock.
//!
//! ```
//! use std::collections::HashMap;
//! use std::io::{Read, Write};
//! use airlock_testkit::site::site;
//!
//! let (port, seen) = site(|_| HashMap::from([("/", ("200 OK", String::new(), "hi".to_owned()))]));
//! let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
//! stream.write_all(b"GET / HTTP/1.1\r\nhost: lab\r\n\r\n").unwrap();
//! let mut answer = String::new();
//! stream.read_to_string(&mut answer).unwrap();
//! assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("hi"));
//! let heard = seen.lock().unwrap();
//! assert_eq!((heard[0].host.as_str(), heard[0].path.as_str()), ("lab", "/"));
//! ```

// Test support: a failed step should panic the test that called it, with the reason.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_panics_doc,
    clippy::implicit_hasher
)]

pub mod certs;
pub mod dns;
pub mod docker;
pub mod files;
pub mod host;
pub mod http;
pub mod login;
pub mod parents;
pub mod site;
pub mod stats;
