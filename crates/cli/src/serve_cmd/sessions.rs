//! `--max-sessions` as a count that holds under concurrency: a session being opened counts from
//! its admission until its request is answered (by then rmcp has registered it), so initializes
//! that arrive together cannot all pass a check of the sessions already open.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::sync::Mutex;

/// Sessions being opened now.
#[derive(Debug, Default)]
pub(crate) struct Opening {
    /// Admissions one at a time: each reads the counts and takes its place in one step.
    admitting: Mutex<()>,
    count: Arc<AtomicUsize>,
}

/// One session being opened; dropped once its request is answered.
pub(crate) struct Admitted(Arc<AtomicUsize>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Opening {
    /// A place for one more session, if open and opening ones stay within `max`.
    pub(crate) async fn admit(
        &self,
        sessions: &LocalSessionManager,
        max: usize,
    ) -> Option<Admitted> {
        let _one_at_a_time = self.admitting.lock().await;
        // Opening first, then open: a session that finishes opening meanwhile is registered
        // before it stops counting as opening, so it is never missed by both.
        let opening = self.count.load(Ordering::SeqCst);
        let open = sessions.sessions.read().await.len();
        if open + opening >= max {
            return None;
        }
        self.count.fetch_add(1, Ordering::SeqCst);
        Some(Admitted(Arc::clone(&self.count)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
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
}
