//! What the gate has already established, so that a later call need not ask dockerd again: the
//! containers it made (by the name the driver uses and by their id) and the execs it created.
//!
//! Both facts are fixed for the life of what they name: a container's labels and an exec's user
//! and privilege cannot change after creation, and ids are never reused. A name can come to mean
//! another container (removed, then another made under it), so a call that names a container is
//! always forwarded with the id the gate established instead: a name moved since then reaches a
//! container that no longer exists (404), never the other one.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// Most names and ids remembered; past it everything is forgotten at once, which costs only the
/// inspects the cache would have saved.
const MAX_REMEMBERED: usize = 4096;

/// The gate's memory of its own containers and execs.
#[derive(Debug, Default)]
pub(crate) struct Known {
    inner: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    /// A name or id the driver used → the container's full id.
    containers: HashMap<String, String>,
    /// Execs created through the gate in its containers.
    execs: HashSet<String>,
}

impl Known {
    /// The full id of a container this gate made, named by `reference` (a name or an id).
    pub(crate) fn container(&self, reference: &str) -> Option<String> {
        self.lock().containers.get(reference).cloned()
    }

    /// Container `id` was made through this gate (or checked to be); `reference` is how the
    /// client named it.
    pub(crate) fn remember_container(&self, reference: &str, id: &str) {
        let mut memory = self.lock();
        if memory.containers.len() + 2 > MAX_REMEMBERED {
            memory.containers.clear();
        }
        memory
            .containers
            .insert(reference.to_owned(), id.to_owned());
        memory.containers.insert(id.to_owned(), id.to_owned());
    }

    /// The container named by `reference` is gone: forget it under every name.
    pub(crate) fn forget_container(&self, reference: &str) {
        let mut memory = self.lock();
        if let Some(id) = memory.containers.remove(reference) {
            memory.containers.retain(|_, known| *known != id);
        }
    }

    /// Whether exec `id` was created through this gate (or checked to be).
    pub(crate) fn exec(&self, id: &str) -> bool {
        self.lock().execs.contains(id)
    }

    /// Exec `id` was created through this gate, in one of its containers, as judged.
    pub(crate) fn remember_exec(&self, id: &str) {
        let mut memory = self.lock();
        if memory.execs.len() >= MAX_REMEMBERED {
            memory.execs.clear();
        }
        memory.execs.insert(id.to_owned());
    }

    fn lock(&self) -> MutexGuard<'_, Memory> {
        // Every update leaves the maps whole, so one that panicked midway left nothing torn.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `target` (as the judgement wrote it: a version prefix, then `/containers/{reference}` and the
/// rest) with the container named by its id instead.
pub(crate) fn retarget(target: &str, reference: &str, id: &str) -> String {
    let named = format!("/containers/{reference}");
    if let Some(start) = target.find(&named) {
        let end = start + named.len();
        let whole_segment = matches!(target.as_bytes().get(end), None | Some(b'/' | b'?'));
        if whole_segment {
            return format!("{}/containers/{id}{}", &target[..start], &target[end..]);
        }
    }
    target.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_call_is_sent_to_the_id_and_only_the_whole_segment_is_replaced() {
        assert_eq!(
            retarget("/v1.41/containers/airlock-a/start", "airlock-a", "f00"),
            "/v1.41/containers/f00/start"
        );
        assert_eq!(
            retarget("/containers/airlock-a?force=true", "airlock-a", "f00"),
            "/containers/f00?force=true"
        );
        assert_eq!(
            retarget("/containers/airlock-a", "airlock-a", "f00"),
            "/containers/f00"
        );
        // A longer name that begins with the reference is not the reference.
        assert_eq!(
            retarget("/containers/airlock-ab/json", "airlock-a", "f00"),
            "/containers/airlock-ab/json"
        );
    }

    #[test]
    fn a_removed_container_is_forgotten_under_every_name_and_memory_is_bounded() {
        let known = Known::default();
        known.remember_container("airlock-a", "f00");
        assert_eq!(known.container("f00").as_deref(), Some("f00"));
        known.forget_container("f00");
        assert_eq!(known.container("airlock-a"), None);
        for n in 0..(MAX_REMEMBERED * 2) {
            known.remember_container(&format!("name-{n}"), &format!("id-{n}"));
            known.remember_exec(&format!("exec-{n}"));
        }
        let memory = known.lock();
        assert!(memory.containers.len() <= MAX_REMEMBERED);
        assert!(memory.execs.len() <= MAX_REMEMBERED);
    }
}
