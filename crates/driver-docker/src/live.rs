//! A task's live view: agent-browser's own screencast, from its stream server on the container's
//! loopback. Pages cannot reach that port (Chromium sends even loopback through the egress proxy,
//! which refuses it) and the worker cannot ask for it (the command policy refuses `stream`). The
//! host reaches it through an exec of `airlock-relay --stdio-to`, whose stdio dockerd attaches:
//! the host opens no port and nothing in the container can reach the host. The host speaks the
//! WebSocket itself (tokio-tungstenite over the exec's stdio), every message bounded, and keeps
//! only the newest frame, so a slow watcher never builds a backlog. A helping person's input
//! goes the other way, as typed events the caller admitted (see `airlock_policy::HumanInput`).
//!
//! The stream server's port is fixed by the image (`AGENT_BROWSER_STREAM_PORT`, 9223), so a
//! watch asks agent-browser's daemon nothing: the daemon answers one command at a time and may be
//! busy with the worker's (asking it, a watch started during a `wait` missed the page it was
//! meant to see). agent-browser drops input sent in the first seconds after a viewer connects
//! (lost at 0.5 and 1.5 s, taken at 3 s); a person is slower than that.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_worker::{HumanInput, LiveError, LiveFeed, LiveFrame, LiveSource, WatchFuture};
use base64::Engine;
use bollard::Docker;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use airlock_policy::{LIVE_MAX_FPS, MAX_LIVE_WATCHES};

use crate::exec_socket::{self, ExecSocket, Unconnected};

/// The largest stream message taken: a frame of the 1280×720 viewport is about 54 KB as JPEG
/// (base64 in JSON adds a third). Larger messages end the watch.
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// How long to wait before trying the stream server again.
const RETRY_AFTER: Duration = Duration::from_millis(200);
/// The most the stream's start (the relay's exec, the handshake) may take.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// One session's live view.
pub(crate) struct DockerLive {
    pub(crate) docker: Docker,
    pub(crate) container: String,
    /// Watches open now.
    pub(crate) watches: Arc<AtomicUsize>,
}

/// One message of the stream server (only frames are read).
#[derive(Deserialize)]
struct StreamMessage {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    data: String,
}

/// Counts a watch, and stops its reader and writer when it is dropped (the WebSocket, the exec
/// and its relay end with them).
struct Watching {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    watches: Arc<AtomicUsize>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.watches.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Input events waiting for the stream; past this a burst (mouse moves) drops.
const INPUT_QUEUE: usize = 64;

fn failure(what: &str, error: impl std::fmt::Display) -> LiveError {
    LiveError(format!("{what}: {error}"))
}

impl DockerLive {
    async fn open(&self) -> Result<LiveFeed, LiveError> {
        let taken = self
            .watches
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |open| {
                (open < MAX_LIVE_WATCHES).then_some(open + 1)
            });
        if taken.is_err() {
            return Err(LiveError(format!(
                "{MAX_LIVE_WATCHES} watches of this task are open already, the most it takes; close one"
            )));
        }
        let mut watching = Watching {
            tasks: Vec::new(),
            watches: Arc::clone(&self.watches),
        };
        let socket = loop {
            match self.connect().await {
                Ok(socket) => break socket,
                // The stream server starts with agent-browser's daemon, which a session that
                // has run no command yet may not have started: try again, within the start's
                // time limit.
                Err(Unconnected::NoHandshake(error)) => {
                    tracing::debug!(%error, "the stream server is not up yet");
                    tokio::time::sleep(RETRY_AFTER).await;
                }
                Err(Unconnected::NoRelay) => {
                    return Err(failure("exec", "Docker did not start the relay"));
                }
            }
        };
        let (sender, frames) = watch::channel(None);
        let (input, events) = mpsc::channel(INPUT_QUEUE);
        let (writer, reader) = socket.split();
        watching
            .tasks
            .push(tokio::spawn(read_frames(reader, sender)));
        watching
            .tasks
            .push(tokio::spawn(write_input(writer, events)));
        Ok(LiveFeed {
            frames,
            input: Some(input),
            guard: Box::new(watching),
        })
    }
}

impl DockerLive {
    /// The relay's exec, and the WebSocket handshake over its stdio.
    async fn connect(&self) -> Result<ExecSocket, Unconnected> {
        // The stream server's port is known (`AGENT_BROWSER_STREAM_PORT` in the image), so a
        // watch asks the daemon nothing (it answers one command at a time, and may be busy with
        // the worker's); the command is the one the Docker gate admits.
        let url = format!(
            "ws://{}/?maxFps={LIVE_MAX_FPS}",
            airlock_policy::LIVE_VIEW_EXEC[2]
        );
        exec_socket::connect(
            &self.docker,
            &self.container,
            &airlock_policy::LIVE_VIEW_EXEC,
            &url,
            MAX_MESSAGE_BYTES,
        )
        .await
    }
}

impl LiveSource for DockerLive {
    fn watch(&self) -> WatchFuture<'_> {
        Box::pin(async move {
            tokio::time::timeout(START_TIMEOUT, self.open())
                .await
                .map_err(|_| failure("start", "timed out"))?
        })
    }
}

/// Write each input event the caller admitted, as the guard wrote it (never a viewer's text).
async fn write_input<S>(mut writer: S, mut events: mpsc::Receiver<HumanInput>)
where
    S: futures_util::Sink<Message> + Unpin,
{
    while let Some(event) = events.recv().await {
        let message = Message::Text(event.to_stream_message().into());
        if writer.send(message).await.is_err() {
            return;
        }
    }
}

/// Keep the newest frame until the stream or every watcher ends.
async fn read_frames<S>(mut socket: S, sender: watch::Sender<Option<Arc<LiveFrame>>>)
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let message = match socket.next().await {
            Some(Ok(message)) => message,
            Some(Err(error)) => {
                tracing::debug!(%error, "a live view's stream ended");
                return;
            }
            None => return,
        };
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(message) = serde_json::from_str::<StreamMessage>(&text) else {
            continue;
        };
        if message.kind != "frame" {
            continue;
        }
        let Ok(jpeg) = base64::engine::general_purpose::STANDARD.decode(message.data) else {
            continue;
        };
        let frame = LiveFrame {
            seq: message.seq,
            jpeg,
        };
        if sender.send(Some(Arc::new(frame))).is_err() {
            return;
        }
    }
}
