//! A task's session state in and out of its browser: agent-browser's own `state load` and
//! `state save`, through a file on the container's tmpfs that only the runner's stdin and stdout
//! carry (nothing is written on the host, and no value is ever on a command line).

use std::time::Duration;

use airlock_worker::{MAX_STATE_BYTES, SessionState};

use crate::error::DockerError;
use crate::runner::Commands;

const STATE_IN: &str = "/tmp/airlock-state-in.json";
const STATE_OUT: &str = "/tmp/airlock-state-out.json";

/// Load `state` before the task's first command.
pub(crate) async fn load(
    commands: &Commands,
    state: &SessionState,
    timeout: Duration,
) -> Result<(), DockerError> {
    let failed = |why: String| DockerError::StateLoad { why };
    let json = serde_json::to_vec(state).map_err(|e| failed(e.to_string()))?;
    let write = format!("umask 077 && cat > {STATE_IN}");
    run(commands, &["sh", "-c", &write], Some(&json), timeout)
        .await
        .map_err(failed)?;
    let loaded = run(
        commands,
        &["agent-browser", "state", "load", STATE_IN],
        None,
        timeout,
    )
    .await;
    // The file held cookie values: it goes whether the load worked or not.
    let _ = run(commands, &["rm", "-f", STATE_IN], None, timeout).await;
    loaded.map(|_| ()).map_err(failed)
}

/// The browser's state now, or `None` (logged) if it cannot be read.
pub(crate) async fn save(commands: &Commands, timeout: Duration) -> Option<SessionState> {
    let saved = async {
        run(
            commands,
            &["agent-browser", "state", "save", STATE_OUT],
            None,
            timeout,
        )
        .await?;
        let json = run(commands, &["cat", STATE_OUT], None, timeout).await;
        let _ = run(commands, &["rm", "-f", STATE_OUT], None, timeout).await;
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

/// Run one command; its stdout, or why it failed (its stderr, never its stdin).
async fn run(
    commands: &Commands,
    command: &[&str],
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let command: Vec<String> = command.iter().map(|c| (*c).to_owned()).collect();
    let output = commands
        .run(&command, stdin, timeout, MAX_STATE_BYTES + 1)
        .await
        .map_err(|e| e.to_string())?;
    if output.exit_code == 0 {
        Ok(output.stdout)
    } else {
        let said = String::from_utf8_lossy(&output.stderr);
        let said = said.trim();
        Err(format!(
            "`{}` exited with {}: {}",
            command[..command.len().min(3)].join(" "),
            output.exit_code,
            said.chars().take(300).collect::<String>()
        ))
    }
}
