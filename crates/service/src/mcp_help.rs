//! A `browser_task` on `serve` whose worker asks a person for help: the MCP client is told. A
//! client that takes elicitation gets a request with the reason and where to act (the task's
//! live view); accepting hands the page back, declining or cancelling ends the task. Any other
//! client gets a progress notification saying the same (if it asked for progress), and the task
//! waits for a hand-back over `/v1` or its human timeout.

use airlock_worker::{CancellationToken, HelpCall, HelpDesk};
use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequestParams, ElicitationAction, ElicitationSchema, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::{ElicitationMode, Peer, RequestContext};

use tokio_util::task::AbortOnDropHandle;

use crate::kept_run::Kept;

/// Forward the kept task's calls for help to the client that asked for it, until the handle is
/// dropped (when the call's task is over).
pub(crate) fn spawn(
    context: &RequestContext<RoleServer>,
    kept: &Kept,
    cancel: &CancellationToken,
) -> AbortOnDropHandle<()> {
    let forwarding = forward_calls(
        context.peer.clone(),
        kept.book.window(&kept.id).help,
        kept.id.clone(),
        context.meta.get_progress_token(),
        cancel.clone(),
    );
    AbortOnDropHandle::new(tokio::spawn(forwarding))
}

/// Tell `peer` of each call for help on `desk` (task `id`) until the task ends; `cancel` ends
/// the task.
async fn forward_calls(
    peer: Peer<RoleServer>,
    desk: HelpDesk,
    id: String,
    progress: Option<ProgressToken>,
    cancel: CancellationToken,
) {
    let elicits = peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form);
    let mut changes = desk.changes();
    loop {
        let call = match changes.wait_for(|state| state.open_call().is_some()).await {
            Ok(state) => state.open_call().cloned(),
            Err(_) => return,
        };
        let Some(call) = call else { continue };
        let message = message(&id, &call, elicits);
        if elicits {
            let asked = peer.create_elicitation(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: ElicitationSchema::new(std::collections::BTreeMap::new()),
            });
            tokio::select! {
                answer = asked => match answer.map(|answer| answer.action) {
                    Ok(ElicitationAction::Accept) => {
                        desk.hand_back();
                    }
                    Ok(_) => cancel.cancel(),
                    // The client could not answer: the call waits for /v1 or its timeout.
                    Err(error) => tracing::debug!(%error, "an elicitation was not answered"),
                },
                // Handed back elsewhere, or nobody came: the question is moot.
                _ = changes.wait_for(|state| state.open_call().is_none()) => {}
            }
        } else if let Some(token) = &progress {
            // Between the asking step's notification and the next step's: progress must grow.
            let mut param = ProgressNotificationParam::new(token.clone(), step_and_a_half(&call));
            param.message = Some(message);
            let _ = peer.notify_progress(param).await;
        }
        if changes
            .wait_for(|state| state.open_call().is_none())
            .await
            .is_err()
        {
            return;
        }
    }
}

fn step_and_a_half(call: &HelpCall) -> f64 {
    f64::from(u32::try_from(call.step).unwrap_or(u32::MAX)) + 0.5
}

/// What the person is told: why, where to act, and how to answer.
fn message(id: &str, call: &HelpCall, elicits: bool) -> String {
    let answer = if elicits {
        "then accept to hand the page back, or decline to end the task".to_owned()
    } else {
        format!("then POST /v1/tasks/{id}/hand-back (or DELETE /v1/tasks/{id} to end it)")
    };
    format!(
        "The browser task needs a person: {}. Open /ui/tasks/{id} on this server in a browser \
         (sign in there with this token) to watch its page and act on it, or use its live view \
         /v1/tasks/{id}/live (a WebSocket with this token: frames out, input events in); \
         {answer}. It waits {} seconds.",
        call.reason, call.timeout_secs
    )
}
