//! `GET /v1/tasks/{id}/live`: a WebSocket that carries the task's page as it runs, one binary
//! message per frame (JPEG, the newest only: a slow viewer skips frames). Watching changes nothing
//! the task does. While the task waits for a person, the viewer may act on the page: each text
//! message must be one input event (`airlock_policy::HumanInput`: mouse, keyboard, touch), which
//! the guard re-writes and the task's help desk admits; at any other time an event is answered
//! with a refusal and goes nowhere. Anything else (another message type, a field the guard does
//! not know, a value out of range, over 1 KiB) closes the socket with a policy violation (1008).
//! For the task's own token only. A CDP lease's live view (`leases.rs`) is the same socket
//! without a help desk: its input events are always refused.

use std::sync::Arc;

use airlock_policy::{HumanInput, MAX_HUMAN_MESSAGE_BYTES};
use airlock_worker::{HelpDesk, LiveFeed, LiveSource};
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, State};
use http::{Response, StatusCode};

use super::App;
use super::callers::refuse;
use crate::scope_request::Ceiling;
use crate::task_book::TaskState;

/// `GET /v1/tasks/{id}/live`.
pub(super) async fn watch(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response<Body> {
    let Some((state, window)) = app.book.live(&ceiling.context_owner, &id) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "no such task for this token: a task is seen only with the token that started it, and only the last ones are kept",
        );
    };
    let running = matches!(state, TaskState::Running | TaskState::WaitingForHuman);
    let source = running.then(|| window.live.source()).flatten();
    let Some(source) = source else {
        return refuse(
            StatusCode::CONFLICT,
            "this task's browser is not running: its live view is there while it runs (its record stays afterwards)",
        );
    };
    serve_watch(&app, source.as_ref(), Some(window.help), upgrade).await
}

/// Open a watch of `source` and carry it over the upgraded socket; `desk` admits a helping
/// person's input (none: every input event is refused).
pub(super) async fn serve_watch(
    app: &App,
    source: &dyn LiveSource,
    desk: Option<HelpDesk>,
    upgrade: WebSocketUpgrade,
) -> Response<Body> {
    let feed = match source.watch().await {
        Ok(feed) => feed,
        Err(error) => {
            tracing::warn!(%error, "a live view could not start");
            return refuse(StatusCode::SERVICE_UNAVAILABLE, &error.to_string());
        }
    };
    let shutdown = app.shutdown.clone();
    upgrade
        .max_message_size(MAX_HUMAN_MESSAGE_BYTES)
        .on_upgrade(move |socket| async move {
            tokio::select! {
                () = send_frames(socket, feed, desk) => {}
                () = shutdown.cancelled() => {}
            }
        })
}

/// Send each newest frame until the feed ends (the task's browser is gone) or the viewer goes;
/// pass on the input events the desk admits.
async fn send_frames(mut socket: WebSocket, mut feed: LiveFeed, desk: Option<HelpDesk>) {
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
                Some(Ok(Message::Text(text))) => match HumanInput::parse(text.as_str()) {
                    Ok(input) => {
                        if let Some(notice) = pass_on(input, &feed, desk.as_ref())
                            && socket.send(Message::Text(notice.into())).await.is_err()
                        {
                            return;
                        }
                    }
                    Err(refusal) => {
                        let frame = CloseFrame {
                            code: close_code::POLICY,
                            reason: refusal.to_string().chars().take(120).collect::<String>().into(),
                        };
                        let _ = socket.send(Message::Close(Some(frame))).await;
                        return;
                    }
                },
                Some(Ok(Message::Binary(_))) => {
                    let frame = CloseFrame {
                        code: close_code::POLICY,
                        reason: "send input events as JSON text".into(),
                    };
                    let _ = socket.send(Message::Close(Some(frame))).await;
                    return;
                }
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}

/// Pass `input` to the page if the desk admits it (the task waits for a person); otherwise the
/// notice the viewer is sent.
fn pass_on(input: HumanInput, feed: &LiveFeed, desk: Option<&HelpDesk>) -> Option<&'static str> {
    let Some(desk) = desk else {
        return Some(
            r#"{"refused":"a CDP lease's live view takes no input: the lease's CDP client drives its page"}"#,
        );
    };
    if !desk.admit(&input) {
        return Some(
            r#"{"refused":"the task is not waiting for a person: input reaches its page only while it asks for help"}"#,
        );
    }
    match &feed.input {
        // Full: a burst (mouse moves) outran the stream; this event drops.
        Some(sender) => {
            let _ = sender.try_send(input);
            None
        }
        None => Some(r#"{"refused":"this live view takes no input"}"#),
    }
}
