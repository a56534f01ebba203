//! A live picture of a task's page, for whoever watches it run. A driver that can show one offers
//! a [`LiveSource`] in the task's [`LiveSlot`] once its session has started, and withdraws it
//! when the session ends; the task's caller, who gave the run the slot, watches through it.
//! Watching never changes what the task does: a source only reads pictures of the page, and
//! takes a human's input only while the task has asked for help.

use std::sync::{Arc, Mutex, PoisonError};

use std::future::Future;
use std::pin::Pin;

/// One picture of the page (JPEG), newest first: a slow watcher skips frames, never queues them.
#[derive(Clone, PartialEq, Eq)]
pub struct LiveFrame {
    /// Its number in the stream; later frames have larger numbers.
    pub seq: u64,
    /// The picture.
    pub jpeg: Vec<u8>,
}

impl std::fmt::Debug for LiveFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LiveFrame({}, {} bytes)", self.seq, self.jpeg.len())
    }
}

/// An open watch: the newest frame, until the source ends (the task's browser is gone) or this
/// is dropped (which stops the watch).
pub struct LiveFeed {
    /// The newest frame (`None` before the first); closed when the source ends.
    pub frames: tokio::sync::watch::Receiver<Option<Arc<LiveFrame>>>,
    /// Where a helping human's input goes to the page, for a source that takes it; the caller
    /// sends only what the task's [`crate::HelpDesk`] admits. Full (a burst of moves) drops.
    pub input: Option<tokio::sync::mpsc::Sender<airlock_policy::HumanInput>>,
    /// Keeps the watch running; dropping it stops it.
    pub guard: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for LiveFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveFeed").finish_non_exhaustive()
    }
}

/// Why a watch could not start, as the viewer may read it (never a secret: it names the step
/// that failed).
#[derive(Debug, thiserror::Error)]
#[error("the live view could not start: {0}")]
pub struct LiveError(pub String);

/// A watch on its way.
pub type WatchFuture<'a> = Pin<Box<dyn Future<Output = Result<LiveFeed, LiveError>> + Send + 'a>>;

/// Something that can show a task's page as it runs.
pub trait LiveSource: Send + Sync {
    /// Start a watch.
    fn watch(&self) -> WatchFuture<'_>;
}

/// Where a task's live source is while its session runs; cheap to clone, shared by the run and
/// its caller.
#[derive(Clone, Default)]
pub struct LiveSlot(Arc<Mutex<Option<Arc<dyn LiveSource>>>>);

impl std::fmt::Debug for LiveSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveSlot")
            .field(&self.source().is_some())
            .finish()
    }
}

impl LiveSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<dyn LiveSource>>> {
        // A poisoned slot only means a thread panicked while setting it; its value stands.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The driver offers its source once the session runs.
    pub fn offer(&self, source: Arc<dyn LiveSource>) {
        *self.lock() = Some(source);
    }

    /// The driver withdraws it when the session ends.
    pub fn withdraw(&self) {
        *self.lock() = None;
    }

    /// The source, while the session runs.
    pub fn source(&self) -> Option<Arc<dyn LiveSource>> {
        self.lock().clone()
    }
}
