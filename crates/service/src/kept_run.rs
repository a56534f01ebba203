//! A task run that `serve` keeps: followed step by step in the [`TaskBook`] under its id,
//! recorded, and kept with its answer and record once done. `POST /v1/tasks` and MCP's
//! `browser_task` on `serve` both run this way; `airlock mcp` over stdio keeps nothing.

use std::sync::Arc;

use crate::task_book::TaskAnswer;
use airlock_worker::{
    CancellationToken, HelpDesk, Progress, ProgressSink, RunError, TaskRequest, TaskResult,
    TaskRunner,
};

use crate::task_book::TaskBook;

/// A task's place in the book: the book, and the task's id there.
pub struct Kept {
    pub(crate) book: Arc<TaskBook>,
    /// The task's id in the book.
    pub id: String,
}

impl Kept {
    /// Enter a task of `owner`, asked in the words `task`, in `book`.
    pub fn open(book: &Arc<TaskBook>, owner: &str, task: &str, cancel: &CancellationToken) -> Self {
        Self {
            book: Arc::clone(book),
            id: book.open(owner, task, cancel.clone()),
        }
    }
}

/// Run `request`, reporting each step to `progress` and, when `kept`, to the book. `settle`
/// sees the result before anything keeps it (to count it, save its state, drop what the caller
/// must not get). Returns the result and, when kept, the answer as the API gives it.
pub async fn run(
    runner: &TaskRunner,
    request: TaskRequest,
    cancel: CancellationToken,
    progress: Option<ProgressSink>,
    kept: Option<Kept>,
    settle: impl FnOnce(&mut TaskResult),
) -> Result<(TaskResult, Option<TaskAnswer>), RunError> {
    let Some(kept) = kept else {
        let mut result = runner.run_with_progress(request, cancel, progress).await?;
        settle(&mut result);
        return Ok((result, None));
    };
    kept.book.running(&kept.id);
    let book = Arc::clone(&kept.book);
    let id = kept.id.clone();
    let both: ProgressSink = Arc::new(move |step: Progress| {
        book.step(&id, &step);
        if let Some(sink) = &progress {
            sink(step);
        }
    });
    let window = kept.book.window(&kept.id);
    // The book follows the task's help desk while it runs (state `waiting_for_human`).
    let following = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(follow_help(
        Arc::clone(&kept.book),
        kept.id.clone(),
        window.help.clone(),
    )));
    let ran = runner
        .run_recorded(request, cancel, Some(both), &window)
        .await;
    drop(following);
    match ran {
        Ok((mut result, record)) => {
            settle(&mut result);
            let answer = kept.book.finished(&kept.id, &result, &record);
            Ok((result, Some(answer)))
        }
        Err(error) => {
            kept.book.done(&kept.id, Err(error.to_string()), None);
            Err(error)
        }
    }
}

/// Tell the book each time the task's call for help opens or closes.
async fn follow_help(book: Arc<TaskBook>, id: String, desk: HelpDesk) {
    let mut changes = desk.changes();
    loop {
        book.help(&id, desk.call());
        if changes.changed().await.is_err() {
            return;
        }
    }
}
