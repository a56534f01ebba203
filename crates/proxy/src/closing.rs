//! The event an allowed connection sends when it ends, however it ends (done, failed, idle,
//! capped, the client gone, the proxy stopping): what it carried each way. It is sent on drop, so
//! no path past the `Allowed` event can skip it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use crate::bounded::{Bounded, OwnBytes};
use crate::connection::Shared;
use crate::events::{EventSink, Outcome, ProxyEvent, Via};

/// Held by whatever owns an allowed connection; reports its bytes when dropped.
pub(crate) struct ClosingReport {
    sink: EventSink,
    via: Via,
    target: String,
    route: String,
    bytes: Arc<OwnBytes>,
}

impl Shared {
    /// The closing report of `upstream`, opened for `target`; none when nobody listens.
    pub(crate) fn closing_report<S>(
        &self,
        via: Via,
        target: &str,
        upstream: &Bounded<S>,
        route: &str,
    ) -> Option<ClosingReport> {
        Some(ClosingReport {
            sink: Arc::clone(self.events.as_ref()?),
            via,
            target: target.to_owned(),
            route: route.to_owned(),
            bytes: upstream.own_bytes()?,
        })
    }
}

impl Drop for ClosingReport {
    fn drop(&mut self) {
        (self.sink)(ProxyEvent {
            at: SystemTime::now(),
            via: self.via,
            target: std::mem::take(&mut self.target),
            outcome: Outcome::Closed {
                up: self.bytes.written.load(Ordering::Relaxed),
                down: self.bytes.read.load(Ordering::Relaxed),
                route: std::mem::take(&mut self.route),
            },
        });
    }
}
