//! `airlock task --live`: the task runs followed in a book of its own, so its live page (the
//! dashboard's, on a loopback port of its own) shows its frames, steps and state, and a person at
//! this machine can help when the worker asks: the call is printed, the task waits on the page.

use std::sync::Arc;

use airlock_worker::{CancellationToken, ProgressSink, TaskRequest, TaskResult, TaskRunner};

use airlock_service::Browsers;
use airlock_service::contexts::LOCAL_OWNER;
use airlock_service::kept_run::Kept;
use airlock_service::server::watch_locally;
use airlock_service::task_book::TaskBook;

use crate::settings::Settings;

/// A finished task's record as files: its JSON and its page.
pub(crate) struct RecordFiles {
    pub(crate) json: Vec<u8>,
    pub(crate) html: Vec<u8>,
}

/// Run `request` with its live page served; the result and the record.
pub(crate) async fn run(
    runner: &TaskRunner,
    request: TaskRequest,
    cancel: CancellationToken,
    (browsers, settings): (Arc<dyn Browsers>, &Settings),
    progress: ProgressSink,
) -> anyhow::Result<(TaskResult, Option<RecordFiles>)> {
    // One task, kept whatever its size until the command ends.
    let book = TaskBook::new(1, usize::MAX);
    let kept = Kept::open(&book, LOCAL_OWNER, &request.task, &cancel);
    let id = kept.id.clone();
    let watch = watch_locally(Arc::clone(&book), &id, browsers, &settings.for_tasks()).await?;
    eprintln!(
        "watch the task at {} (open it once, in a browser on this machine; if the worker asks for a person, help it there)",
        watch.link
    );
    let _told = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(tell_calls_for_help(
        book.window(&id).help,
    )));
    let (result, _) =
        airlock_service::kept_run::run(runner, request, cancel, Some(progress), Some(kept), |_| {})
            .await?;
    let record = book
        .get(LOCAL_OWNER, &id)
        .and_then(|task| task.record)
        .map(|record| RecordFiles {
            // As `--record` writes it without `--live`: indented.
            json: serde_json::from_slice::<serde_json::Value>(&record.json)
                .and_then(|value| serde_json::to_vec_pretty(&value))
                .unwrap_or_else(|_| record.json.clone()),
            html: record.html.clone(),
        });
    Ok((result, record))
}

/// Print each call for help as it opens: the person is at this terminal.
async fn tell_calls_for_help(desk: airlock_worker::HelpDesk) {
    let mut changes = desk.changes();
    while changes.changed().await.is_ok() {
        let call = changes.borrow_and_update().open_call().cloned();
        if let Some(call) = call {
            eprintln!(
                "the worker asks for a person: {}. Help on the task's page (the link above), then hand back there; it waits up to {} s",
                call.reason, call.timeout_secs
            );
        }
    }
}
