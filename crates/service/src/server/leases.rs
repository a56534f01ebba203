//! The open CDP leases, each its token's own: `GET /v1/leases` lists the caller's, and
//! `GET /v1/leases/{id}/live` watches one (the same WebSocket as a task's live view, frames only:
//! the lease's client drives its page). A lease is in the book from its upgrade until its
//! browser is gone; its id is also in the upgrade's `Airlock-Lease` header, for the client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, State};
use http::{Response, StatusCode};
use schemars::JsonSchema;
use serde::Serialize;

use super::App;
use super::callers::{json_response, refuse};
use super::lease_view::LeaseSource;
use crate::scope_request::Ceiling;

/// One open lease.
struct Lease {
    owner: String,
    started_unix_ms: u64,
    warm: bool,
    source: Arc<LeaseSource>,
}

/// The open leases, by id.
#[derive(Default)]
pub(super) struct LeaseBook {
    open: Mutex<HashMap<String, Lease>>,
}

/// A lease as its owner sees it.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct LeaseSeen {
    /// The lease's id (also the `Airlock-Lease` header of its upgrade).
    pub(super) id: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub(super) started_unix_ms: u64,
    /// Whether its browser came from the warm pool.
    pub(super) warm: bool,
    /// Where to watch it.
    pub(super) links: LeaseLinks,
}

/// Where a lease is watched.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct LeaseLinks {
    /// Its live view's WebSocket.
    pub(super) live: String,
    /// Its live page on the dashboard.
    pub(super) page: String,
}

/// `GET /v1/leases`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct LeaseList {
    /// The caller's open leases, oldest first.
    pub(super) leases: Vec<LeaseSeen>,
}

/// Keeps a lease in the book; dropping it takes the lease out.
pub(super) struct Listed {
    book: Arc<LeaseBook>,
    id: String,
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.book.lock().remove(&self.id);
    }
}

impl LeaseBook {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        // A panic while holding it leaves a map that is still whole.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Put a lease in the book until the returned guard is dropped.
    pub(super) fn list_lease(
        self: &Arc<Self>,
        id: &str,
        owner: &str,
        warm: bool,
        source: LeaseSource,
    ) -> Listed {
        let lease = Lease {
            owner: owner.to_owned(),
            started_unix_ms: crate::task_book::now_unix_ms(),
            warm,
            source: Arc::new(source),
        };
        self.lock().insert(id.to_owned(), lease);
        Listed {
            book: Arc::clone(self),
            id: id.to_owned(),
        }
    }

    /// `owner`'s open leases, oldest first.
    pub(super) fn of(&self, owner: &str) -> Vec<LeaseSeen> {
        let mut leases: Vec<LeaseSeen> = self
            .lock()
            .iter()
            .filter(|(_, lease)| lease.owner == owner)
            .map(|(id, lease)| LeaseSeen {
                id: id.clone(),
                started_unix_ms: lease.started_unix_ms,
                warm: lease.warm,
                links: LeaseLinks {
                    live: format!("/v1/leases/{id}/live"),
                    page: format!("/ui/leases/{id}"),
                },
            })
            .collect();
        leases.sort_by(|a, b| (a.started_unix_ms, &a.id).cmp(&(b.started_unix_ms, &b.id)));
        leases
    }

    /// Whether `owner` has the open lease `id`.
    pub(super) fn has(&self, owner: &str, id: &str) -> bool {
        self.source(owner, id).is_some()
    }

    fn source(&self, owner: &str, id: &str) -> Option<Arc<LeaseSource>> {
        let open = self.lock();
        let lease = open.get(id).filter(|lease| lease.owner == owner)?;
        Some(Arc::clone(&lease.source))
    }
}

/// `GET /v1/leases`.
pub(super) async fn list(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
) -> Response<Body> {
    let leases = LeaseList {
        leases: app.leases.of(&ceiling.context_owner),
    };
    json_response(StatusCode::OK, &leases)
}

/// `GET /v1/leases/{id}/live`.
pub(super) async fn watch(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response<Body> {
    let Some(source) = app.leases.source(&ceiling.context_owner, &id) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "no such open lease for this token: a lease is seen only with the token that opened it, and only while it is open",
        );
    };
    super::live::serve_watch(&app, source.as_ref(), None, upgrade).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_its_owners_alone_and_leaves_the_book_with_its_guard() {
        let book = Arc::new(LeaseBook::default());
        let (_, source) = super::super::lease_view::lease_view();
        let listed = book.list_lease("lease_1", "alice", true, source);
        assert!(book.has("alice", "lease_1"));
        assert!(!book.has("bob", "lease_1"), "another owner");
        assert!(book.source("bob", "lease_1").is_none());
        assert!(book.of("bob").is_empty());
        let seen = book.of("alice");
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].links.live, "/v1/leases/lease_1/live");
        assert!(seen[0].warm);
        drop(listed);
        assert!(!book.has("alice", "lease_1"));
        assert!(book.of("alice").is_empty());
    }
}
