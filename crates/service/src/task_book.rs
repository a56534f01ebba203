//! The tasks `serve` knows: each under an unguessable id, owned by the token that asked for it
//! (a token sees only its own), with its state, its steps so far, and, once done, its answer and
//! its flight record. Everything is bounded: a task's steps by its step limit, running and queued
//! tasks by admission, and finished ones to the last `keep` per token within `bytes` per token
//! (the oldest go first).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_worker::{
    CancellationToken, FlightRecord, HelpCall, HelpDesk, LiveSlot, Progress, TaskResult, TaskWindow,
};
use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::watch;

/// How a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for a slot.
    Queued,
    /// Its browser runs.
    Running,
    /// It asked a person for help and waits (its time stands still): `help` says why.
    WaitingForHuman,
    /// Over: `ended` says how (or `error` why it never ran).
    Done,
}

/// A finished task's record, as stored and served.
#[derive(Debug)]
pub struct StoredRecord {
    /// The record as JSON.
    pub json: Vec<u8>,
    /// The record as a page.
    pub html: Vec<u8>,
}

/// One step as `GET /v1/tasks/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StepSeen {
    /// Its number, from 1.
    pub step: usize,
    /// The step limit.
    pub max_steps: usize,
    /// What it does (`agent_browser open https://…`).
    pub summary: String,
}

/// A task as its owner sees it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The task's words, cut to [`MAX_TITLE_CHARS`] (for the dashboard).
    pub title: String,
    pub(crate) state: TaskState,
    pub(crate) created_unix_ms: u64,
    pub(crate) steps: Vec<StepSeen>,
    /// Its open call for help, while it waits for a person.
    pub help: Option<HelpCall>,
    /// The answer, once done (the same body `wait: true` answers with).
    pub answer: Option<Arc<TaskAnswer>>,
    /// Why it never ran, once done without running.
    pub error: Option<String>,
    /// Its flight record, once done.
    pub record: Option<Arc<StoredRecord>>,
}

struct Entry {
    owner: String,
    snapshot: Snapshot,
    cancel: CancellationToken,
    /// Bumped on every change; followers wake and read the snapshot.
    changed: watch::Sender<u64>,
    /// Where the driver offers the task's live view while it runs, and where it asks for help.
    window: TaskWindow,
    /// Bytes it holds once done (answer and record), counted against its owner's budget.
    bytes: usize,
}

#[derive(Default)]
struct Book {
    tasks: HashMap<String, Entry>,
    /// Each owner's finished tasks, oldest first.
    finished: HashMap<String, VecDeque<String>>,
}

/// The tasks of one server.
pub struct TaskBook {
    book: Mutex<Book>,
    keep: usize,
    bytes: usize,
}

impl std::fmt::Debug for TaskBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskBook")
            .field("keep", &self.keep)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl TaskBook {
    /// A book keeping `keep` (at least one) finished tasks per token within `bytes` per token
    /// (the newest is kept whatever its size).
    pub fn new(keep: usize, bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            book: Mutex::default(),
            keep: keep.max(1),
            bytes,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        // A poisoned book only means a thread panicked mid-update; its entries stay usable.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enter a new task of `owner`, queued, asked in the words `task`; its id.
    pub fn open(&self, owner: &str, task: &str, cancel: CancellationToken) -> String {
        let id = new_id("task");
        let (changed, _) = watch::channel(0);
        let entry = Entry {
            owner: owner.to_owned(),
            snapshot: Snapshot {
                title: title_of(task),
                state: TaskState::Queued,
                created_unix_ms: now_unix_ms(),
                steps: Vec::new(),
                help: None,
                answer: None,
                error: None,
                record: None,
            },
            cancel,
            changed,
            window: TaskWindow {
                live: LiveSlot::default(),
                help: HelpDesk::staffed(),
            },
            bytes: 0,
        };
        self.lock().tasks.insert(id.clone(), entry);
        id
    }

    fn update(&self, id: &str, change: impl FnOnce(&mut Snapshot)) {
        let mut book = self.lock();
        if let Some(entry) = book.tasks.get_mut(id) {
            change(&mut entry.snapshot);
            entry.changed.send_modify(|version| *version += 1);
        }
    }

    /// The task has a slot and runs.
    pub fn running(&self, id: &str) {
        self.update(id, |snapshot| snapshot.state = TaskState::Running);
    }

    /// The task's call for help opened (`Some`) or closed (`None`).
    pub fn help(&self, id: &str, call: Option<HelpCall>) {
        self.update(id, |snapshot| {
            if snapshot.state == TaskState::Done {
                return;
            }
            snapshot.state = if call.is_some() {
                TaskState::WaitingForHuman
            } else {
                TaskState::Running
            };
            snapshot.help = call;
        });
    }

    /// One more step (bounded by the task's step limit, which the runner holds to).
    pub fn step(&self, id: &str, progress: &Progress) {
        self.update(id, |snapshot| {
            if snapshot.steps.len() < progress.max_steps {
                snapshot.steps.push(StepSeen {
                    step: progress.step,
                    max_steps: progress.max_steps,
                    summary: progress.summary.clone(),
                });
            }
        });
    }

    /// The task is over: keep its answer (or why it never ran) and record, and let the oldest of
    /// its owner's finished tasks go past the bounds.
    pub fn done(&self, id: &str, answer: Result<TaskAnswer, String>, record: Option<StoredRecord>) {
        let bytes = answer.as_ref().map_or(0, |answer| {
            serde_json::to_vec(answer).map_or(0, |json| json.len())
        }) + record
            .as_ref()
            .map_or(0, |record| record.json.len() + record.html.len());
        let mut book = self.lock();
        let Some(entry) = book.tasks.get_mut(id) else {
            return;
        };
        let snapshot = &mut entry.snapshot;
        snapshot.state = TaskState::Done;
        snapshot.help = None;
        match answer {
            Ok(answer) => snapshot.answer = Some(Arc::new(answer)),
            Err(error) => snapshot.error = Some(error),
        }
        snapshot.record = record.map(Arc::new);
        entry.bytes = bytes;
        entry.changed.send_modify(|version| *version += 1);
        let owner = entry.owner.clone();
        book.finished
            .entry(owner.clone())
            .or_default()
            .push_back(id.to_owned());
        self.evict(&mut book, &owner);
    }

    /// The task ran: keep its answer (as the API answers it, with its id and links) and its
    /// record (JSON and page); the answer.
    pub fn finished(&self, id: &str, result: &TaskResult, record: &FlightRecord) -> TaskAnswer {
        let answer = TaskAnswer {
            id: id.to_owned(),
            links: TaskLinks::of(id),
            result: result.clone(),
        };
        let stored = StoredRecord {
            html: crate::record_page::render(record).into_bytes(),
            json: serde_json::to_vec(record).unwrap_or_default(),
        };
        self.done(id, Ok(answer.clone()), Some(stored));
        answer
    }

    /// Past `keep` finished tasks or `bytes` for `owner`, the oldest go.
    fn evict(&self, book: &mut Book, owner: &str) {
        loop {
            let Some(finished) = book.finished.get(owner) else {
                return;
            };
            let held: usize = finished
                .iter()
                .filter_map(|id| book.tasks.get(id))
                .map(|entry| entry.bytes)
                .sum();
            if finished.len() <= self.keep && (held <= self.bytes || finished.len() <= 1) {
                return;
            }
            let oldest = book.finished.get_mut(owner).and_then(VecDeque::pop_front);
            if let Some(oldest) = oldest {
                book.tasks.remove(&oldest);
            }
        }
    }

    /// The task `id` as `owner` sees it: `None` when there is none, or it is another's (the two
    /// are not told apart).
    pub fn get(&self, owner: &str, id: &str) -> Option<Snapshot> {
        let book = self.lock();
        let entry = book.tasks.get(id).filter(|entry| entry.owner == owner)?;
        Some(entry.snapshot.clone())
    }

    /// Every task `owner` has (running, queued and the finished ones kept), newest first.
    pub fn list(&self, owner: &str) -> Vec<(String, Snapshot)> {
        let book = self.lock();
        let mut tasks: Vec<(String, Snapshot)> = book
            .tasks
            .iter()
            .filter(|(_, entry)| entry.owner == owner)
            .map(|(id, entry)| (id.clone(), entry.snapshot.clone()))
            .collect();
        tasks.sort_by_key(|(_, task)| std::cmp::Reverse(task.created_unix_ms));
        tasks
    }

    /// Where the task's live view is offered and its help desk (for its run).
    pub fn window(&self, id: &str) -> TaskWindow {
        let book = self.lock();
        book.tasks
            .get(id)
            .map(|entry| entry.window.clone())
            .unwrap_or_default()
    }

    /// The task's state, where its live view is offered and its help desk, for `owner`.
    pub fn live(&self, owner: &str, id: &str) -> Option<(TaskState, TaskWindow)> {
        let book = self.lock();
        let entry = book.tasks.get(id).filter(|entry| entry.owner == owner)?;
        Some((entry.snapshot.state, entry.window.clone()))
    }

    /// Follow the task: a receiver that wakes on every change.
    pub fn follow(&self, owner: &str, id: &str) -> Option<watch::Receiver<u64>> {
        let book = self.lock();
        let entry = book.tasks.get(id).filter(|entry| entry.owner == owner)?;
        Some(entry.changed.subscribe())
    }

    /// Cancel the task (a finished one stays as it ended); whether `owner` has it.
    pub fn cancel(&self, owner: &str, id: &str) -> bool {
        let book = self.lock();
        match book.tasks.get(id).filter(|entry| entry.owner == owner) {
            Some(entry) => {
                entry.cancel.cancel();
                true
            }
            None => false,
        }
    }
}

/// Where a task is followed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskLinks {
    /// Its state and steps: `GET` (and `DELETE` to cancel it).
    #[serde(rename = "self")]
    this: String,
    /// Its progress as Server-Sent Events.
    events: String,
    /// Its page as it runs: a WebSocket of JPEG frames, while it runs; while it waits for a
    /// person, it also takes their input events.
    live: String,
    /// Hand the page back to the worker after helping: `POST`, while it waits for a person.
    hand_back: String,
    /// Its page on the dashboard, for a person in a browser (signed in with the same token):
    /// the live view, the call for help, hand-back and cancel.
    page: String,
    /// Its flight record as JSON, once done.
    pub record: String,
    /// Its flight record as a page, once done.
    pub record_html: String,
}

impl TaskLinks {
    pub(crate) fn of(id: &str) -> Self {
        Self {
            this: format!("/v1/tasks/{id}"),
            events: format!("/v1/tasks/{id}/events"),
            live: format!("/v1/tasks/{id}/live"),
            hand_back: format!("/v1/tasks/{id}/hand-back"),
            page: format!("/ui/tasks/{id}"),
            record: format!("/v1/tasks/{id}/record"),
            record_html: format!("/v1/tasks/{id}/record.html"),
        }
    }
}

/// A task's result as the API answers it (`POST /v1/tasks`, `GET /v1/tasks/{id}`): the worker's
/// result with its screenshots inline, and the task's id and links.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskAnswer {
    /// The task's id.
    pub id: String,
    /// Where it is followed.
    pub links: TaskLinks,
    /// What it returned.
    #[serde(flatten)]
    pub result: TaskResult,
}

/// The most of a task's words the book keeps to show it.
pub const MAX_TITLE_CHARS: usize = 200;

fn title_of(task: &str) -> String {
    let task = task.trim();
    match task.char_indices().nth(MAX_TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &task[..cut]),
        None => task.to_owned(),
    }
}

/// `prefix_`, this replica's tag (`crate::replica`, so a balancer can route by the id) and 96
/// random bits from the OS: an id nobody can guess or count up to.
pub fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(&crate::replica::tag());
    // A failing OS random source would make every id the same; a time-and-counter fallback
    // keeps them distinct, and the owner check still keeps them private.
    if getrandom::fill(&mut bytes[4..]).is_err() {
        static FALLBACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let count = FALLBACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[4..12].copy_from_slice(&now_unix_ms().to_le_bytes());
        bytes[12..].copy_from_slice(&count.to_le_bytes()[..4]);
    }
    format!("{prefix}_{}", hex::encode(bytes))
}

pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_begins_with_the_replicas_tag() {
        let tag = crate::replica::tag_hex();
        assert_eq!(tag.len(), 8);
        for prefix in ["task", "lease"] {
            let id = new_id(prefix);
            assert_eq!(id.len(), prefix.len() + 1 + 32, "{id}");
            assert!(id.starts_with(&format!("{prefix}_{tag}")), "{id}");
        }
        assert_ne!(new_id("task"), new_id("task"), "the rest is random");
    }

    fn finished(book: &TaskBook, owner: &str, bytes: usize) -> String {
        let id = book.open(owner, "a task", CancellationToken::new());
        let record = StoredRecord {
            json: vec![b'x'; bytes],
            html: Vec::new(),
        };
        book.done(&id, Err("never ran".into()), Some(record));
        id
    }

    #[test]
    fn a_token_sees_only_its_own_tasks() {
        let book = TaskBook::new(4, 1 << 20);
        let id = book.open("alice", "a task", CancellationToken::new());
        assert!(book.get("alice", &id).is_some());
        assert!(book.get("bob", &id).is_none());
        assert!(book.follow("bob", &id).is_none());
        assert!(!book.cancel("bob", &id));
        assert!(book.cancel("alice", &id));
        assert!(book.get("alice", "task_0").is_none());
        assert_eq!(book.list("alice").len(), 1);
        assert!(book.list("bob").is_empty(), "the dashboard's list too");
    }

    #[test]
    fn a_tasks_words_are_kept_short_for_the_dashboard() {
        let book = TaskBook::new(4, 1 << 20);
        let long = "é".repeat(MAX_TITLE_CHARS + 5);
        let id = book.open("o", &format!("  {long} "), CancellationToken::new());
        let title = book.get("o", &id).unwrap().title;
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS + 1, "{title}");
        assert!(title.ends_with('…'));
        let newer = book.open("o", "newer", CancellationToken::new());
        // Created in the same millisecond or later: the newest is never listed after the older.
        let listed: Vec<String> = book.list("o").into_iter().map(|(id, _)| id).collect();
        assert!(listed.contains(&newer) && listed.contains(&id));
    }

    #[test]
    fn finished_tasks_are_kept_to_the_count_and_the_bytes_per_token() {
        let book = TaskBook::new(2, 1000);
        let first = finished(&book, "alice", 10);
        let second = finished(&book, "alice", 10);
        let bobs = finished(&book, "bob", 10);
        let third = finished(&book, "alice", 10);
        assert!(book.get("alice", &first).is_none(), "past the count");
        assert!(book.get("alice", &second).is_some() && book.get("alice", &third).is_some());
        assert!(
            book.get("bob", &bobs).is_some(),
            "another token's are its own"
        );
        let big = finished(&book, "alice", 995);
        assert!(book.get("alice", &third).is_none(), "past the bytes");
        assert!(book.get("alice", &big).is_some(), "the newest stays");
    }

    #[test]
    fn ids_are_distinct_and_unguessable_in_form() {
        let book = TaskBook::new(1, 1);
        let a = book.open("o", "a task", CancellationToken::new());
        let b = book.open("o", "a task", CancellationToken::new());
        assert_ne!(a, b);
        assert_eq!(a.len(), "task_".len() + 32);
    }

    #[test]
    fn steps_stop_at_the_step_limit() {
        let book = TaskBook::new(1, 1);
        let id = book.open("o", "a task", CancellationToken::new());
        for step in 1..=5 {
            book.step(
                &id,
                &Progress {
                    step,
                    max_steps: 3,
                    summary: "x".into(),
                },
            );
        }
        assert_eq!(book.get("o", &id).unwrap().steps.len(), 3);
    }
}
