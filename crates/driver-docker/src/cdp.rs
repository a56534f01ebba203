//! A sealed browser driven over the Chrome DevTools Protocol, for one CDP client.
//!
//! The container is a task container like any other (no network, the egress proxy as its only way
//! out). Chromium is started by `docker exec -i airlock-cdp-browser` with
//! `--remote-debugging-pipe`: DevTools messages go over the exec's stdin and stdout, each ended by
//! a NUL byte, so nothing in the container listens for DevTools (no port a page or a process could
//! reach, no socket file) and the container needs no second mount. The host's end is the exec
//! stream that dockerd attaches, the same way every agent-browser command is run. It works
//! unchanged under gVisor, whose sockets are not host sockets; the cost is one more copy through
//! dockerd per message.

use std::collections::VecDeque;
use std::time::Duration;

use airlock_proxy::EgressEvents;
use bollard::Docker;
use bollard::container::LogOutput;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::DockerError;
use crate::exec;
use crate::teardown::Made;
use crate::unseen_egress::{self, PendingRefusals};

/// The largest message taken from the browser: what the largest real screenshot needs (Chromium
/// caps a capture at 16,384 px a side; a full-page PNG of a long, busy page is tens of megabytes
/// of base64). Past this the lease ends instead of the server holding whatever the container
/// sends; a client that needs more asks for a `clip`.
pub const MAX_BROWSER_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// The id of the one command the driver sends itself (to see Chromium answer) before a client has
/// the browser. Clients count from 1.
const READY_PROBE_ID: i64 = 0;
/// Lines of Chromium's stderr kept to explain a browser that died.
const STDERR_LINES: usize = 20;

/// Why the browser's pipe failed.
#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    /// Writing to the browser failed: it has exited.
    #[error("the browser stopped taking messages ({0}); the lease is over, connect again")]
    Write(std::io::Error),
    /// Docker's exec stream failed.
    #[error("the browser's DevTools stream failed: {0}; connect again")]
    Stream(bollard::errors::Error),
    /// One message was larger than [`MAX_BROWSER_MESSAGE_BYTES`].
    #[error(
        "the browser sent a message over {MAX_BROWSER_MESSAGE_BYTES} bytes; ask for less at once (a smaller screenshot clip)"
    )]
    TooLarge,
    /// A message was not UTF-8.
    #[error("the browser sent a message that is not UTF-8")]
    NotText,
}

/// Chromium's DevTools pipe, attached through dockerd.
pub(crate) struct Pipe {
    input: exec::AttachedInput,
    output: exec::AttachedOutput,
    /// Bytes after the last NUL read so far.
    partial: Vec<u8>,
    /// Whole messages read but not yet taken.
    ready: VecDeque<Vec<u8>>,
    stderr: VecDeque<String>,
}

impl Pipe {
    /// Start Chromium in `container` with its DevTools on the exec's stdin and stdout.
    pub(crate) async fn launch(docker: &Docker, container: &str) -> Result<Self, DockerError> {
        let (_, output, input) = exec::attach(
            docker,
            container,
            vec!["/usr/local/bin/airlock-cdp-browser".to_owned()],
            true,
            256 * 1024,
        )
        .await
        .map_err(|failure| match failure {
            exec::AttachFailure::Docker(error) => DockerError::CdpExec(error),
            exec::AttachFailure::Detached => DockerError::CdpDetached,
        })?;
        Ok(Self {
            input,
            output,
            partial: Vec::new(),
            ready: VecDeque::new(),
            stderr: VecDeque::new(),
        })
    }

    /// Ask Chromium for its version and wait (bounded) for the answer, so a browser handed to a
    /// client is one that answers. The answer is not passed on.
    pub(crate) async fn wait_until_answering(
        &mut self,
        limit: Duration,
    ) -> Result<(), DockerError> {
        let probe = format!("{{\"id\":{READY_PROBE_ID},\"method\":\"Browser.getVersion\"}}");
        let answered = async {
            self.send(&probe).await?;
            while let Some(message) = self.next_message().await {
                // Events may come first; only the probe's own answer ends the wait.
                let answer: Option<serde_json::Value> = serde_json::from_str(&message?).ok();
                if answer.and_then(|a| a.get("id")?.as_i64()) == Some(READY_PROBE_ID) {
                    return Ok(true);
                }
            }
            Ok::<bool, CdpError>(false)
        };
        match tokio::time::timeout(limit, answered).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false) | Err(_)) => Err(DockerError::CdpBrowserExited {
                stderr: self.stderr_tail(),
            }),
            Err(_) => Err(DockerError::CdpBrowserSilent {
                seconds: limit.as_secs(),
                stderr: self.stderr_tail(),
            }),
        }
    }

    /// Send one message (JSON without NUL bytes, as the guard re-serialised it).
    pub(crate) async fn send(&mut self, message: &str) -> Result<(), CdpError> {
        self.input
            .write_all(message.as_bytes())
            .await
            .map_err(CdpError::Write)?;
        self.input.write_all(&[0]).await.map_err(CdpError::Write)?;
        self.input.flush().await.map_err(CdpError::Write)
    }

    /// The next whole message from the browser; `None` once it has exited.
    pub(crate) async fn next_message(&mut self) -> Option<Result<String, CdpError>> {
        loop {
            if let Some(message) = self.ready.pop_front() {
                // Two NULs in a row end an empty message: nothing to pass on.
                if message.is_empty() {
                    continue;
                }
                return Some(String::from_utf8(message).map_err(|_| CdpError::NotText));
            }
            match self.output.next().await? {
                Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                    if let Err(error) = self.split(&message) {
                        return Some(Err(error));
                    }
                }
                Ok(LogOutput::StdErr { message }) => self.keep_stderr(&message),
                Ok(LogOutput::StdIn { .. }) => {}
                Err(error) => return Some(Err(CdpError::Stream(error))),
            }
        }
    }

    /// Cut what arrived into NUL-ended messages.
    fn split(&mut self, bytes: &[u8]) -> Result<(), CdpError> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == 0) {
            let mut message = std::mem::take(&mut self.partial);
            message.extend_from_slice(&rest[..end]);
            self.ready.push_back(message);
            rest = &rest[end + 1..];
        }
        if self.partial.len() + rest.len() > MAX_BROWSER_MESSAGE_BYTES {
            return Err(CdpError::TooLarge);
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    fn keep_stderr(&mut self, bytes: &[u8]) {
        for line in String::from_utf8_lossy(bytes).lines() {
            if self.stderr.len() == STDERR_LINES {
                self.stderr.pop_front();
            }
            self.stderr.push_back(line.chars().take(300).collect());
        }
    }

    fn stderr_tail(&self) -> String {
        self.stderr.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// A sealed browser leased to one CDP client. Send it messages, read its messages, and dispose of
/// it when the client is done: the container is removed and the proxy stopped. Dropping it
/// without disposing still removes both (on the runtime, in the background).
pub struct CdpBrowser {
    pub(crate) pipe: Pipe,
    pub(crate) made: Made,
    pub(crate) name: String,
    pub(crate) pending: PendingRefusals,
    pub(crate) warm: bool,
}

impl std::fmt::Debug for CdpBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdpBrowser")
            .field("container", &self.name)
            .field("warm", &self.warm)
            .finish_non_exhaustive()
    }
}

impl CdpBrowser {
    /// The container's name.
    pub fn container(&self) -> &str {
        &self.name
    }

    /// Whether it came from the warm pool.
    pub fn warm(&self) -> bool {
        self.warm
    }

    /// Send one message to the browser.
    pub async fn send(&mut self, message: &str) -> Result<(), CdpError> {
        self.pipe.send(message).await
    }

    /// The next message from the browser; `None` once it has exited.
    pub async fn next_message(&mut self) -> Option<Result<String, CdpError>> {
        self.pipe.next_message().await
    }

    /// What the egress proxy refused or failed since the last call (allowed requests are not
    /// kept): the first 100 events whole, and the refusals past them by class (a page can make
    /// thousands).
    pub fn take_egress_events(&self) -> EgressEvents {
        let taken = unseen_egress::take(&self.pending);
        EgressEvents {
            events: taken.events,
            more_refused: taken.refused_beyond.into_iter().collect(),
            more_failed: taken.failed_beyond,
        }
    }

    /// Remove the container and stop the proxy.
    pub async fn dispose(mut self) {
        // Closing stdin first lets Chromium end on its own; the removal follows either way. A
        // browser that stopped reading (frozen, stuck) must not hold the removal: bounded.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.pipe.input.shutdown()).await;
        self.made.undo().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The exec stream's chunks do not follow message ends; these are cut by hand the ways dockerd
    // delivers them.
    fn pipe_for_split() -> Pipe {
        Pipe {
            input: Box::pin(tokio::io::sink()),
            output: Box::pin(futures_util::stream::empty()),
            partial: Vec::new(),
            ready: VecDeque::new(),
            stderr: VecDeque::new(),
        }
    }

    #[tokio::test]
    async fn messages_are_rebuilt_across_chunks() {
        let mut pipe = pipe_for_split();
        pipe.split(b"{\"id\":1}\0{\"id\"").unwrap();
        pipe.split(b":2,\"result\":{}}").unwrap();
        pipe.split(b"\0\0{\"x\":3}\0").unwrap();
        let mut got = Vec::new();
        while let Some(Ok(message)) = pipe.next_message().await {
            got.push(message);
        }
        assert_eq!(got, ["{\"id\":1}", "{\"id\":2,\"result\":{}}", "{\"x\":3}"]);
    }

    #[test]
    fn a_message_past_the_limit_is_an_error_not_growth() {
        let mut pipe = pipe_for_split();
        let chunk = vec![b'a'; 1024 * 1024];
        let mut result = Ok(());
        for _ in 0..=(MAX_BROWSER_MESSAGE_BYTES / chunk.len()) {
            result = pipe.split(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(CdpError::TooLarge)));
        assert!(pipe.partial.len() <= MAX_BROWSER_MESSAGE_BYTES);
    }
}
