//! Waiting for the signals that end a long-running command.

/// Resolves on Ctrl-C (SIGINT) or SIGTERM.
pub async fn terminated() {
    let mut sigterm = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C will stop this command");
            None
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async {
            match sigterm.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        } => {}
    }
}
