//! A connection slot, held for as long as the connection (and any tunnel it opened) lives.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::OwnedSemaphorePermit;

use crate::events::Counters;

/// Holds a connection slot; tunnels keep a clone so the slot lasts as long as the tunnel.
pub(crate) struct Ticket {
    pub(crate) _permit: OwnedSemaphorePermit,
    pub(crate) counters: Arc<Counters>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.counters
            .active_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}
