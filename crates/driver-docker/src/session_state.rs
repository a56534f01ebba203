//! A task's session state in and out of its browser: agent-browser's own `state load` and
//! `state save`, through a file on the container's tmpfs that only the runner's stdin and stdout
//! carry (nothing is written on the host, and no value is ever on a command line).

use std::time::Duration;

use airlock_worker::{MAX_STATE_BYTES, SessionState};

use crate::error::DockerError;
use crate::runner::{Commands, DriverCommands};

const STATE_DIR: &str = "/tmp/airlock-state";
const STATE_IN: &str = "in.json";
const STATE_OUT: &str = "/tmp/airlock-state-out.json";

/// Load `state` before the task's first command.
pub(crate) async fn load(
    commands: &Commands,
    state: &SessionState,
    timeout: Duration,
) -> Result<(), DockerError> {
    let commands = DriverCommands { commands, timeout };
    let failed = |why: String| DockerError::StateLoad { why };
    let json = serde_json::to_vec(state).map_err(|e| failed(e.to_string()))?;
    commands
        .write_private(STATE_DIR, STATE_IN, &json)
        .await
        .map_err(failed)?;
    let path = format!("{STATE_DIR}/{STATE_IN}");
    let loaded = commands
        .agent_browser(&["state", "load", &path], None)
        .await;
    // The file held cookie values: it goes whether the load worked or not.
    let _ = commands.run(&words(&["rm", "-f", &path]), None).await;
    loaded.map(|_| ()).map_err(failed)
}

/// The browser's state now, or `None` (logged) if it cannot be read.
pub(crate) async fn save(commands: &Commands, timeout: Duration) -> Option<SessionState> {
    let commands = DriverCommands { commands, timeout };
    let saved = async {
        commands
            .agent_browser(&["state", "save", STATE_OUT], None)
            .await?;
        let json = commands
            .run_bytes(&words(&["cat", STATE_OUT]), None, MAX_STATE_BYTES + 1)
            .await;
        let _ = commands.run(&words(&["rm", "-f", STATE_OUT]), None).await;
        let json = json?;
        if json.len() > MAX_STATE_BYTES {
            return Err(format!(
                "the final state is over {MAX_STATE_BYTES} bytes; it is not returned"
            ));
        }
        serde_json::from_slice::<SessionState>(&json).map_err(|e| {
            format!(
                "agent-browser's state is not storageState JSON ({})",
                e.line()
            )
        })
    };
    match saved.await {
        Ok(state) => Some(state),
        Err(why) => {
            tracing::warn!(%why, "the task's final session state could not be saved");
            None
        }
    }
}

/// Every value the browser stores now that a page could show the worker: all its cookies, and
/// the current page's `localStorage` and `sessionStorage`. Quick reads that load nothing; a read
/// that fails (an error page has no storage) adds nothing.
pub(crate) async fn stored_values(commands: &DriverCommands<'_>) -> Vec<String> {
    let mut values = Vec::new();
    let read = |what: [&'static str; 3]| async move {
        let json = commands
            .run_bytes(
                &words(&["agent-browser", what[0], what[1], what[2]]),
                None,
                MAX_STATE_BYTES,
            )
            .await
            .ok()?;
        serde_json::from_slice::<serde_json::Value>(&json).ok()
    };
    if let Some(answer) = read(["cookies", "get", "--json"]).await {
        let cookies = answer["data"]["cookies"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        values.extend(
            cookies
                .iter()
                .filter_map(|cookie| cookie["value"].as_str().map(str::to_owned)),
        );
    }
    for storage in ["local", "session"] {
        if let Some(answer) = read(["storage", storage, "--json"]).await
            && let Some(entries) = answer["data"]["data"].as_object()
        {
            values.extend(
                entries
                    .values()
                    .filter_map(|v| v.as_str().map(str::to_owned)),
            );
        }
    }
    values
}

fn words(command: &[&str]) -> Vec<String> {
    command.iter().map(|c| (*c).to_owned()).collect()
}
