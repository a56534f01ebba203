//! This process's replica tag: 8 random hex digits drawn once, at the front of every task and
//! lease id it makes and in every answer's `Airlock-Replica` header. Tasks and leases live in the
//! memory of the replica that runs them; with the tag, a balancer sends a request that names one
//! to that replica (`deploy/swarm/balancer/haproxy.cfg` keeps tag → replica from the header). The
//! tag says nothing but which process: it is random, not an address.

use std::sync::LazyLock;

/// The answer header naming the replica.
pub(crate) const HEADER: &str = "airlock-replica";

/// The tag's bytes.
static TAG: LazyLock<[u8; 4]> = LazyLock::new(|| {
    let mut tag = [0u8; 4];
    // A failing OS random source still leaves replicas told apart by process and time.
    if getrandom::fill(&mut tag).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let mixed = std::process::id() ^ now;
        tag = mixed.to_le_bytes();
    }
    tag
});

static TAG_HEX: LazyLock<String> = LazyLock::new(|| hex::encode(*TAG));

/// The tag's bytes, the first four of every id this process makes.
pub(crate) fn tag() -> [u8; 4] {
    *TAG
}

/// The tag as the header carries it.
pub(crate) fn tag_hex() -> &'static str {
    &TAG_HEX
}
