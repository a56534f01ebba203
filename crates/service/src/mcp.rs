//! `airlock mcp`: an MCP server on stdio.
//!
//! By default it offers `browser_task({ task, url? })`: a worker with its own sealed browser does
//! the task and returns its report (text) and the screenshots it kept (images), with progress
//! notifications while it runs. With `--direct` it offers `agent_browser` instead: one sealed
//! browser per MCP session, driven by the calling agent itself, under the same command policy and
//! limits. Tasks are cancelled and their containers removed when the client cancels, when stdin
//! closes, or on SIGTERM; the server exits only after that cleanup.

use std::future::Future;
use std::sync::{Arc, PoisonError};

use airlock_worker::{
    CancellationToken, Content, DirectSession, Progress, READ_OUTPUT, READ_OUTPUT_DESCRIPTION,
    ReadOutputInput, TaskRunner,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;

use crate::answer_gone::AnswerGone;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio_util::task::TaskTracker;

use crate::request_refusal::RequestRefusal;
use crate::scope_request::{Caller, Ceiling};
use crate::task_request::{Asked, Ready, prepare};
use crate::{Browsers, TaskSettings};

/// The input of `browser_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BrowserTaskInput {
    /// What to do in the browser, in plain words. The worker reports what it found and where.
    task: String,
    /// Where to start (http or https).
    #[serde(default)]
    url: Option<String>,
    /// Confine the task to these sites: names (`shop.example`: that name only) or `*.` before a
    /// name (`*.shop.example`: every name under it, not the bare name). Omitted: what the
    /// operator allows. Asking beyond that is refused, never narrowed.
    #[serde(default)]
    allowed_domains: Vec<String>,
    /// Refuse these sites even where allowed (same patterns). The operator's blocked list
    /// always applies too.
    #[serde(default)]
    blocked_domains: Vec<String>,
    /// Names of secrets the operator configured that the worker may type (by placeholder) on
    /// their sites; the worker never sees a value, and neither does this result.
    #[serde(default)]
    secrets: Vec<String>,
    /// A named context Airlock keeps for this caller: the task starts from its saved cookies and
    /// storage and saves them back (one task at a time per context; a second is refused).
    #[serde(default)]
    context: Option<String>,
    /// Let the worker download files, up to this many bytes in all (at most what the operator
    /// allows); they come back with the result, and the worker can read a downloaded PDF as
    /// text. Omitted: no downloads.
    #[serde(default)]
    max_download_bytes: Option<u64>,
    /// The operator's route to leave by (`direct`, or a company proxy the operator named);
    /// omitted: the operator's default. Sites the operator sends by a route of their own still
    /// take it. An unknown name is refused with the list.
    #[serde(default)]
    route: Option<String>,
    /// A JSON Schema the answer must match (at most 32 KiB, 32 levels deep; `$ref` only inside
    /// it). The worker hands its answer in and is told where it does not match (3 tries); the
    /// result carries it as `data` beside the report, or ends `no_valid_answer` without one.
    /// Omitted: a report only.
    #[serde(default)]
    output_schema: Option<serde_json::Value>,
    /// How the browser is set for this task: `viewport` {width, height, scale?} or a mobile
    /// `device` (`iPhone 15`, `Pixel 7`, …), `locale` (`fr-FR`), `time_zone` (`Europe/Paris`),
    /// `geolocation` {latitude, longitude}, `color_scheme` (`light`, `dark`). The worker cannot
    /// change what is set here. Omitted: a 1280×720 desktop, en-US, UTC, light.
    #[serde(default)]
    browser: airlock_policy::BrowserSettings,
}

const TASK_DESCRIPTION: &str = "Do a task in a real web browser that is sealed off from this machine \
and from private networks: a worker browses the public web, then reports what it found, where, and \
what it could not verify. Screenshots it kept come back as images.";

const DIRECT_DESCRIPTION: &str = "Run one agent-browser command in your own sealed browser (one per \
session). Pass the words after `agent-browser` as a list: [\"open\", \"https://example.com\"], \
[\"snapshot\", \"-i\"], [\"click\", \"@e3\"]. No shell. Set keep to true with screenshot to keep it.";

/// The server's state: one per MCP session (on stdio, the only one).
#[derive(Clone)]
pub(crate) struct Server {
    pub(crate) mode: Mode,
    pub(crate) settings: Arc<TaskSettings>,
    /// Every running task, so shutdown can wait for its cleanup.
    pub(crate) tracker: TaskTracker,
    /// Cancelled on shutdown (stdin closed, SIGTERM), or when this MCP session ends.
    pub(crate) shutdown: CancellationToken,
    /// Over HTTP (`airlock serve`): admission control and metrics, shared by every session.
    pub(crate) admission: Option<Arc<crate::capacity::Admission>>,
    /// Over HTTP: where each task is kept (followed, recorded, linked), per token.
    pub(crate) book: Option<Arc<crate::task_book::TaskBook>>,
    /// Over HTTP: cancels `shutdown` when the session's last handle goes (the session ended).
    pub(crate) _session_end: Option<Arc<tokio_util::sync::DropGuard>>,
}

/// What an MCP session offers.
#[derive(Clone)]
pub enum Mode {
    /// `browser_task`: a worker model does each task.
    Task(TaskRunner),
    /// `agent_browser`: the calling agent drives one browser of its own.
    Direct(Arc<Direct>),
}

impl Mode {
    /// `agent_browser`, its browser started at the session's first call and ended on
    /// `tracker`; over HTTP `admission` gives it a task slot for the session's life.
    pub fn direct(
        browsers: Arc<dyn Browsers>,
        tracker: TaskTracker,
        admission: Option<Arc<crate::capacity::Admission>>,
    ) -> Self {
        Self::Direct(Arc::new(Direct {
            browsers,
            session: Mutex::new(None),
            tracker,
            admission,
            slot: std::sync::Mutex::new(None),
        }))
    }
}

/// `--direct`: one browser for the MCP session, started at the first call, held to the task
/// limits (steps, time, output, images, scrubbing) by the worker's [`DirectSession`]. Dropped
/// with its session (over HTTP, when the client ends it or it idles out): the browser goes then.
pub struct Direct {
    pub(crate) browsers: Arc<dyn Browsers>,
    pub(crate) session: Mutex<Option<DirectSession>>,
    /// Where the browser's end runs when this is dropped, so shutdown waits for it.
    pub tracker: TaskTracker,
    /// Over HTTP: the browser takes a task slot for the session's life.
    pub admission: Option<Arc<crate::capacity::Admission>>,
    pub(crate) slot: std::sync::Mutex<Option<crate::capacity::Slot>>,
}

impl Drop for Direct {
    fn drop(&mut self) {
        if let Some(session) = self.session.get_mut().take() {
            // The slot is held until the browser is really gone (its release task, started with
            // the browser, lets it go then).
            let slot = self.slot.get_mut().map_or(None, Option::take);
            self.tracker.spawn(async move {
                session.end().await;
                drop(slot);
            });
        }
    }
}

impl Direct {
    /// Once `session`'s browser is gone, however it went (the time limit, the server's shutdown,
    /// the session's end), give its slot back: an MCP session whose browser has ended (its later
    /// calls are told so) holds no capacity. On the tracker: shutdown waits for every browser to
    /// be gone.
    fn release_when_gone(self: &Arc<Self>, session: &DirectSession) {
        let gone = session.gone();
        let direct = Arc::downgrade(self);
        let admission = self.admission.clone();
        self.tracker.spawn(async move {
            gone.cancelled().await;
            if let Some(admission) = &admission {
                admission.metrics.direct_sessions.dec();
            }
            if let Some(direct) = direct.upgrade() {
                drop(
                    direct
                        .slot
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take(),
                );
            }
        });
    }
}

fn schema<T: JsonSchema>() -> Arc<JsonObject> {
    let value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.mode {
                Mode::Task(_) => "Use browser_task to have a sealed browser worker do web tasks.",
                Mode::Direct(_) => {
                    "Use agent_browser to drive your own sealed browser, one command per call."
                }
            })
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, McpError>> + Send + '_ {
        let tools = match &self.mode {
            Mode::Task(_) => vec![Tool::new(
                "browser_task",
                TASK_DESCRIPTION,
                schema::<BrowserTaskInput>(),
            )],
            Mode::Direct(direct) => {
                let tool = direct.browsers.direct_tool();
                let input = tool.input_schema.as_object().cloned().unwrap_or_default();
                let mut tools = vec![Tool::new(tool.name, DIRECT_DESCRIPTION, Arc::new(input))];
                // Long outputs come as a preview with an id; the calling agent pages them.
                if self.settings.limits.max_kept_output_bytes > 0 {
                    tools.push(Tool::new(
                        READ_OUTPUT,
                        READ_OUTPUT_DESCRIPTION,
                        schema::<ReadOutputInput>(),
                    ));
                }
                tools
            }
        };
        std::future::ready(Ok(ListToolsResult::with_all_items(tools)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        {
            let arguments =
                serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
            let result = match (&self.mode, request.name.as_ref()) {
                (Mode::Task(runner), "browser_task") => {
                    self.browser_task(runner.clone(), arguments, context)
                        .await?
                }
                (Mode::Direct(direct), name) if name == direct.browsers.direct_tool().name => {
                    self.direct_call(Arc::clone(direct), name, arguments).await
                }
                (Mode::Direct(direct), READ_OUTPUT)
                    if self.settings.limits.max_kept_output_bytes > 0 =>
                {
                    self.direct_call(Arc::clone(direct), READ_OUTPUT, arguments)
                        .await
                }
                (_, other) => {
                    return Err(McpError::invalid_params(
                        format!("there is no tool named `{other}`"),
                        None,
                    ));
                }
            };
            Ok(result.into())
        }
    }
}

impl Server {
    /// The request a `browser_task` asked for, held to its caller's ceiling: over HTTP the
    /// ceiling of the token the call came with, on stdio the server's.
    /// The caller's ceiling: its token's over HTTP, the server's otherwise.
    fn ceiling(&self, context: &RequestContext<RoleServer>) -> Arc<Ceiling> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<Ceiling>>().cloned())
            .unwrap_or_else(|| Arc::new(Ceiling::server(self.settings.scope.clone())))
    }

    fn ready(
        &self,
        input: BrowserTaskInput,
        context: &RequestContext<RoleServer>,
    ) -> Result<Ready, RequestRefusal> {
        let ceiling = self.ceiling(context);
        let asked = Asked {
            allowed_domains: &input.allowed_domains,
            blocked_domains: &input.blocked_domains,
            secret_names: input.secrets,
            context: input.context.as_deref(),
            max_download_bytes: input.max_download_bytes,
            route: input.route.as_deref(),
            output_schema: input.output_schema,
            browser: input.browser,
            ..Asked::default()
        };
        let caller = Caller {
            ceiling: &ceiling,
            configured: &self.settings.secrets,
            max_download_bytes: self.settings.max_download_bytes,
            routes: &self.settings.routes,
            max_viewport: self.settings.max_viewport,
        };
        prepare(input.task, input.url, asked, caller)
    }

    async fn browser_task(
        &self,
        runner: TaskRunner,
        arguments: serde_json::Value,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let input: BrowserTaskInput = serde_json::from_value(arguments).map_err(|e| {
            McpError::invalid_params(
                format!(
                    "browser_task takes {{task, url?, allowed_domains?, blocked_domains?, secrets?, context?, max_download_bytes?, route?, output_schema?, browser?}}: {e}"
                ),
                None,
            )
        })?;
        // The task stops when the client cancels this request, when the HTTP answer that carries
        // it is gone (the client dropped its connection), or when the server shuts down.
        let cancel = self.shutdown.child_token();
        let client_cancel = context.ct.clone();
        let answer_gone = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<AnswerGone>())
            .map(|gone| gone.0.clone());
        let on_cancel = cancel.clone();
        tokio::spawn(async move {
            let answer_gone = async {
                match answer_gone {
                    Some(gone) => gone.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = client_cancel.cancelled() => on_cancel.cancel(),
                () = answer_gone => on_cancel.cancel(),
                () = on_cancel.cancelled() => {}
            }
        });
        let progress = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            let sink: airlock_worker::ProgressSink = Arc::new(move |step: Progress| {
                let mut param =
                    ProgressNotificationParam::new(token.clone(), as_progress(step.step));
                param.total = Some(as_progress(step.max_steps));
                param.message = Some(step.summary);
                let peer = peer.clone();
                tokio::spawn(async move {
                    // A client that went away needs no progress.
                    let _ = peer.notify_progress(param).await;
                });
            });
            sink
        });
        let Ready { request, lease, .. } = match self.ready(input, &context) {
            Ok(ready) => ready,
            Err(refusal) => return Ok(refused(&refusal)),
        };
        // A request dropped before its answer (the client went away) cancels its task.
        let _cancel_if_dropped = cancel.clone().drop_guard();
        // Over HTTP the task first waits for a slot, within the server's bounded queue.
        let permit = match &self.admission {
            Some(admission) => match admission.admit(&cancel).await {
                Ok(permit) => Some(permit),
                Err(refusal) => return Ok(refused(&refusal)),
            },
            None => None,
        };
        // Run on the tracker, not in this request's future: if the request is dropped, the task
        // still finishes its cleanup, and shutdown waits for it.
        let admission = self.admission.clone();
        // Kept only once it has its slot: a task is never left queued in the book.
        let owner = &self.ceiling(&context).context_owner;
        let kept = (self.book.as_ref())
            .map(|book| crate::kept_run::Kept::open(book, owner, &request.task, &cancel));
        let record_id = kept.as_ref().map(|kept| kept.id.clone());
        // The client hears of the worker's calls for help while the task runs.
        let _help_forwarding = kept
            .as_ref()
            .map(|kept| crate::mcp_help::spawn(&context, kept, &cancel));
        let task = self.tracker.spawn(async move {
            let settle = |result: &mut airlock_worker::TaskResult| {
                if let Some(admission) = &admission {
                    admission.finished(result);
                }
                // The calling agent never gets the state: it is saved to its context, if any.
                crate::task_request::finish(lease, false, result);
            };
            let ran = crate::kept_run::run(&runner, request, cancel, progress, kept, settle).await;
            drop(permit);
            ran.map(|(result, _)| result)
        });
        let result = match task.await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => return Ok(refused(&RequestRefusal::from(error))),
            Err(error) => {
                return Err(McpError::internal_error(
                    format!("the task stopped: {error}"),
                    None,
                ));
            }
        };
        Ok(crate::mcp_answer::task_answer(
            &result,
            record_id.as_deref(),
        ))
    }

    async fn direct_call(
        &self,
        direct: Arc<Direct>,
        tool: &str,
        arguments: serde_json::Value,
    ) -> CallToolResult {
        let session = {
            let mut guard = direct.session.lock().await;
            if let Some(session) = guard.as_ref() {
                session.clone()
            } else {
                // Held here until the browser has started: a failed start, or a call cancelled
                // while it starts, gives the slot back with this frame.
                let slot = match &direct.admission {
                    Some(admission) => match admission.admit(&self.shutdown).await {
                        Ok(slot) => Some(slot),
                        Err(refusal) => {
                            return CallToolResult::error(vec![ContentBlock::text(
                                refusal.to_string(),
                            )]);
                        }
                    },
                    None => None,
                };
                let started = DirectSession::start(
                    direct.browsers.as_ref(),
                    self.settings.limits,
                    self.settings.direct,
                    self.settings.scope.clone(),
                    &self.shutdown,
                )
                .await;
                match started {
                    Ok(session) => {
                        if let Some(admission) = &direct.admission {
                            admission.metrics.direct_sessions.inc();
                        }
                        *direct.slot.lock().unwrap_or_else(PoisonError::into_inner) = slot;
                        direct.release_when_gone(&session);
                        guard.insert(session).clone()
                    }
                    Err(error) => {
                        return CallToolResult::error(vec![ContentBlock::text(error.to_string())]);
                    }
                }
            }
        };
        let output = session.call(tool, arguments).await;
        let content = output
            .content
            .iter()
            .map(|block| match block {
                Content::Text { text } => ContentBlock::text(text.clone()),
                Content::Image { image } => {
                    ContentBlock::image(image.base64(), image.media_type.clone())
                }
            })
            .collect();
        if output.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
    }
}

/// Step counts are small; saturating at u32 keeps the conversion exact.
fn as_progress(count: usize) -> f64 {
    f64::from(u32::try_from(count).unwrap_or(u32::MAX))
}

/// Serve one MCP session on stdio until stdin closes or `terminated` resolves, then cancel its
/// running tasks (and end its `--direct` browser) and wait for their cleanup.
///
/// # Errors
/// When the MCP handshake on stdio fails.
pub async fn serve_stdio(
    mode: Mode,
    settings: Arc<TaskSettings>,
    terminated: impl Future<Output = ()>,
) -> Result<(), McpServeError> {
    let tracker = match &mode {
        Mode::Direct(direct) => direct.tracker.clone(),
        Mode::Task(_) => TaskTracker::new(),
    };
    let server = Server {
        mode: mode.clone(),
        settings,
        tracker,
        shutdown: CancellationToken::new(),
        admission: None,
        book: None,
        _session_end: None,
    };
    let (tracker, shutdown) = (server.tracker.clone(), server.shutdown.clone());
    let service = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| McpServeError::Start(error.to_string()))?;
    tracing::info!("airlock mcp: serving on stdio");
    tokio::select! {
        ended = service.waiting() => {
            if let Err(error) = ended {
                tracing::warn!(%error, "the MCP session ended with an error");
            }
        }
        () = terminated => {}
    }
    shutdown.cancel();
    if let Mode::Direct(direct) = mode
        && let Some(session) = direct.session.lock().await.take()
    {
        session.end().await;
    }
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// Why MCP on stdio could not start.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// The client's first messages were not an MCP handshake.
    #[error(
        "starting the MCP server on stdio: {0}; connect an MCP client to this process's stdin and stdout"
    )]
    Start(String),
}

/// A request that is not run, told as the tool's error: MCP has no status, so the words carry it.
fn refused(refusal: &impl std::fmt::Display) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(refusal.to_string())])
}
