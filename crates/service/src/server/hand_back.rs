//! `POST /v1/tasks/{id}/hand-back`: a person who helped a task that asked for it hands the page
//! back to the worker, which resumes with a fresh look at it. For the task's own token only.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use http::{Response, StatusCode};

use super::App;
use super::callers::{json_response, refuse};
use super::task_by_id::{TaskStatus, not_found};
use crate::scope_request::Ceiling;

/// `POST /v1/tasks/{id}/hand-back`: `200` with the task as it stands, `409` when it is not
/// waiting for a person.
pub(super) async fn hand_back(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
) -> Response<Body> {
    let owner = &ceiling.context_owner;
    let Some((_, window)) = app.book.live(owner, &id) else {
        return not_found();
    };
    if !window.help.hand_back() {
        return refuse(
            StatusCode::CONFLICT,
            "this task is not waiting for a person: hand back only while its state is waiting_for_human",
        );
    }
    // The book hears of the closed call from the desk; answer with what it will show.
    app.book.help(&id, None);
    match app.book.get(owner, &id) {
        Some(snapshot) => json_response(StatusCode::OK, &TaskStatus::of(&id, &snapshot)),
        None => not_found(),
    }
}
