//! `--max-sessions` as a count that holds under concurrency: a session being opened counts from
//! its admission until its request is answered (by then rmcp has registered it), so initializes
//! that arrive together cannot all pass a check of the sessions already open. Between its
//! registration and its answer a session counts twice (open and opening); an admission that finds
//! the server full only by counting sessions still opening waits for them to finish and looks
//! again, so the cap is reached exactly, never short.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::sync::{Mutex, Notify};

/// The longest an admission waits for sessions still opening before it refuses.
const OPENING_WAIT: Duration = Duration::from_secs(5);

/// Sessions being opened now.
#[derive(Debug, Default)]
pub(super) struct Opening {
    /// Admissions one at a time: each reads the counts and takes its place in one step.
    admitting: Mutex<()>,
    count: Arc<AtomicUsize>,
    /// Told when a session stops opening.
    finished: Arc<Notify>,
}

/// One session being opened; dropped once its request is answered.
pub(super) struct Admitted {
    count: Arc<AtomicUsize>,
    finished: Arc<Notify>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
        self.finished.notify_waiters();
    }
}

impl Opening {
    /// A place for one more session, if open and opening ones stay within `max`.
    pub(super) async fn admit(
        &self,
        sessions: &LocalSessionManager,
        max: usize,
    ) -> Option<Admitted> {
        let _one_at_a_time = self.admitting.lock().await;
        let deadline = tokio::time::Instant::now() + OPENING_WAIT;
        loop {
            let finished = self.finished.notified();
            tokio::pin!(finished);
            // Registered before the counts are read, so a session that finishes in between
            // still wakes this admission.
            finished.as_mut().enable();
            // Opening first, then open: a session that finishes opening meanwhile is registered
            // before it stops counting as opening, so it is never missed by both.
            let opening = self.count.load(Ordering::SeqCst);
            let open = sessions.sessions.read().await.len();
            if open + opening < max {
                self.count.fetch_add(1, Ordering::SeqCst);
                return Some(Admitted {
                    count: Arc::clone(&self.count),
                    finished: Arc::clone(&self.finished),
                });
            }
            if opening == 0 || open >= max {
                return None;
            }
            tokio::time::timeout_at(deadline, finished).await.ok()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sessions_being_opened_count_against_the_limit() {
        let opening = Opening::default();
        let sessions = LocalSessionManager::default();
        let first = opening.admit(&sessions, 2).await;
        let second = opening.admit(&sessions, 2).await;
        assert!(first.is_some() && second.is_some());
        assert!(
            opening.admit(&sessions, 2).await.is_none(),
            "a third was admitted while two were still opening"
        );
        drop(first);
        assert!(opening.admit(&sessions, 2).await.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn an_admission_at_the_limit_waits_for_an_opening_to_finish() {
        let opening = Arc::new(Opening::default());
        let sessions = Arc::new(LocalSessionManager::default());
        let first = opening.admit(&sessions, 1).await;
        let waiting = {
            let opening = Arc::clone(&opening);
            let sessions = Arc::clone(&sessions);
            tokio::spawn(async move { opening.admit(&sessions, 1).await.is_some() })
        };
        // The first never registers (its initialize failed): the waiting one gets its place.
        tokio::task::yield_now().await;
        drop(first);
        assert!(waiting.await.unwrap());
    }
}
