//! A CDP lease's live view: the lease's page as frames, for its token's viewers, while its
//! client drives. The lease's own loop (`cdp.rs`) owns the browser's pipe, so the watch runs
//! there: [`LeaseView::next`] says what the watch sends the browser next (a viewer arrived, the
//! last one went, a frame's acknowledgement is due), and [`LeaseView::take`] takes the watch's
//! own messages out of what the browser says before the client reads it
//! (`airlock_policy::CdpWatch`). Viewers reach it through a [`LeaseSource`]; nothing they send
//! reaches the page (the client drives it). Nobody watching costs the lease a prefix check per
//! browser message.

use std::sync::Arc;
use std::time::Duration;

use airlock_policy::{CdpWatch, LIVE_MAX_FPS, MAX_LIVE_WATCHES, WatchAction};
use airlock_worker::{LiveError, LiveFeed, LiveFrame, LiveSource, WatchFuture};
use base64::Engine;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// The newest frame, as every viewer of one lease shares it.
type Frames = watch::Receiver<Option<Arc<LiveFrame>>>;
/// A viewer's request, answered with the frames or why not.
type WatchRequest = oneshot::Sender<Result<Frames, LiveError>>;

/// The least time between two frames: the same rate as a task's live view.
const FRAME_INTERVAL: Duration = Duration::from_millis(1000 / LIVE_MAX_FPS as u64);
/// How long to wait before looking for a page again when there was none to watch.
const LOOK_AGAIN: Duration = Duration::from_secs(1);
/// Viewers' requests waiting for the lease's loop.
const REQUESTS: usize = 4;

/// The watch's side in the lease's loop.
pub(super) struct LeaseView {
    watch: CdpWatch,
    frames: watch::Sender<Option<Arc<LiveFrame>>>,
    requests: mpsc::Receiver<WatchRequest>,
    /// The acknowledgement of the last frame, sent when the next frame is due.
    ack: Option<String>,
    ack_at: Instant,
    /// When to look for a page again (there was none, or the watched one closed).
    look_at: Option<Instant>,
    seq: u64,
}

/// What the browser said, sorted.
pub(super) struct Taken {
    /// For the browser (the watch's next command).
    pub(super) to_browser: Vec<String>,
    /// For the client after all (an attach event the watch held while its own was under way).
    pub(super) to_client: Vec<String>,
}

/// Where viewers ask for a lease's frames.
pub(super) struct LeaseSource {
    requests: mpsc::Sender<WatchRequest>,
}

/// A lease's view and its source.
pub(super) fn lease_view() -> (LeaseView, LeaseSource) {
    let (frames, _) = watch::channel(None);
    let (sender, requests) = mpsc::channel(REQUESTS);
    let view = LeaseView {
        watch: CdpWatch::new(),
        frames,
        requests,
        ack: None,
        ack_at: Instant::now(),
        look_at: None,
        seq: 0,
    };
    (view, LeaseSource { requests: sender })
}

impl LiveSource for LeaseSource {
    fn watch(&self) -> WatchFuture<'_> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.requests.try_send(reply).map_err(|_| {
                LiveError("the lease is ending, or other viewers are opening now: try again".into())
            })?;
            let mut frames = answer
                .await
                .map_err(|_| LiveError("the lease has ended".into()))??;
            // A page at rest sends no frames: a viewer who comes later starts with the newest.
            frames.mark_changed();
            Ok(LiveFeed {
                frames,
                // A lease's page is its client's: a viewer only watches.
                input: None,
                guard: Box::new(()),
            })
        })
    }
}

impl LeaseView {
    /// The watch's next message for the browser. Cancel-safe: the lease's loop selects on it
    /// beside the client and the browser.
    pub(super) async fn next(&mut self) -> String {
        loop {
            let watching = self.watch.active();
            let ack_due = self.ack.is_some();
            let look_at = self.look_at;
            tokio::select! {
                Some(request) = self.requests.recv() => {
                    if let Some(begin) = self.admit(request) {
                        return begin;
                    }
                }
                () = self.frames.closed(), if watching => {
                    // The last viewer went.
                    self.ack = None;
                    self.look_at = None;
                    if let Some(end) = self.watch.end() {
                        return end;
                    }
                }
                () = tokio::time::sleep_until(self.ack_at), if ack_due => {
                    if let Some(ack) = self.ack.take() {
                        return ack;
                    }
                }
                () = sleep_until_some(look_at) => {
                    self.look_at = None;
                    if self.frames.receiver_count() > 0
                        && let Some(begin) = self.watch.begin()
                    {
                        return begin;
                    }
                }
            }
        }
    }

    /// Answer a viewer; the command that starts the watch if it is the first.
    fn admit(&mut self, request: WatchRequest) -> Option<String> {
        if self.frames.receiver_count() >= MAX_LIVE_WATCHES {
            let _ = request.send(Err(LiveError(format!(
                "{MAX_LIVE_WATCHES} viewers of this lease are open already, the most it takes; close one"
            ))));
            return None;
        }
        if request.send(Ok(self.frames.subscribe())).is_err() {
            return None;
        }
        self.watch.begin()
    }

    /// Take the watch's own messages out of what the browser said: `None` when `message` is
    /// the client's.
    pub(super) fn take(&mut self, message: &str) -> Option<Taken> {
        let actions = self.watch.read(message)?;
        let mut taken = Taken {
            to_browser: Vec::new(),
            to_client: Vec::new(),
        };
        for action in actions {
            match action {
                WatchAction::Send(command) => taken.to_browser.push(command),
                WatchAction::ToClient(event) => taken.to_client.push(event),
                WatchAction::Still(jpeg_base64) => self.show(&jpeg_base64),
                WatchAction::NoPage => {
                    if self.frames.receiver_count() > 0 {
                        self.look_at = Some(Instant::now() + LOOK_AGAIN);
                    }
                }
                WatchAction::Frame { jpeg_base64, ack } => {
                    self.show(&jpeg_base64);
                    // The next frame comes only once this one is acknowledged: spacing the
                    // acks bounds the rate.
                    self.ack_at = Instant::now() + FRAME_INTERVAL;
                    self.ack = Some(ack);
                }
            }
        }
        Some(taken)
    }

    fn show(&mut self, jpeg_base64: &str) {
        let Ok(jpeg) = base64::engine::general_purpose::STANDARD.decode(jpeg_base64) else {
            return;
        };
        self.seq += 1;
        let frame = LiveFrame {
            seq: self.seq,
            jpeg,
        };
        self.frames.send_replace(Some(Arc::new(frame)));
    }
}

/// Sleep until `at`, or forever when there is no `at`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn id_of(command: &str) -> i64 {
        serde_json::from_str::<Value>(command).unwrap()["id"]
            .as_i64()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_viewer_starts_the_watch_frames_are_paced_and_the_last_viewer_ends_it() {
        let (mut view, source) = lease_view();
        let (list, feed) = tokio::join!(view.next(), source.watch());
        let mut feed = feed.unwrap();
        assert!(feed.input.is_none(), "a lease's page takes no input");
        assert!(list.contains("Target.getTargets"), "{list}");
        let listed = format!(
            r#"{{"id":{},"result":{{"targetInfos":[{{"targetId":"P","type":"page","attached":true}}]}}}}"#,
            id_of(&list)
        );
        let attach = view.take(&listed).unwrap().to_browser.remove(0);
        let attached = format!(
            r#"{{"id":{},"result":{{"sessionId":"S"}}}}"#,
            id_of(&attach)
        );
        let start = view.take(&attached).unwrap().to_browser.remove(0);
        assert!(start.contains("Page.startScreencast"), "{start}");
        assert!(
            view.take(r#"{"id":1,"result":{}}"#).is_none(),
            "the client's"
        );

        let frame = r#"{"method":"Page.screencastFrame","params":{"data":"/9j/","sessionId":1},"sessionId":"S"}"#;
        let taken = view.take(frame).unwrap();
        assert!(taken.to_browser.is_empty(), "the ack waits for its time");
        feed.frames.changed().await.unwrap();
        assert_eq!(
            feed.frames.borrow().as_ref().unwrap().jpeg,
            [0xff, 0xd8, 0xff]
        );
        let before = Instant::now();
        let ack = view.next().await;
        assert!(ack.contains("Page.screencastFrameAck"), "{ack}");
        assert_eq!(Instant::now() - before, FRAME_INTERVAL);

        drop(feed);
        let detach = view.next().await;
        assert!(detach.contains("Target.detachFromTarget"), "{detach}");
    }

    #[tokio::test]
    async fn a_lease_that_ended_tells_its_viewer_so() {
        let (view, source) = lease_view();
        drop(view);
        let error = source.watch().await.unwrap_err();
        assert!(error.to_string().contains("ending"), "{error}");
    }
}
