//! One way to take a lock in this crate: a lock whose holder panicked is still taken. Every value
//! kept behind one here (pending events, answers awaited, ready sessions, failed removals) stays
//! valid whatever a panicking holder was doing, and a task's cleanup must not be lost to a poison.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock `mutex`, poisoned or not.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
