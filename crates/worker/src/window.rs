//! What a task's caller holds while it runs: its live view and its help desk, together (each
//! knows nothing of the other).

use crate::help::HelpDesk;
use crate::live::LiveSlot;

/// Where a task's live view is offered, and the desk where it may ask a person for help
/// (unstaffed by default: no `ask_human`).
#[derive(Clone, Debug, Default)]
pub struct TaskWindow {
    /// The live view.
    pub live: LiveSlot,
    /// The help desk.
    pub help: HelpDesk,
}
