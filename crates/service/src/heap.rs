//! The server's allocator, jemalloc instead of glibc's malloc, and its statistics.
//!
//! Under concurrent load glibc's malloc gives each thread that allocates an arena of its own (up
//! to eight per core), and memory freed in an arena mostly stays in it; which threads touch which
//! arena depends on scheduling, so a busy machine spreads the same work over more arenas and the
//! resident set keeps climbing after the live heap has stopped growing. jemalloc's arenas are
//! few (four per core), shared by size class, and return freed pages to the system on a timer,
//! so the resident set follows the live heap. Its statistics are read for `/metrics`, so a leak
//! (the live heap growing) can be told from allocator slack (the resident set growing).

//!
//! The binary sets jemalloc as its allocator; this module reads it. The unit tests set it too.

#[cfg(test)]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The allocator's view of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes the program has allocated and not freed: the live heap.
    pub allocated: u64,
    /// Bytes of the allocator's pages that are resident (the live heap plus its slack).
    pub resident: u64,
}

/// The statistics now, or `None` when jemalloc cannot say.
pub fn stats() -> Option<HeapStats> {
    // jemalloc caches its statistics; advancing the epoch refreshes them.
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
    let resident = tikv_jemalloc_ctl::stats::resident::read().ok()?;
    Some(HeapStats {
        allocated: u64::try_from(allocated).unwrap_or(u64::MAX),
        resident: u64::try_from(resident).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_heap_follows_what_is_held() {
        // Other tests allocate in this process at the same time, so the bounds leave them room.
        let held = vec![7u8; 64 << 20];
        let during = stats().unwrap();
        assert!(during.allocated >= 64 << 20, "{during:?}");
        assert!(during.resident >= 32 << 20, "{during:?}");
        drop(held);
        let after = stats().unwrap();
        assert!(
            after.allocated + (32 << 20) <= during.allocated,
            "{during:?} then {after:?}"
        );
    }
}
