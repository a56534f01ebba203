//! One client connection: hyper's HTTP/1.1 server on the bounded socket, every request handed to
//! [`Shared::handle`].

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use airlock_policy::EgressPolicy;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::ProxyLimits;
use crate::bounded::{Bounded, ByteCounters};
use crate::client::{Client, LingeringClose};
use crate::events::{Counters, EventSink};
use crate::network::{Connector, Resolver};
use crate::slot::Ticket;

/// Everything a connection needs, shared by all of them.
pub(crate) struct Shared {
    /// The policy and the routes, each swapped whole when a task narrows its scope or picks its
    /// route; each request judges one snapshot.
    pub(crate) policy: Arc<crate::policy_cell::PolicyCell>,
    pub(crate) limits: ProxyLimits,
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) connector: Arc<dyn Connector>,
    /// TLS to `https://` parents.
    pub(crate) parent_tls: crate::parent_tls::ParentTls,
    pub(crate) events: Option<EventSink>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) shutdown: CancellationToken,
    /// Tunnels and forwarded connections, which outlive the request that opened them: the
    /// proxy's stop waits for them (and so for their closing events).
    pub(crate) tasks: TaskTracker,
}

impl Shared {
    /// The policy as it stands now.
    pub(crate) fn policy(&self) -> Arc<EgressPolicy> {
        self.policy.get()
    }

    /// How allowed destinations are reached, as it stands now.
    pub(crate) fn routes(&self) -> Arc<airlock_policy::Routes> {
        self.policy.routes()
    }
}

/// Serve HTTP/1.1 on one client's socket until it closes or the proxy stops.
pub(crate) async fn serve(stream: Client, shared: Arc<Shared>, ticket: Arc<Ticket>) {
    let limits = shared.limits;
    // The client side gets the idle time-out too; its bytes are not upstream traffic.
    let client_counters = ByteCounters {
        read: Arc::new(AtomicU64::new(0)),
        written: Arc::new(AtomicU64::new(0)),
        own: None,
    };
    let client = Bounded::new(
        LingeringClose(Some(stream)),
        limits.idle_timeout,
        u64::MAX,
        client_counters,
    );
    let service = {
        let shared = Arc::clone(&shared);
        service_fn(move |request| {
            let shared = Arc::clone(&shared);
            let ticket = Arc::clone(&ticket);
            async move { Ok::<_, Infallible>(shared.handle(request, ticket).await) }
        })
    };
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes)
        .serve_connection(TokioIo::new(client), service)
        .with_upgrades();
    tokio::select! {
        result = connection => {
            if let Err(error) = result {
                tracing::debug!(%error, "egress proxy client connection ended with an error");
            }
        }
        () = shared.shutdown.cancelled() => {}
    }
}
