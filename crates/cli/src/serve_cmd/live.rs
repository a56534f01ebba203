//! `GET /v1/tasks/{id}/live`: a WebSocket that carries the task's page as it runs, one binary
//! message per frame (JPEG, the newest only: a slow viewer skips frames). Watching changes nothing
//! the task does, and the socket takes nothing from the viewer: anything it sends is read and
//! dropped, and a message over 1 KiB closes it. For the task's own token only.

use std::sync::Arc;

use airlock_worker::LiveFeed;
use axum::body::Body;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use http::{Response, StatusCode};

use super::App;
use super::guard::refuse;
use crate::scope_request::Ceiling;
use crate::task_book::TaskState;

/// The most a viewer may send in one message (it has nothing to say yet).
const MAX_VIEWER_MESSAGE_BYTES: usize = 1024;

/// `GET /v1/tasks/{id}/live`.
pub(super) async fn watch(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response<Body> {
    let Some((state, slot)) = app.book.live(&ceiling.context_owner, &id) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "no such task for this token: a task is seen only with the token that started it, and only the last ones are kept",
        );
    };
    let source = (state == TaskState::Running)
        .then(|| slot.source())
        .flatten();
    let Some(source) = source else {
        return refuse(
            StatusCode::CONFLICT,
            "this task's browser is not running: its live view is there while it runs (its record stays afterwards)",
        );
    };
    let feed = match source.watch().await {
        Ok(feed) => feed,
        Err(error) => {
            tracing::warn!(%error, "a live view could not start");
            return refuse(StatusCode::SERVICE_UNAVAILABLE, &error.to_string());
        }
    };
    let shutdown = app.shutdown.clone();
    upgrade
        .max_message_size(MAX_VIEWER_MESSAGE_BYTES)
        .on_upgrade(move |socket| async move {
            tokio::select! {
                () = send_frames(socket, feed) => {}
                () = shutdown.cancelled() => {}
            }
        })
}

/// Send each newest frame until the feed ends (the task's browser is gone) or the viewer goes.
async fn send_frames(mut socket: WebSocket, mut feed: LiveFeed) {
    loop {
        tokio::select! {
            changed = feed.frames.changed() => {
                if changed.is_err() {
                    break;
                }
                let frame = feed.frames.borrow_and_update().clone();
                if let Some(frame) = frame
                    && socket.send(Message::Binary(frame.jpeg.clone().into())).await.is_err()
                {
                    return;
                }
            }
            incoming = socket.recv() => match incoming {
                None | Some(Err(_) | Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
