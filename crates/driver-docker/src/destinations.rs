//! The allowed destinations a task's browser connected to since the last look, and what their
//! connections carried as each closed: a tally per destination, bounded like the refusals (a
//! page can open connections to thousands of hosts).

use airlock_proxy::{Outcome, ProxyEvent, Via};
use airlock_worker::{EgressAllowed, EgressBytes, TaskContext, tally_allowed};

/// Connections and bytes per destination since the last look, and bytes per route.
#[derive(Debug, Default)]
pub(crate) struct Destinations {
    listed: Vec<EgressAllowed>,
    /// Connections to destinations past the limit, counted only.
    beyond: u64,
    /// Every closed connection's bytes, by route (the operator's few routes: bounded).
    by_route: std::collections::BTreeMap<String, EgressBytes>,
}

impl Destinations {
    /// Count an `Allowed` (a connection) or a `Closed` (its bytes); other events are not theirs.
    pub(crate) fn count(&mut self, event: &ProxyEvent) {
        let (connections, bytes, route) = match &event.outcome {
            Outcome::Allowed { route, .. } => (1, EgressBytes::default(), route),
            Outcome::Closed { up, down, route } => {
                let bytes = EgressBytes {
                    up: *up,
                    down: *down,
                };
                self.by_route.entry(route.clone()).or_default().add(bytes);
                (0, bytes, route)
            }
            Outcome::Refused { .. } | Outcome::Failed { .. } => return,
        };
        let allowed =
            EgressAllowed::new(destination_of(event), connections, bytes).by_route(route.clone());
        tally_allowed(&mut self.listed, &mut self.beyond, allowed);
    }

    /// The destinations tallied one by one.
    #[cfg(test)]
    pub(crate) fn listed(&self) -> &[EgressAllowed] {
        &self.listed
    }

    /// Add the tally to the task's record (at the step running now).
    pub(crate) fn record_into(self, context: &TaskContext) {
        for allowed in self.listed {
            context.record_allowed(allowed);
        }
        context.record_unlisted_allowed(self.beyond);
        for (route, bytes) in self.by_route {
            context.record_route_bytes(&route, bytes);
        }
    }
}

/// Where a connection went: `host:port` for a tunnel, `http://host:port` for a forwarded
/// request (its URL without the path: one destination, however many pages).
fn destination_of(event: &ProxyEvent) -> String {
    match event.via {
        Via::Connect => event.target.clone(),
        Via::Forward => {
            let rest = event
                .target
                .strip_prefix("http://")
                .unwrap_or(&event.target);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
            format!("http://{authority}")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    fn event(via: Via, target: &str, outcome: Outcome) -> ProxyEvent {
        ProxyEvent {
            at: SystemTime::now(),
            via,
            target: target.to_owned(),
            outcome,
        }
    }

    fn allowed() -> Outcome {
        Outcome::Allowed {
            address: "203.0.113.7:443".parse().unwrap(),
            route: "direct".into(),
        }
    }

    fn closed(up: u64, down: u64, route: &str) -> Outcome {
        Outcome::Closed {
            up,
            down,
            route: route.into(),
        }
    }

    #[test]
    fn connections_and_their_bytes_add_up_per_destination_within_bounds() {
        let mut destinations = Destinations::default();
        destinations.count(&event(Via::Connect, "lab.test:443", allowed()));
        destinations.count(&event(Via::Connect, "lab.test:443", allowed()));
        destinations.count(&event(
            Via::Connect,
            "lab.test:443",
            closed(10, 200, "direct"),
        ));
        // Forwarded requests to one origin are one destination, whatever their paths.
        destinations.count(&event(Via::Forward, "http://lab.test:8080/a", allowed()));
        destinations.count(&event(Via::Forward, "http://lab.test:8080/b/c", allowed()));
        destinations.count(&event(
            Via::Forward,
            "http://lab.test:8080/b/c",
            closed(1, 2, "direct"),
        ));
        let listed: Vec<_> = destinations
            .listed
            .iter()
            .map(|a| (a.destination.as_str(), a.connections, a.up, a.down))
            .collect();
        assert_eq!(
            listed,
            [
                ("lab.test:443", 2, 10, 200),
                ("http://lab.test:8080", 2, 1, 2)
            ]
        );
        for n in 0..1_000 {
            destinations.count(&event(Via::Connect, &format!("h{n}.test:443"), allowed()));
        }
        assert_eq!(destinations.listed.len(), airlock_worker::EGRESS_LIST_LIMIT);
        assert_eq!(destinations.beyond, 1_000 - 98);
        // Every route's bytes count, listed destinations or not.
        destinations.count(&event(Via::Connect, "h999.test:443", closed(5, 7, "corp")));
        assert_eq!(
            destinations.by_route,
            std::collections::BTreeMap::from([
                ("corp".to_owned(), EgressBytes { up: 5, down: 7 }),
                ("direct".to_owned(), EgressBytes { up: 11, down: 202 }),
            ])
        );
    }
}
