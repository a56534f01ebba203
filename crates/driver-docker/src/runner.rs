//! A session's commands, run by `airlock-runner` over one long-lived exec instead of an exec each.
//!
//! An exec makes dockerd, containerd and runc set up a process in the container each time, several
//! times the cost of the command itself (agent-browser's CLI asking its daemon). So each session starts `airlock-runner` once, by one attached
//! `docker exec -i`, and sends it one frame per command (see the `airlock-runner` crate). Commands
//! are told apart by id, so one that the task gave up on (cancelled, timed out on the host) cannot
//! be mistaken for the next one's answer.
//!
//! When the runner has ended (killed, or the stream broke), later commands go back to an exec
//! each: slower, never wrong. A command that was in flight when it ended is not run again, because
//! it may have run (a click must not happen twice); the task is told its outcome is unknown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::{UrlTarget, parse_http_url};
use airlock_runner::{Request, Response, frame_body_within, response_limit};
use base64::Engine;
use bollard::Docker;
use bollard::container::LogOutput;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;

use crate::DockerError;
use crate::exec::{self, ExecError, ExecOutput};
use crate::sync::lock;

/// Where the image keeps the runner.
const RUNNER_PATH: &str = "/usr/local/bin/airlock-runner";
/// How much longer than the command's own limit the host waits for its answer, so the limit
/// inside (`timeout(1)`, then its KILL two seconds later) always fires first.
const HOST_GRACE: Duration = Duration::from_secs(5);

/// Answers awaited, and whether the runner can still give any.
#[derive(Default)]
struct Waiting {
    answers: HashMap<u64, oneshot::Sender<Response>>,
    /// The largest output any request sent so far asked for: no honest answer is longer than
    /// that plus the response's fields, and the container is not trusted to be honest.
    largest_asked: u64,
    /// Why the runner ended, once it has.
    ended: Option<String>,
}

/// One session's runner: its stdin, and a task that routes its answers by id.
pub(crate) struct Runner {
    input: tokio::sync::Mutex<exec::AttachedInput>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Runner {
    fn drop(&mut self) {
        // The exec itself ends with the container (or when its stdin closes, which dropping the
        // input does); the routing task must not outlive the session.
        self.reader.abort();
    }
}

/// Removes an answer that is no longer awaited (the caller gave up or was cancelled).
struct Awaiting<'a> {
    waiting: &'a Mutex<Waiting>,
    id: u64,
}

impl Drop for Awaiting<'_> {
    fn drop(&mut self) {
        lock(self.waiting).answers.remove(&self.id);
    }
}

/// Why the runner did not answer.
enum RunnerError {
    /// It had ended before the command was sent: nothing ran.
    Ended,
    /// It ended after the command was sent: the command may have run.
    Lost(String),
    /// No answer within the limit.
    TimedOut(Duration),
}

impl Runner {
    /// Start `airlock-runner` in `container`.
    pub(crate) async fn launch(docker: &Docker, container: &str) -> Result<Self, DockerError> {
        let (_, output, input) = exec::attach(
            docker,
            container,
            vec![RUNNER_PATH.to_owned()],
            true,
            256 * 1024,
        )
        .await
        .map_err(|failure| match failure {
            exec::AttachFailure::Docker(error) => DockerError::RunnerExec(error),
            exec::AttachFailure::Detached => DockerError::RunnerDetached,
        })?;
        let waiting: Arc<Mutex<Waiting>> = Arc::default();
        let reader = tokio::spawn(route_answers(output, Arc::clone(&waiting)));
        Ok(Self {
            input: tokio::sync::Mutex::new(input),
            waiting,
            next_id: AtomicU64::new(1),
            reader,
        })
    }

    async fn run(
        &self,
        command: &[String],
        stdin: Option<&[u8]>,
        timeout: Duration,
        max_output: usize,
    ) -> Result<ExecOutput, RunnerError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, answer) = oneshot::channel();
        {
            let mut waiting = lock(&self.waiting);
            if waiting.ended.is_some() {
                return Err(RunnerError::Ended);
            }
            waiting.answers.insert(id, sender);
            waiting.largest_asked = waiting.largest_asked.max(max_output as u64);
        }
        let _awaiting = Awaiting {
            waiting: &self.waiting,
            id,
        };
        let frame = Request {
            id,
            timeout_secs: u32::try_from(timeout.as_secs().max(1)).unwrap_or(u32::MAX),
            max_output: max_output as u64,
            argv: command.to_vec(),
            stdin: stdin.map(<[u8]>::to_vec),
        }
        .encode();
        let sent = async {
            let mut input = self.input.lock().await;
            input.write_all(&frame).await?;
            input.flush().await
        };
        let answered = async {
            sent.await
                .map_err(|error| RunnerError::Lost(format!("writing to it failed: {error}")))?;
            answer.await.map_err(|_| {
                RunnerError::Lost(
                    lock(&self.waiting)
                        .ended
                        .clone()
                        .unwrap_or_else(|| "it stopped answering".to_owned()),
                )
            })
        };
        let response = tokio::time::timeout(timeout + HOST_GRACE, answered)
            .await
            .map_err(|_| RunnerError::TimedOut(timeout))??;
        Ok(bounded(response, max_output))
    }
}

/// The runner's answer as an exec's output, held to the cap again: the container is not trusted
/// to have kept to it.
fn bounded(mut response: Response, max_output: usize) -> ExecOutput {
    let stdout_kept = response.stdout.len().min(max_output);
    let stderr_kept = response.stderr.len().min(max_output - stdout_kept);
    let cut = response.stdout.len() - stdout_kept + response.stderr.len() - stderr_kept;
    response.stdout.truncate(stdout_kept);
    response.stderr.truncate(stderr_kept);
    ExecOutput {
        exit_code: response.exit_code,
        dropped: usize::try_from(response.dropped)
            .unwrap_or(usize::MAX)
            .saturating_add(cut),
        stdout: response.stdout,
        stderr: response.stderr,
    }
}

/// Read the runner's stdout, hand each answer to whoever waits for its id, and when the stream
/// ends (or says something that is not a frame) record why and fail everyone still waiting.
async fn route_answers(mut output: exec::AttachedOutput, waiting: Arc<Mutex<Waiting>>) {
    let mut buffer: Vec<u8> = Vec::new();
    let why = loop {
        match output.next().await {
            Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message })) => {
                buffer.extend_from_slice(&message);
                if let Err(why) = deliver(&mut buffer, &waiting) {
                    break why;
                }
            }
            Some(Ok(LogOutput::StdErr { message })) => {
                tracing::debug!(said = %String::from_utf8_lossy(&message).trim(), "airlock-runner");
            }
            Some(Ok(LogOutput::StdIn { .. })) => {}
            Some(Err(error)) => break format!("its stream failed: {error}"),
            None => break "it exited".to_owned(),
        }
    };
    tracing::debug!(%why, "the command runner ended; later commands use an exec each");
    let mut waiting = lock(&waiting);
    waiting.ended = Some(why);
    // Dropping the senders tells every waiting command its runner is gone.
    waiting.answers.clear();
}

/// Hand over every whole answer at the front of `buffer`.
fn deliver(buffer: &mut Vec<u8>, waiting: &Mutex<Waiting>) -> Result<(), String> {
    loop {
        let limit = response_limit(lock(waiting).largest_asked);
        let body = match frame_body_within(buffer, limit) {
            Ok(Some(body)) => body,
            Ok(None) => return Ok(()),
            Err(error) => return Err(format!("it sent something unreadable: {error}")),
        };
        let consumed = 4 + body.len();
        let response =
            Response::decode(body).map_err(|error| format!("it sent a bad answer: {error}"))?;
        // An answer nobody waits for any more (a cancelled command) is dropped.
        if let Some(sender) = lock(waiting).answers.remove(&response.id) {
            let _ = sender.send(response);
        }
        buffer.drain(..consumed);
    }
}

/// How a session runs its commands: through its runner while it lives, else an exec each.
#[derive(Clone)]
pub(crate) struct Commands {
    docker: Docker,
    container: String,
    runner: Option<Arc<Runner>>,
    /// Whether a command may fall back to an exec of its own once the runner has ended.
    exec_fallback: bool,
}

impl Commands {
    /// Commands for `container`, through `runner` when there is one.
    pub(crate) fn new(docker: Docker, container: String, runner: Option<Arc<Runner>>) -> Self {
        Self {
            docker,
            container,
            runner,
            exec_fallback: true,
        }
    }

    /// The same commands, through the runner only: one sent after it has ended fails with
    /// [`ExecError::RunnerEnded`] instead of starting an exec. For steps during which the container
    /// may be frozen: an exec starting in a frozen container never finishes starting, and Docker
    /// 20.10 then holds that container's lock for good (unpause and removal hang with it).
    pub(crate) fn runner_only(&self) -> Self {
        Self {
            exec_fallback: false,
            ..self.clone()
        }
    }

    /// Run `command` (no shell), bounded by `timeout` inside the container and on the host.
    pub(crate) async fn run(
        &self,
        command: &[String],
        stdin: Option<&[u8]>,
        timeout: Duration,
        max_output: usize,
    ) -> Result<ExecOutput, ExecError> {
        if let Some(runner) = &self.runner {
            match runner.run(command, stdin, timeout, max_output).await {
                Ok(output) => return Ok(output),
                Err(RunnerError::TimedOut(limit)) => return Err(ExecError::TimedOut(limit)),
                Err(RunnerError::Lost(why)) => return Err(ExecError::RunnerLost(why)),
                Err(RunnerError::Ended) => {}
            }
        }
        if !self.exec_fallback {
            return Err(ExecError::RunnerEnded);
        }
        exec::run(
            &self.docker,
            &self.container,
            command,
            stdin,
            timeout,
            max_output,
        )
        .await
    }
}

/// What `agent-browser get url` printed: the address (its first line, unquoted), and where it
/// points if it is an http(s) page.
pub(crate) fn page_target(printed: &str) -> (String, Option<UrlTarget>) {
    let address = printed_value(printed).to_owned();
    let target = parse_http_url(&address).ok();
    (address, target)
}

/// The value an agent-browser `get` command printed: its first line, without quotes.
pub(crate) fn printed_value(printed: &str) -> &str {
    printed
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .trim_matches('"')
}

/// A session's commands with the time each may take, for the driver's own steps.
pub(crate) struct DriverCommands<'a> {
    pub(crate) commands: &'a Commands,
    pub(crate) timeout: Duration,
}

impl DriverCommands<'_> {
    /// Run one agent-browser command: its stdout, or its output as the error when it fails.
    pub(crate) async fn agent_browser(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<String, String> {
        let mut command = vec!["agent-browser".to_owned()];
        command.extend(args.iter().map(|a| (*a).to_owned()));
        self.run(&command, stdin).await
    }

    /// The page the browser is on: the address as agent-browser printed it, and where it points
    /// if it is an http(s) page (`None` for `about:blank`, an error page, …).
    pub(crate) async fn page(&self) -> Result<(String, Option<UrlTarget>), String> {
        let printed = self.agent_browser(&["get", "url"], None).await?;
        Ok(page_target(&printed))
    }

    /// Write `bytes` to `dir/name` in the container, owner-only, through the runner's stdin
    /// (never a command line). `dir` and `name` are arguments to the shell, not code.
    pub(crate) async fn write_private(
        &self,
        dir: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<(), String> {
        let script = "umask 077 && mkdir -p \"$1\" && cat > \"$1/$2\"";
        let command = ["sh", "-c", script, "sh", dir, name].map(str::to_owned);
        self.run(&command, Some(bytes)).await.map(|_| ())
    }

    /// Read a file of at most `max_bytes` from the container. tmpfs files cannot be fetched with
    /// Docker's archive API; base64 keeps the bytes whole through the runner's framing.
    pub(crate) async fn read_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, String> {
        let encoded = self
            .run_bytes(
                &["base64", "-w0", path].map(str::to_owned),
                None,
                max_bytes.saturating_mul(4) / 3 + 1024,
            )
            .await?;
        base64::engine::general_purpose::STANDARD
            .decode(encoded.trim_ascii())
            .map_err(|_| format!("{path} did not come back whole"))
    }

    /// Run one command: its stdout, or its output as the error when it fails (never its stdin).
    pub(crate) async fn run(
        &self,
        command: &[String],
        stdin: Option<&[u8]>,
    ) -> Result<String, String> {
        let stdout = self.run_bytes(command, stdin, 64 * 1024).await?;
        Ok(String::from_utf8_lossy(&stdout).trim().to_owned())
    }

    /// [`Self::run`] with up to `max_output` bytes of stdout, as bytes.
    pub(crate) async fn run_bytes(
        &self,
        command: &[String],
        stdin: Option<&[u8]>,
        max_output: usize,
    ) -> Result<Vec<u8>, String> {
        let result = self
            .commands
            .run(command, stdin, self.timeout, max_output)
            .await
            .map_err(|error| error.to_string())?;
        if result.exit_code == 0 {
            return Ok(result.stdout);
        }
        let stdout = String::from_utf8_lossy(&result.stdout);
        let stderr = String::from_utf8_lossy(&result.stderr);
        let said = format!("{} {}", stdout.trim(), stderr.trim());
        Err(format!(
            "`{}` exited with {}: {}",
            command[..command.len().min(3)].join(" "),
            result.exit_code,
            said.trim().chars().take(300).collect::<String>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The runner and Docker cannot be made to send these on purpose; the answers are built here.

    #[test]
    fn an_answer_over_the_cap_is_cut_on_the_host_too() {
        let response = Response {
            id: 1,
            exit_code: 0,
            dropped: 5,
            stdout: vec![b'o'; 80],
            stderr: vec![b'e'; 80],
        };
        let output = bounded(response, 100);
        assert_eq!((output.stdout.len(), output.stderr.len()), (80, 20));
        assert_eq!(output.dropped, 5 + 60);
    }

    #[test]
    fn answers_go_to_their_own_ids_and_strays_are_dropped() {
        let waiting = Mutex::new(Waiting::default());
        let (first, mut first_answer) = oneshot::channel();
        let (second, mut second_answer) = oneshot::channel();
        lock(&waiting).answers.extend([(1, first), (2, second)]);
        lock(&waiting).largest_asked = 64;
        let answer = |id: u64, text: &str| {
            Response {
                id,
                stdout: text.as_bytes().to_vec(),
                ..Response::default()
            }
            .encode()
        };
        // Out of order, one for an id nobody awaits, and the last cut in half.
        let mut stream = [answer(2, "two"), answer(9, "stray"), answer(1, "one")].concat();
        stream.extend_from_slice(&answer(3, "later")[..6]);
        let mut buffer = stream;
        deliver(&mut buffer, &waiting).unwrap();
        assert_eq!(buffer.len(), 6, "a partial answer waits for the rest");
        assert_eq!(first_answer.try_recv().unwrap().stdout, b"one");
        assert_eq!(second_answer.try_recv().unwrap().stdout, b"two");
        assert!(lock(&waiting).answers.is_empty());
    }

    #[test]
    fn an_unreadable_answer_ends_the_runner() {
        let waiting = Mutex::new(Waiting::default());
        let mut oversized = u32::MAX.to_be_bytes().to_vec();
        assert!(deliver(&mut oversized, &waiting).is_err());
        let mut garbled = vec![0, 0, 0, 3, 1, 2, 3];
        assert!(deliver(&mut garbled, &waiting).is_err());
    }

    /// With the real daemon: commands for a step that may be frozen never start an exec, even
    /// once the runner has ended (an exec starting in a frozen container wedges dockerd).
    #[tokio::test]
    async fn runner_only_commands_never_start_an_exec_once_the_runner_has_ended() {
        use crate::testing::{Sleeper, docker};
        use airlock_testkit::docker::{execs_created, unix_now};
        if !airlock_testkit::docker::docker_ready() {
            return;
        }
        let docker = docker().await;
        let name = format!("airlock-runner-only-test-{}", std::process::id());
        let _sleeper = Sleeper::start(&docker, &name).await;
        let runner = Runner::launch(&docker, &name).await.unwrap();
        let commands = Commands::new(docker.clone(), name.clone(), Some(Arc::new(runner)));
        let only = commands.runner_only();
        let command = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let limit = Duration::from_secs(20);
        let ran = only.run(&command(&["true"]), None, limit, 1024).await;
        assert_eq!(ran.unwrap().exit_code, 0);

        // The runner ends (it is killed by the command it runs, so its end has been seen once
        // this answer comes).
        let killed = only
            .run(
                &command(&["pkill", "-x", "airlock-runner"]),
                None,
                limit,
                1024,
            )
            .await;
        assert!(
            matches!(killed, Err(ExecError::RunnerLost(_))),
            "{killed:?}"
        );
        let since = unix_now();
        let refused = only.run(&command(&["true"]), None, limit, 1024).await;
        assert!(
            matches!(refused, Err(ExecError::RunnerEnded)),
            "{refused:?}"
        );
        assert_eq!(execs_created(&name, &since), Vec::<String>::new());
        // The same commands with the fallback take an exec.
        let fell_back = commands.run(&command(&["true"]), None, limit, 1024).await;
        assert_eq!(fell_back.unwrap().exit_code, 0);
        assert_eq!(execs_created(&name, &since).len(), 1);
    }

    #[test]
    fn a_frame_longer_than_anything_asked_for_ends_the_runner_before_it_is_buffered() {
        let waiting = Mutex::new(Waiting::default());
        let (sender, _answer) = oneshot::channel();
        lock(&waiting).answers.insert(1, sender);
        lock(&waiting).largest_asked = 1024;
        // An honest answer at the cap passes.
        let honest = Response {
            id: 1,
            stdout: vec![b'x'; 1024],
            ..Response::default()
        }
        .encode();
        let mut buffer = honest;
        deliver(&mut buffer, &waiting).unwrap();
        assert!(buffer.is_empty());
        // A hostile container announces 256 MiB; only its 4-byte prefix has arrived.
        let mut buffer = (256u32 * 1024 * 1024).to_be_bytes().to_vec();
        let why = deliver(&mut buffer, &waiting).unwrap_err();
        assert!(why.contains("over the limit"), "{why}");
        // One byte past what was asked plus the fields is refused too.
        let limit = u32::try_from(response_limit(1024)).unwrap();
        let mut buffer = (limit + 1).to_be_bytes().to_vec();
        assert!(deliver(&mut buffer, &waiting).is_err());
        let mut buffer = limit.to_be_bytes().to_vec();
        assert!(deliver(&mut buffer, &waiting).is_ok(), "waits for the body");
    }
}
