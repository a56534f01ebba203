//! Accepting clients: connections to `proxy.sock`, sockets handed off by a relay on
//! `handoff.sock`, connection slots, and the busy answer when none is free.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use airlock_relay::Received;
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::either::Either;

use crate::client::{Client, linger};
use crate::connection::{Shared, serve};
use crate::slot::Ticket;

/// How many relays may hold a hand-off channel at once; a task has one.
const MAX_HANDOFF_CHANNELS: usize = 4;

/// Accept clients until `shutdown`, then end every connection still open. Clients come from
/// `listener` and, as sockets passed by a relay, from channels on `handoff`.
pub(crate) async fn accept_loop(
    listener: UnixListener,
    handoff: Option<UnixListener>,
    shared: Arc<Shared>,
) {
    let slots = Arc::new(Semaphore::new(shared.limits.max_connections));
    let channel_slots = Arc::new(Semaphore::new(MAX_HANDOFF_CHANNELS));
    let mut connections = JoinSet::new();
    loop {
        let client = tokio::select! {
            () = shared.shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => Either::Left(stream),
                Err(error) => {
                    tracing::warn!(%error, "egress proxy could not accept a connection");
                    // Out of descriptors or similar: yield so the loop does not spin.
                    tokio::task::yield_now().await;
                    continue;
                }
            },
            accepted = accept_on(handoff.as_ref()) => {
                match accepted {
                    Ok((channel, _)) => {
                        if let Ok(permit) = Arc::clone(&channel_slots).try_acquire_owned() {
                            connections.spawn(receive_handoffs(
                                channel,
                                Arc::clone(&slots),
                                Arc::clone(&shared),
                                permit,
                            ));
                        } else {
                            tracing::warn!("egress proxy refused a hand-off channel: too many open");
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "egress proxy could not accept a hand-off channel");
                        tokio::task::yield_now().await;
                    }
                }
                continue;
            }
        };
        admit(client, &slots, &shared, &mut connections);
    }
    connections.shutdown().await;
}

/// Serve `client` in a free connection slot, or answer that none is free.
fn admit(
    client: Client,
    slots: &Arc<Semaphore>,
    shared: &Arc<Shared>,
    connections: &mut JoinSet<()>,
) {
    shared.counters.connections.fetch_add(1, Ordering::Relaxed);
    if let Ok(permit) = Arc::clone(slots).try_acquire_owned() {
        shared
            .counters
            .active_connections
            .fetch_add(1, Ordering::Relaxed);
        let ticket = Arc::new(Ticket {
            _permit: permit,
            counters: Arc::clone(&shared.counters),
        });
        connections.spawn(serve(client, Arc::clone(shared), ticket));
    } else {
        shared
            .counters
            .busy_rejections
            .fetch_add(1, Ordering::Relaxed);
        connections.spawn(reject_busy(client));
    }
}

/// Accept on the hand-off listener, or wait forever when there is none.
async fn accept_on(
    listener: Option<&UnixListener>,
) -> std::io::Result<(UnixStream, tokio::net::unix::SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Serve the sockets a relay passes on `channel` until the channel ends, then let the connections
/// it handed over run to their own end (the proxy's shutdown ends this task, and with it them).
/// Each connection starts here, on the task that received it: a second hand-over, to the accept
/// loop, would add a wake-up to every connection.
async fn receive_handoffs(
    channel: UnixStream,
    slots: Arc<Semaphore>,
    shared: Arc<Shared>,
    channel_slot: OwnedSemaphorePermit,
) {
    let mut connections = JoinSet::new();
    read_channel(&channel, &slots, &shared, &mut connections).await;
    drop(channel);
    drop(channel_slot);
    while connections.join_next().await.is_some() {}
}

/// Take each socket passed on `channel` as a client. A message that breaks the protocol ends the
/// channel: the relay is broken or not a relay.
async fn read_channel(
    channel: &UnixStream,
    slots: &Arc<Semaphore>,
    shared: &Arc<Shared>,
    connections: &mut JoinSet<()>,
) {
    let counters = &shared.counters;
    loop {
        tokio::select! {
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            readable = channel.readable() => if readable.is_err() {
                return;
            },
        }
        let received = channel.try_io(Interest::READABLE, || {
            airlock_relay::receive_stream(channel)
        });
        let stream = match received {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(error) => {
                tracing::debug!(%error, "egress proxy hand-off channel failed");
                return;
            }
            Ok(Received::Closed) => return,
            Ok(Received::Refused(refusal)) => {
                counters.handoff_refusals.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%refusal, "egress proxy refused a hand-off and closed its channel");
                return;
            }
            Ok(Received::Stream(stream)) => stream,
        };
        let stream = match stream
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(stream))
        {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "egress proxy could not take a handed-off connection");
                continue;
            }
        };
        // Answers are often small writes; they should not wait on Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        counters.handed_off.fetch_add(1, Ordering::Relaxed);
        admit(Either::Right(stream), slots, shared, connections);
    }
}

/// Answer `503` to a client that found no free connection slot.
async fn reject_busy(mut stream: Client) {
    use tokio::io::AsyncWriteExt;
    let response = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 37\r\ncontent-type: text/plain\r\n\r\nAirlock: too many proxy connections\r\n";
    // The client may already be gone; there is nothing to do about a failed write.
    let _ = stream.write_all(response).await;
    linger(stream).await;
}
