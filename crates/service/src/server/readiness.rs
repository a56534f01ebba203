//! `/readyz`: whether this server can take a task now. Anyone may ask (engines probe by address,
//! without a token, and the Origin check is not made there either: the answer tells nothing a
//! page could use), so it answers with fixed words, and it asks Docker at most once per
//! [`READY_CACHE`] however many probes come: an unauthenticated caller must not be able to make
//! this server hammer dockerd or read dockerd's error text. An authenticated caller also gets
//! the details.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// How long one check of Docker and the image answers for.
pub(super) const READY_CACHE: Duration = Duration::from_secs(2);

/// Why the server is not ready, as a fixed word, with the details for those allowed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NotReady {
    /// Shutting down.
    Draining,
    /// Every slot busy and the queue full.
    Full,
    /// Docker, the image or the runtime cannot start a browser.
    BrowserUnavailable(String),
}

impl NotReady {
    /// The word anyone may read.
    pub(super) fn word(&self) -> &'static str {
        match self {
            Self::Draining => "draining",
            Self::Full => "full",
            Self::BrowserUnavailable(_) => "browser-unavailable",
        }
    }

    /// The details, for an authenticated caller.
    pub(super) fn detail(&self) -> String {
        match self {
            Self::Draining => "the server is shutting down".to_owned(),
            Self::Full => "every task slot is busy and the queue is full".to_owned(),
            Self::BrowserUnavailable(why) => format!("the browser cannot start: {why}"),
        }
    }
}

/// The last answer of the expensive check, shared by every probe.
#[derive(Debug, Default)]
pub(super) struct Readiness {
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    /// `check`'s answer, asked at most once per [`READY_CACHE`]; probes that arrive while it
    /// runs wait for that one answer.
    pub(super) async fn browser_can_start<F, Fut>(&self, check: F) -> Result<(), String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let mut last = self.last.lock().await;
        if let Some((at, answer)) = &*last
            && at.elapsed() < READY_CACHE
        {
            return answer.clone();
        }
        let answer = check().await;
        *last = Some((Instant::now(), answer.clone()));
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_probes_asks_docker_once_per_interval() {
        let readiness = Arc::new(Readiness::default());
        let asked = Arc::new(AtomicUsize::new(0));
        let probe = || {
            let readiness = Arc::clone(&readiness);
            let asked = Arc::clone(&asked);
            async move {
                readiness
                    .browser_can_start(|| async {
                        asked.fetch_add(1, Ordering::SeqCst);
                        Err(
                            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock"
                                .to_owned(),
                        )
                    })
                    .await
            }
        };
        let mut probes = tokio::task::JoinSet::new();
        for _ in 0..1_000 {
            probes.spawn(probe());
        }
        while let Some(answer) = probes.join_next().await {
            assert!(answer.unwrap().is_err());
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        tokio::time::advance(READY_CACHE).await;
        probe().await.unwrap_err();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn anyone_reads_a_fixed_word_and_only_the_details_carry_dockers_text() {
        let unavailable = NotReady::BrowserUnavailable(
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock".to_owned(),
        );
        assert_eq!(unavailable.word(), "browser-unavailable");
        assert!(unavailable.detail().contains("docker.sock"));
        assert_eq!(NotReady::Full.word(), "full");
        assert_eq!(NotReady::Draining.word(), "draining");
    }
}
