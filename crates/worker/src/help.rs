//! A human who can step in. A task's caller that can reach a person (serve, whose tasks have a
//! live view) gives the run a staffed [`HelpDesk`]; the worker is then offered `ask_human`, and a
//! call opens the desk with its reason. While it is open the person may act on the page through
//! the live view (input events only, counted here, never their text) and then hand back; the
//! task's time limit stands still meanwhile, bounded by its own human timeout. A desk nobody
//! staffs offers no tool.

use airlock_policy::{HumanAction, HumanInput};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;

use crate::ports::ToolDefinition;

/// The tool's name.
pub(crate) const ASK_HUMAN: &str = "ask_human";

/// The longest reason taken, in characters.
pub(crate) const MAX_HELP_REASON_CHARS: usize = 300;

const DESCRIPTION: &str = "Ask a person to act in your browser for you, for what you must not or \
cannot do yourself: a CAPTCHA, a second factor, a confirmation only the user may give. Say what \
you need in one short sentence. The task waits until the person hands back (or nobody comes in \
time); you then see the page as they left it. Use it only when you are stuck on such a step.";

/// The tool's input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskHumanInput {
    /// What the person should do, in one short sentence: "Solve the CAPTCHA", "Enter the code
    /// sent to the phone".
    pub(crate) reason: String,
}

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition::for_input::<AskHumanInput>(ASK_HUMAN, DESCRIPTION)
}

/// An open call for help, as the caller shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HelpCall {
    /// What the worker needs, in its words.
    pub reason: String,
    /// The step that asked.
    pub step: usize,
    /// How long the task waits for a person, in seconds.
    pub timeout_secs: u64,
}

/// What a person did while they had the page: counts, never what they typed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct HumanActions {
    /// Mouse button presses.
    pub clicks: u32,
    /// Keys pressed.
    pub keys: u32,
    /// Wheel turns.
    pub scrolls: u32,
    /// Touches begun.
    pub touches: u32,
}

impl HumanActions {
    fn count(&mut self, action: HumanAction) {
        let counter = match action {
            HumanAction::Click => &mut self.clicks,
            HumanAction::Key => &mut self.keys,
            HumanAction::Scroll => &mut self.scrolls,
            HumanAction::Touch => &mut self.touches,
            HumanAction::Other => return,
        };
        *counter = counter.saturating_add(1);
    }

    /// In words: "2 clicks, 5 keys".
    pub fn words(&self) -> String {
        let parts: Vec<String> = [
            (self.clicks, "click"),
            (self.keys, "key"),
            (self.scrolls, "scroll"),
            (self.touches, "touch"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| match (n, what) {
            (1, _) => format!("1 {what}"),
            (_, "touch") => format!("{n} touches"),
            _ => format!("{n} {what}s"),
        })
        .collect();
        if parts.is_empty() {
            "no input".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// Where a desk stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeskState {
    /// No call open.
    Closed,
    /// A call waits for a person.
    Open(HelpCall),
    /// The person handed back; the worker has not taken it yet.
    HandedBack,
}

impl DeskState {
    /// The call open, if any.
    pub fn open_call(&self) -> Option<&HelpCall> {
        match self {
            Self::Open(call) => Some(call),
            Self::Closed | Self::HandedBack => None,
        }
    }
}

struct Desk {
    staffed: bool,
    state: watch::Sender<DeskState>,
    actions: Mutex<HumanActions>,
}

/// Where a task asks a person for help; cheap to clone, shared by the run and its caller.
#[derive(Clone)]
pub struct HelpDesk(Arc<Desk>);

impl Default for HelpDesk {
    /// A desk nobody staffs: the worker is not offered `ask_human`.
    fn default() -> Self {
        Self::new(false)
    }
}

impl std::fmt::Debug for HelpDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelpDesk")
            .field("staffed", &self.0.staffed)
            .field("call", &self.call())
            .finish()
    }
}

/// Closes the call however the wait ends (handed back, timed out, cancelled, dropped).
struct CloseOnDrop<'a>(&'a Desk);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.state.send_replace(DeskState::Closed);
    }
}

impl HelpDesk {
    fn new(staffed: bool) -> Self {
        let (state, _) = watch::channel(DeskState::Closed);
        Self(Arc::new(Desk {
            staffed,
            state,
            actions: Mutex::default(),
        }))
    }

    /// A desk a person may answer: the worker is offered `ask_human`.
    pub fn staffed() -> Self {
        Self::new(true)
    }

    /// Whether a person may answer here.
    pub fn is_staffed(&self) -> bool {
        self.0.staffed
    }

    /// The longest a task may wait here in all: its human timeout, or nothing unstaffed.
    pub fn time_for_help(&self, limits: &crate::limits::TaskLimits) -> std::time::Duration {
        if self.0.staffed {
            limits.human_timeout
        } else {
            std::time::Duration::ZERO
        }
    }

    /// The call open now, if any.
    pub fn call(&self) -> Option<HelpCall> {
        self.0.state.borrow().open_call().cloned()
    }

    /// Wakes on every change of the desk (a call opened, handed back, closed). Test the state a
    /// `wait_for` is given, never `call()`, inside its closure (it holds the value's lock).
    pub fn changes(&self) -> watch::Receiver<DeskState> {
        self.0.state.subscribe()
    }

    /// Hand the page back to the worker; whether a call was open.
    pub fn hand_back(&self) -> bool {
        self.0.state.send_if_modified(|state| {
            if matches!(state, DeskState::Open(_)) {
                *state = DeskState::HandedBack;
                true
            } else {
                false
            }
        })
    }

    /// Whether `input` may reach the page now (only while a call is open), counting it if so.
    pub fn admit(&self, input: &HumanInput) -> bool {
        if self.call().is_none() {
            return false;
        }
        self.actions().count(input.action());
        true
    }

    fn actions(&self) -> std::sync::MutexGuard<'_, HumanActions> {
        // A poisoned counter only means a thread panicked while counting; the counts stand.
        self.0
            .actions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What a person did during the last call (or this one, while it is open).
    pub(crate) fn last_actions(&self) -> HumanActions {
        *self.actions()
    }

    /// Open `call` and wait until a person hands back; what they did. The caller bounds the
    /// wait (the human timeout, cancellation); the call closes however it ends.
    pub(crate) async fn ask(&self, call: HelpCall) -> HumanActions {
        *self.actions() = HumanActions::default();
        let mut changes = self.0.state.subscribe();
        self.0.state.send_replace(DeskState::Open(call));
        let _close = CloseOnDrop(&self.0);
        // The sender lives in `self`, so the wait ends only by a hand-back (or the caller).
        let _ = changes
            .wait_for(|state| matches!(state, DeskState::HandedBack))
            .await;
        *self.actions()
    }
}

/// How a call for help ended, as the record keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HelpOutcome {
    /// A person acted and handed back.
    HandedBack,
    /// Nobody handed back within the human timeout.
    NobodyCame,
    /// The task was cancelled while it waited (by the person, or its caller).
    Cancelled,
}

/// A call for help, in the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordedHelp {
    /// What the worker asked for.
    pub reason: String,
    /// How long the task waited.
    pub waited_ms: u64,
    /// How it ended.
    pub outcome: HelpOutcome,
    /// What the person did.
    pub actions: HumanActions,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn click() -> HumanInput {
        HumanInput::parse(
            r#"{"type":"input_mouse","eventType":"mousePressed","x":1,"y":1,"button":"left","clickCount":1}"#,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn input_passes_only_while_a_call_is_open_and_is_counted() {
        let desk = HelpDesk::staffed();
        assert!(!desk.admit(&click()), "no call is open");
        assert!(!desk.hand_back(), "nothing to hand back");
        let asking = {
            let desk = desk.clone();
            tokio::spawn(async move {
                desk.ask(HelpCall {
                    reason: "a CAPTCHA".into(),
                    step: 3,
                    timeout_secs: 60,
                })
                .await
            })
        };
        let mut changes = desk.changes();
        changes
            .wait_for(|state| state.open_call().is_some())
            .await
            .unwrap();
        assert_eq!(desk.call().unwrap().reason, "a CAPTCHA");
        assert!(desk.admit(&click()));
        assert!(desk.admit(&click()));
        assert!(desk.hand_back());
        let actions = asking.await.unwrap();
        assert_eq!(actions.clicks, 2);
        assert_eq!(actions.words(), "2 clicks");
        assert!(desk.call().is_none());
        assert!(!desk.admit(&click()), "the call is closed");
    }

    #[tokio::test]
    async fn a_wait_that_is_dropped_closes_the_call() {
        let desk = HelpDesk::staffed();
        let call = HelpCall {
            reason: "confirm".into(),
            step: 1,
            timeout_secs: 1,
        };
        let waited = tokio::time::timeout(Duration::from_millis(20), desk.ask(call)).await;
        assert!(waited.is_err());
        assert!(desk.call().is_none());
        assert!(!desk.hand_back());
    }
}
