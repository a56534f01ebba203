//! Running one command in a task container: never through a shell, with stdin, a byte cap on the
//! output, and a time-out enforced inside the container too (a timed-out exec keeps running
//! otherwise).

use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::{ExecConfig, ExecInspectResponse};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

/// What a command printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExecOutput {
    /// Its exit code (`124` when the in-container time-out killed it).
    pub exit_code: i64,
    /// Standard output, up to the cap.
    pub stdout: Vec<u8>,
    /// Standard error, up to the cap.
    pub stderr: Vec<u8>,
    /// Bytes dropped past the cap.
    pub dropped: usize,
}

/// Why a command could not be run or finished.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Docker refused or failed the exec.
    #[error("docker exec failed: {0}")]
    Docker(#[from] bollard::errors::Error),
    /// Feeding stdin failed.
    #[error("writing the command's input failed: {0}")]
    Stdin(std::io::Error),
    /// The command outlived its time-out even on the host side.
    #[error("the command did not finish within {0:?}")]
    TimedOut(Duration),
    /// Docker started the exec detached although it was asked to attach: nothing can be read.
    #[error("docker started the command detached, so its output and exit code cannot be read")]
    Detached,
    /// The session's command runner ended while the command was in flight; it may have run.
    #[error(
        "the browser's command runner ended while the command ran ({0}), so whether it ran is unknown; check the page before repeating it"
    )]
    RunnerLost(String),
    /// The command was for the session's runner alone (its container may be frozen, and an exec
    /// must never start in a frozen container), and the runner had ended: nothing ran.
    #[error(
        "the browser's command runner had ended, and this command may not start an exec of its own; nothing ran"
    )]
    RunnerEnded,
    /// The command's output ended but Docker reports no exit code for it.
    #[error("docker reported no exit code for the command (still running: {running:?})")]
    NoExitCode {
        /// What Docker said about it still running.
        running: Option<bool>,
    },
}

/// Exit code `timeout(1)` reports when it stopped the command.
pub(crate) const TIMED_OUT_EXIT: i64 = 124;

/// Run `command` in `container`, bounded by `timeout` inside (via `timeout(1)`) and outside.
pub(crate) async fn run(
    docker: &Docker,
    container: &str,
    command: &[String],
    stdin: Option<&[u8]>,
    timeout: Duration,
    max_output: usize,
) -> Result<ExecOutput, ExecError> {
    let seconds = timeout.as_secs().max(1).to_string();
    // timeout(1) sends TERM at the limit and KILL two seconds later, inside the container.
    let mut cmd = vec!["timeout".to_owned(), "--kill-after=2".to_owned(), seconds];
    cmd.extend(command.iter().cloned());
    // The host waits a little longer than the container, so the in-container limit fires first.
    let host_limit = timeout + Duration::from_secs(5);
    match tokio::time::timeout(
        host_limit,
        execute(docker, container, cmd, stdin, max_output),
    )
    .await
    {
        Ok(result) => result,
        Err(_) => Err(ExecError::TimedOut(timeout)),
    }
}

async fn execute(
    docker: &Docker,
    container: &str,
    cmd: Vec<String>,
    stdin: Option<&[u8]>,
    max_output: usize,
) -> Result<ExecOutput, ExecError> {
    let (id, mut output, mut input) =
        attach(docker, container, cmd, stdin.is_some(), 64 * 1024).await?;
    if let Some(stdin) = stdin {
        input.write_all(stdin).await.map_err(ExecError::Stdin)?;
        input.shutdown().await.map_err(ExecError::Stdin)?;
    }
    drop(input);

    let mut result = ExecOutput::default();
    while let Some(chunk) = output.next().await {
        let room = max_output.saturating_sub(result.stdout.len() + result.stderr.len());
        let (target, bytes) = match chunk? {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                (&mut result.stdout, message)
            }
            LogOutput::StdErr { message } => (&mut result.stderr, message),
            LogOutput::StdIn { .. } => continue,
        };
        let kept = room.min(bytes.len());
        target.extend_from_slice(&bytes[..kept]);
        result.dropped += bytes.len() - kept;
    }
    // The output ends when the process does, but Docker may record the exit code a moment later.
    let mut inspect = docker.inspect_exec(&id).await?;
    for _ in 0..EXIT_CODE_POLLS {
        if inspect.exit_code.is_some() || inspect.running == Some(false) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        inspect = docker.inspect_exec(&id).await?;
    }
    result.exit_code = exit_code(&inspect)?;
    Ok(result)
}

/// Why a long-lived attached exec could not be started.
pub(crate) enum AttachFailure {
    /// Docker refused or failed to make or start it.
    Docker(bollard::errors::Error),
    /// Docker started it detached although it was asked to attach.
    Detached,
}

/// Start `cmd` in `container` with its stdout and stderr (and, if asked, stdin) attached: the
/// exec's id, its output stream and its input. Every exec goes through here: one command's
/// (`run`), and the long-lived ones (the command runner, a CDP browser).
pub(crate) async fn attach(
    docker: &Docker,
    container: &str,
    cmd: Vec<String>,
    with_stdin: bool,
    output_capacity: usize,
) -> Result<(String, AttachedOutput, AttachedInput), AttachFailure> {
    let config = ExecConfig {
        attach_stdin: Some(with_stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        cmd: Some(cmd),
        ..ExecConfig::default()
    };
    let exec = docker
        .create_exec(container, config)
        .await
        .map_err(AttachFailure::Docker)?;
    let options = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(output_capacity),
    };
    let started = docker
        .start_exec(&exec.id, Some(options))
        .await
        .map_err(AttachFailure::Docker)?;
    let (output, input) = attached(started)?;
    Ok((exec.id, output, input))
}

impl From<AttachFailure> for ExecError {
    fn from(failure: AttachFailure) -> Self {
        match failure {
            AttachFailure::Docker(error) => Self::Docker(error),
            AttachFailure::Detached => Self::Detached,
        }
    }
}

/// How often to ask again for an exit code Docker has not recorded yet (20 ms apart).
const EXIT_CODE_POLLS: usize = 50;

/// The streams of an attached exec; a detached answer is an error, never a silent success.
fn attached(results: StartExecResults) -> Result<(AttachedOutput, AttachedInput), AttachFailure> {
    match results {
        StartExecResults::Attached { output, input } => Ok((output, input)),
        StartExecResults::Detached => Err(AttachFailure::Detached),
    }
}

/// The exit code Docker reported; none at all is an error, never read as success.
fn exit_code(inspect: &ExecInspectResponse) -> Result<i64, ExecError> {
    inspect.exit_code.ok_or(ExecError::NoExitCode {
        running: inspect.running,
    })
}

/// An attached exec's output: its stdout and stderr as Docker frames them.
pub(crate) type AttachedOutput = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
>;
/// An attached exec's stdin.
pub(crate) type AttachedInput = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

#[cfg(test)]
mod tests {
    use super::*;

    // Docker cannot be made to answer these ways on purpose; the answers are built by hand.

    #[test]
    fn a_detached_answer_is_an_error() {
        assert!(matches!(
            attached(StartExecResults::Detached),
            Err(AttachFailure::Detached)
        ));
    }

    #[test]
    fn a_missing_exit_code_is_an_error_not_success() {
        let unknown = ExecInspectResponse {
            exit_code: None,
            running: Some(true),
            ..ExecInspectResponse::default()
        };
        assert!(matches!(
            exit_code(&unknown),
            Err(ExecError::NoExitCode {
                running: Some(true)
            })
        ));
        let failed = ExecInspectResponse {
            exit_code: Some(3),
            running: Some(false),
            ..ExecInspectResponse::default()
        };
        assert_eq!(exit_code(&failed).unwrap(), 3);
    }
}
