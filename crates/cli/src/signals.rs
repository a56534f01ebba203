//! Waiting for the signals that end a long-running command.

use std::future::Future;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Resolves on Ctrl-C (SIGINT) or SIGTERM.
///
/// The handlers are installed when this is called, not when the future is first awaited: call it
/// before announcing that the command is ready, so a signal sent right after the announcement
/// still ends it gracefully instead of killing it with the default action.
pub(crate) fn terminated() -> impl Future<Output = ()> {
    let interrupt = listen(SignalKind::interrupt(), "SIGINT (Ctrl-C)");
    let terminate = listen(SignalKind::terminate(), "SIGTERM");
    async move {
        tokio::select! {
            () = next(interrupt) => {}
            () = next(terminate) => {}
        }
    }
}

fn listen(kind: SignalKind, name: &str) -> Option<Signal> {
    match signal(kind) {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for {name}; it will not stop this command gracefully");
            None
        }
    }
}

async fn next(signal: Option<Signal>) {
    match signal {
        Some(mut signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}
