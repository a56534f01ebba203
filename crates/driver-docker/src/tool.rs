//! The worker's one tool: `agent_browser { args, stdin?, keep? }`, run in the task container.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use airlock_policy::{check_command, refused_while_secrets_held};
use airlock_worker::{
    BoxFuture, Image, PageSeen, TaskContext, Tool, ToolDefinition, ToolFailure, ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::exec::{ExecError, TIMED_OUT_EXIT};
use crate::runner::{Commands, DriverCommands};
use crate::{download_input, secret_input, upload_input};
use tokio_util::sync::CancellationToken;

/// The tool's input, as the model writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentBrowserInput {
    /// agent-browser's arguments as a list, one word per item, without `agent-browser` itself:
    /// `["open", "https://example.com"]`, `["click", "@e3"]`, `["fill", "@e2", "hello world"]`.
    pub args: Vec<String>,
    /// Text fed to the command's standard input; only for `["eval", "--stdin"]`.
    #[serde(default)]
    pub stdin: Option<String>,
    /// With `screenshot`: keep the image for the task's result (a limited number may be kept).
    #[serde(default)]
    pub keep: bool,
}

/// The tool's name.
pub const TOOL_NAME: &str = "agent_browser";

const DESCRIPTION: &str = "Run one agent-browser command in your sealed browser. Pass the words after \
`agent-browser` as a list (no shell, no quoting): [\"open\", \"https://example.com\"], [\"snapshot\", \"-i\"], \
[\"click\", \"@e3\"]. A screenshot is shown to you; set keep to true to return it with your report.";

/// The most one read of the browser's stored values may take (each takes about 0.1 s).
const LEARN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long after a task's first answer a command counts as following it at once.
pub(crate) const FOLLOW_UP_GRACE: Duration = Duration::from_millis(100);

/// When a task's start is over, for the warm pool's refill (which holds back until then): its
/// first answer, and the command that follows it at once if one begins within
/// [`FOLLOW_UP_GRACE`] (an agent's first look at the page, such as `snapshot` after `open`; a
/// refill started beside a warm start's first snapshot took it from about 65 ms to 80–130 ms). A task that thinks first ends its start
/// at the grace's end; one that ends sooner, when it ends (the session cancels the token then).
pub(crate) struct TaskStart {
    over: CancellationToken,
    began: AtomicU32,
    answered: AtomicU32,
}

impl TaskStart {
    /// A start that ends by cancelling `over`.
    pub(crate) fn new(over: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            over,
            began: AtomicU32::new(0),
            answered: AtomicU32::new(0),
        })
    }

    /// A command began.
    pub(crate) fn began(&self) {
        self.began.fetch_add(1, Ordering::SeqCst);
    }

    /// A command was answered.
    pub(crate) fn answered(self: &Arc<Self>) {
        let answered = self.answered.fetch_add(1, Ordering::SeqCst) + 1;
        if answered > 1 {
            self.over.cancel();
        } else {
            let start = Arc::clone(self);
            tokio::spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(FOLLOW_UP_GRACE) => {}
                    () = start.over.cancelled() => return,
                }
                // No second command began: the task is thinking, so its start is over.
                if start.began.load(Ordering::SeqCst) < 2 {
                    start.over.cancel();
                }
            });
        }
    }
}

pub(crate) struct AgentBrowserTool {
    pub(crate) commands: Commands,
    /// Tells the warm pool's refill when this task's start is over.
    pub(crate) start: Arc<TaskStart>,
    pub(crate) context: TaskContext,
    pub(crate) pending: crate::unseen_egress::PendingRefusals,
    pub(crate) command_timeout: Duration,
    pub(crate) max_output_bytes: usize,
    pub(crate) screenshots_taken: AtomicU64,
    /// A secret went into a field that shows its text: screenshots would show it.
    pub(crate) secret_on_screen: AtomicBool,
    /// The task's proxy: once a secret is typed, it reaches only the secrets' sites.
    pub(crate) scope: Option<airlock_proxy::ScopeHandle>,
}

impl Tool for AgentBrowserTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::for_input::<AgentBrowserInput>(TOOL_NAME, DESCRIPTION)
    }

    fn execute(&self, input: Value) -> BoxFuture<'_, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            let input: AgentBrowserInput = match serde_json::from_value(args_if_bare(input)) {
                Ok(input) => input,
                Err(error) => {
                    return Ok(ToolOutput::failed(format!(
                        "The input is not valid ({error}). Pass {{\"args\": [\"open\", \"https://example.com\"]}}."
                    )));
                }
            };
            self.start.began();
            let output = self.run(input).await;
            self.start.answered();
            let mut output = output?;
            self.learn_stored_values().await;
            self.append_refusals(&mut output);
            Ok(output)
        })
    }

    fn page(&self) -> BoxFuture<'_, Option<PageSeen>> {
        Box::pin(async {
            let url = self.read_page("url").await?;
            let title = self.read_page("title").await.unwrap_or_default();
            Some(PageSeen { url, title })
        })
    }

    fn look(&self) -> BoxFuture<'_, Option<Result<ToolOutput, ToolFailure>>> {
        // The worker's own first look at a page, through the same path as its commands (so
        // values a person's sign-in stored are learned and scrubbed like any others).
        Box::pin(async {
            let snapshot = serde_json::json!({ "args": ["snapshot", "-i"] });
            Some(self.execute(snapshot).await)
        })
    }

    fn opening(&self, url: &str) -> Option<Value> {
        Some(serde_json::json!({ "args": ["open", url] }))
    }

    fn page_screenshot(&self) -> BoxFuture<'_, Option<Image>> {
        Box::pin(async {
            // The same rule as the worker's screenshots: none once a secret may show.
            if self.secret_on_screen.load(Ordering::SeqCst) {
                return None;
            }
            let number = self.screenshots_taken.fetch_add(1, Ordering::Relaxed) + 1;
            let path = format!("/tmp/airlock-shot-{number}.png");
            let command = ["agent-browser", "screenshot", path.as_str()].map(str::to_owned);
            let taken = self
                .commands
                .run(&command, None, LOOK_TIMEOUT, LOOK_OUTPUT_BYTES)
                .await
                .ok()?;
            if taken.exit_code != 0 {
                return None;
            }
            self.read_screenshot(&path).await.ok()
        })
    }
}

/// The most a look at the page for the task's record may take.
const LOOK_TIMEOUT: Duration = Duration::from_secs(5);
/// What a look at the page may print (a URL or a title; longer is cut by the record).
const LOOK_OUTPUT_BYTES: usize = 8 * 1024;

impl AgentBrowserTool {
    /// In a task with an account (secrets, a loaded state, a state to return): whatever the
    /// browser now stores (cookies set by a sign-in, storage) is scrubbed from what the worker is
    /// shown, this command's output included. Three quick reads per command (cookies, and the
    /// page's two storages; never `state save`, which waits 30 s on an error page), in such tasks
    /// only.
    async fn learn_stored_values(&self) {
        let context = &self.context;
        if context.secrets.is_empty() && context.state_in.is_none() && !context.return_state {
            return;
        }
        let commands = DriverCommands {
            commands: &self.commands,
            timeout: LEARN_TIMEOUT,
        };
        context
            .secrets
            .learn(&crate::session_state::stored_values(&commands).await);
    }

    /// Commands the driver carries out itself for this task: `upload` when it has files,
    /// `download` when it allows downloads. Without, the command policy refuses both.
    async fn handled_by_driver(&self, args: &[String]) -> Option<ToolOutput> {
        if let Some(judged) = upload_input::judge(args, &self.context.uploads) {
            return Some(match judged {
                Ok((selector, files)) => {
                    upload_input::upload(&self.driver_commands(), &self.context, selector, &files)
                        .await
                }
                Err(refusal) => ToolOutput::refused(refusal),
            });
        }
        if download_input::handles(args, &self.context.downloads) {
            return Some(
                download_input::download(
                    &self.driver_commands(),
                    &self.context.downloads,
                    &self.context.secrets,
                    args,
                )
                .await,
            );
        }
        None
    }

    async fn run(&self, input: AgentBrowserInput) -> Result<ToolOutput, ToolFailure> {
        if let Some(output) = self.handled_by_driver(&input.args).await {
            return Ok(output);
        }
        let allowed = match check_command(&input.args) {
            Ok(allowed) => allowed,
            Err(refusal) => return Ok(ToolOutput::refused(refusal.to_string())),
        };
        if let Some(why) = self.context.browser.refusal(&input.args) {
            return Ok(ToolOutput::refused(format!("{why}.")));
        }
        if let Some(answer) = self.with_secrets(&input.args, allowed.command).await {
            return Ok(answer);
        }
        let wants_stdin = allowed.command == "eval" && input.args.iter().any(|a| a == "--stdin");
        if input.stdin.is_some() && !wants_stdin {
            return Ok(ToolOutput::failed(
                "stdin is only read by [\"eval\", \"--stdin\"]; put other text in args.",
            ));
        }
        let screenshot_path = (allowed.command == "screenshot").then(|| {
            let number = self.screenshots_taken.fetch_add(1, Ordering::Relaxed) + 1;
            format!("/tmp/airlock-shot-{number}.png")
        });
        let mut command = vec!["agent-browser".to_owned()];
        match &screenshot_path {
            // The driver picks where the file goes; a path the worker gave is dropped.
            Some(path) => {
                command.extend(
                    input
                        .args
                        .iter()
                        .filter(|arg| !looks_like_path(arg))
                        .cloned(),
                );
                command.push(path.clone());
            }
            None => command.extend(input.args.iter().cloned()),
        }
        let result = match self
            .commands
            .run(
                &command,
                input.stdin.as_deref().map(str::as_bytes),
                self.command_timeout,
                self.max_output_bytes,
            )
            .await
        {
            Ok(result) => result,
            // The worker can act on this one: look at the page before repeating the command.
            Err(lost @ ExecError::RunnerLost(_)) => {
                return Ok(ToolOutput::failed(lost.to_string()));
            }
            Err(error) => return Err(ToolFailure::new(error)),
        };

        let mut text = String::from_utf8_lossy(&result.stdout)
            .trim_end()
            .to_owned();
        let stderr = String::from_utf8_lossy(&result.stderr);
        if !stderr.trim().is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(stderr.trim_end());
        }
        if result.dropped > 0 {
            text.push_str(&format!(
                "\n[… {} more bytes of output were dropped]",
                result.dropped
            ));
        }
        if result.exit_code == TIMED_OUT_EXIT {
            return Ok(ToolOutput::failed(format!(
                "{text}\nThe command was stopped after {} seconds.",
                self.command_timeout.as_secs()
            )));
        }
        if result.exit_code != 0 {
            if text.is_empty() {
                text = format!("agent-browser exited with status {}", result.exit_code);
            }
            return Ok(ToolOutput::failed(text));
        }
        let mut output = ToolOutput::text(if text.is_empty() {
            "Done.".to_owned()
        } else {
            text
        });
        if let Some(path) = screenshot_path {
            let image = self.read_screenshot(&path).await?;
            if input.keep {
                match self.context.keep_screenshot(image.clone()) {
                    Ok(()) => output.text.push_str("\nKept for your report."),
                    Err(refusal) => output.text.push_str(&format!("\n{refusal}")),
                }
            }
            output.images.push(image);
        }
        Ok(output)
    }

    /// What the task's secrets make of a command: a refusal, the typing of one, or nothing (it
    /// runs as usual).
    async fn with_secrets(&self, args: &[String], command: &str) -> Option<ToolOutput> {
        if !self.context.secrets.is_empty()
            && let Some(why) = refused_while_secrets_held(args)
        {
            return Some(ToolOutput::refused(format!("{why}.")));
        }
        match secret_input::judge(args, &self.context.secrets) {
            Err(refusal) => return Some(ToolOutput::refused(refusal)),
            Ok(Some(typing)) => {
                return Some(
                    secret_input::type_secret(
                        &self.driver_commands(),
                        &self.context,
                        &typing,
                        &self.secret_on_screen,
                        self.scope.as_ref(),
                    )
                    .await,
                );
            }
            Ok(None) => {}
        }
        (command == "screenshot" && self.secret_on_screen.load(Ordering::SeqCst)).then(|| {
            ToolOutput::refused(
                "a secret was typed into a field that shows its text, so a screenshot would show it; this task takes no more screenshots. Read the page with snapshot or get text.",
            )
        })
    }

    /// The session's commands, for the driver's own steps (typing a secret, placing a file).
    fn driver_commands(&self) -> DriverCommands<'_> {
        DriverCommands {
            commands: &self.commands,
            timeout: self.command_timeout,
        }
    }

    /// Read a screenshot back, and remove it.
    async fn read_screenshot(&self, path: &str) -> Result<Image, ToolFailure> {
        let read = self
            .driver_commands()
            .read_file(
                path,
                self.context
                    .limits
                    .max_screenshot_bytes
                    .max(12 * 1024 * 1024),
            )
            .await;
        // The file is ours alone; leaving it would only fill the tmpfs.
        let _ = self
            .commands
            .run(
                &["rm".to_owned(), "-f".to_owned(), path.to_owned()],
                None,
                Duration::from_secs(5),
                1024,
            )
            .await;
        let data = read
            .map_err(|error| ToolFailure::new(format!("reading the screenshot failed: {error}")))?;
        Ok(Image::png(data))
    }

    /// `agent-browser get url` (or `title`), for the task's record.
    async fn read_page(&self, what: &str) -> Option<String> {
        let command = ["agent-browser", "get", what].map(str::to_owned);
        let read = self
            .commands
            .run(&command, None, LOOK_TIMEOUT, LOOK_OUTPUT_BYTES)
            .await
            .ok()?;
        (read.exit_code == 0).then(|| String::from_utf8_lossy(&read.stdout).trim().to_owned())
    }

    /// Tell the worker which requests the proxy refused, or could not complete, since the
    /// previous command: the browser's own error (`net::ERR_TUNNEL_CONNECTION_FAILED`) does not
    /// say what happened; the proxy does.
    fn append_refusals(&self, output: &mut ToolOutput) {
        let taken = crate::unseen_egress::take(&self.pending);
        output
            .text
            .push_str(&crate::unseen_egress::worker_text(&taken));
        crate::unseen_egress::record_into(taken, &self.context);
    }
}

/// A bare list of words is read as the `args` it can only be: small local models write the call
/// so (`{"name": "agent_browser", "arguments": ["open", "…"]}`, Qwen2.5-Coder 0.5B and 1.5B
/// alike) and, told the right form, write the bare list again.
fn args_if_bare(input: Value) -> Value {
    match input {
        Value::Array(words) if words.iter().all(Value::is_string) => {
            serde_json::json!({ "args": words })
        }
        other => other,
    }
}

/// A screenshot argument that names a file rather than a selector.
fn looks_like_path(arg: &str) -> bool {
    let lower = arg.to_ascii_lowercase();
    !arg.starts_with('-')
        && (arg.starts_with('/')
            || arg.starts_with("./")
            || arg.starts_with("../")
            || [".png", ".jpg", ".jpeg", ".webp"]
                .iter()
                .any(|ext| lower.ends_with(ext)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_worker::{CancellationToken, TaskLimits};
    use serde_json::json;

    /// A tool whose Docker "socket" is a plain file: any exec would fail, and `execute` would
    /// return an error, so these tests see only what is refused before Docker is asked.
    fn tool(dir: &tempfile::TempDir) -> AgentBrowserTool {
        let socket = dir.path().join("docker.sock");
        std::fs::write(&socket, "").unwrap();
        let docker = bollard::Docker::connect_with_unix(
            socket.to_str().unwrap(),
            5,
            bollard::API_DEFAULT_VERSION,
        )
        .unwrap();
        AgentBrowserTool {
            commands: Commands::new(docker, "never-used".to_owned(), None),
            start: TaskStart::new(CancellationToken::new()),
            context: TaskContext::new(CancellationToken::new(), TaskLimits::default()),
            pending: crate::unseen_egress::PendingRefusals::default(),
            command_timeout: Duration::from_secs(5),
            max_output_bytes: 1024,
            screenshots_taken: AtomicU64::new(0),
            secret_on_screen: AtomicBool::new(false),
            scope: None,
        }
    }

    #[tokio::test]
    async fn while_secrets_are_held_reads_of_fields_and_misplaced_placeholders_never_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut tool = tool(&dir);
        let secret = airlock_worker::Secret::new("pw", "s3cret-value".into(), ["login.example"]);
        tool.context.secrets = airlock_worker::Secrets::new(vec![secret.unwrap()]).unwrap();
        for (args, says) in [
            (json!(["eval", "document.title"]), "holds secrets"),
            (json!(["get", "value", "#pw"]), "holds secrets"),
            (
                json!(["open", "https://login.example/?p={{secret:pw}}"]),
                "a secret is typed with",
            ),
            (
                json!(["fill", "#pw", "{{secret:nope}}"]),
                "there is no secret `nope`",
            ),
        ] {
            // The commands point at a socket nobody serves: reaching Docker would fail, not refuse.
            let output = tool.execute(json!({"args": args})).await.unwrap();
            assert!(output.is_error(), "{args}");
            assert!(output.text.contains(says), "{args}: {}", output.text);
        }
        tool.secret_on_screen.store(true, Ordering::SeqCst);
        let output = tool.execute(json!({"args": ["screenshot"]})).await.unwrap();
        assert!(
            output.text.contains("no more screenshots"),
            "{}",
            output.text
        );
    }

    #[test]
    fn a_bare_list_of_words_is_the_args_and_anything_else_is_left_as_it_is() {
        assert_eq!(
            args_if_bare(json!(["open", "https://example.com"])),
            json!({"args": ["open", "https://example.com"]})
        );
        for other in [
            json!(["open", 1]),
            json!({"args": ["snapshot"]}),
            json!("open"),
        ] {
            assert_eq!(args_if_bare(other.clone()), other);
        }
    }

    #[tokio::test]
    async fn stdin_is_only_accepted_for_eval_with_the_stdin_flag() {
        for args in [
            json!(["snapshot"]),
            json!(["snapshot", "--stdin"]),
            json!(["eval", "document.title"]),
            json!(["open", "https://example.com"]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let output = tool(&dir)
                .execute(json!({"args": args, "stdin": "document.cookie"}))
                .await
                .unwrap();
            assert!(output.is_error(), "{args}: {output:?}");
            assert!(
                output.text.contains("[\"eval\", \"--stdin\"]"),
                "{args}: {}",
                output.text
            );
        }
    }

    #[tokio::test]
    async fn an_exec_through_the_stand_in_socket_fails() {
        // The premise of the tests above: reaching Docker here is an error, not a quiet pass.
        let dir = tempfile::tempdir().unwrap();
        let result = tool(&dir).execute(json!({"args": ["snapshot"]})).await;
        assert!(result.is_err(), "{result:?}");
    }

    #[tokio::test]
    async fn refused_commands_and_bad_input_never_reach_the_container() {
        for input in [
            json!({"args": ["cookies"]}),
            json!({"args": ["open", "file:///etc/passwd"]}),
            json!({"args": ["snapshot"], "shell": "sh"}),
            json!({"argv": ["snapshot"]}),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let output = tool(&dir).execute(input.clone()).await.unwrap();
            assert!(output.is_error(), "{input}: {output:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_tasks_start_ends_after_the_command_that_follows_its_first_answer_at_once() {
        let over = CancellationToken::new();
        let start = TaskStart::new(over.clone());
        let began = tokio::time::Instant::now();
        // `open`, answered; `snapshot` begins at once and takes 300 ms.
        start.began();
        start.answered();
        start.began();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!over.is_cancelled(), "over before the follow-up's answer");
        start.answered();
        assert!(over.is_cancelled());
        assert_eq!(began.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_thinks_after_its_first_answer_ends_its_start_at_the_grace() {
        let over = CancellationToken::new();
        let start = TaskStart::new(over.clone());
        let began = tokio::time::Instant::now();
        start.began();
        start.answered();
        over.cancelled().await;
        assert_eq!(began.elapsed(), FOLLOW_UP_GRACE);
        // A command after the grace changes nothing.
        start.began();
        start.answered();
        assert!(over.is_cancelled());
    }
}
