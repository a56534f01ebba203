//! A WebSocket to a port on a sealed container's loopback, carried over an exec of
//! `airlock-relay --stdio-to` whose stdio dockerd attaches: the host opens no port, and nothing in
//! the container can reach the host. The live view reaches agent-browser's stream server this
//! way, and a device's touch its browser's DevTools port. Every message is bounded.

use bollard::Docker;
use bollard::container::LogOutput;
use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::exec;

/// A WebSocket over an exec's stdio.
pub(crate) type ExecSocket = tokio_tungstenite::WebSocketStream<
    tokio::io::Join<tokio_util::io::StreamReader<Bytes, bytes::Bytes>, exec::AttachedInput>,
>;

/// The relay's stdout as a stream of byte chunks.
pub(crate) type Bytes =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send>>;

/// Why a WebSocket over an exec was not made.
pub(crate) enum Unconnected {
    /// Docker did not start the relay: trying again would not help.
    NoRelay,
    /// The handshake failed (the server may not be up yet), in tungstenite's words.
    NoHandshake(String),
}

/// Run `command` (the relay, as the Docker gate admits it) in `container`, and open the WebSocket
/// at `url` over its stdio, taking messages of at most `max_message_bytes`.
pub(crate) async fn connect(
    docker: &Docker,
    container: &str,
    command: &[&str],
    url: &str,
    max_message_bytes: usize,
) -> Result<ExecSocket, Unconnected> {
    let command = command.iter().map(|word| (*word).to_owned()).collect();
    let (_, output, input) = exec::attach(docker, container, command, true, 256 * 1024)
        .await
        .map_err(|_| Unconnected::NoRelay)?;
    // The exec's stdout is the connection's bytes; its stderr (the relay's complaints) is
    // dropped.
    let bytes: Bytes = Box::pin(output.filter_map(|item| {
        std::future::ready(match item {
            Ok(LogOutput::StdOut { message }) => Some(Ok(message)),
            Ok(_) => None,
            Err(error) => Some(Err(std::io::Error::other(error))),
        })
    }));
    let connection = tokio::io::join(tokio_util::io::StreamReader::new(bytes), input);
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message_bytes))
        .max_frame_size(Some(max_message_bytes));
    let (socket, _) = tokio_tungstenite::client_async_with_config(url, connection, Some(config))
        .await
        .map_err(|error| Unconnected::NoHandshake(error.to_string()))?;
    Ok(socket)
}
