//! Running one task: start a browser session, let the model work within the limits, and return
//! the report and the screenshots it kept, however the task ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::time::Instant as Deadline;
use tokio_util::sync::CancellationToken;

use crate::downloads::MAX_DOWNLOAD_BYTES_CEILING;
use crate::help::{self, HelpDesk};
use crate::instructions::STANDING_INSTRUCTIONS;
use crate::kept_output::{self, KeptOutputs, cut};
use crate::limits::{LimitError, TaskLimits};
use crate::messages::{AssistantTurn, Content, Message, ToolCall, Usage};
use crate::window::TaskWindow;
use dispose::DisposeGuard;

use crate::ports::{BrowserDriver, Model, ModelRequest, TaskContext, Tool, ToolDefinition};
use crate::record::{FlightRecord, Recorder};
use crate::scrub::scrub;
use crate::state::SessionState;
use crate::task::{
    ContextUse, Ended, Progress, ProgressSink, RunError, ScopeReport, TaskRequest, TaskResult,
    Timings,
};
use crate::token_budget;

mod answer;
mod calls;
mod corrections;
mod dispose;
mod human;
mod nudges;
mod recording;
mod start;
mod words;

use words::{cancelled_report, report_of, summarize, task_message, timed_out_report};

/// Runs tasks with one driver and one model, at most `max_concurrent_tasks` at once.
#[derive(Clone)]
pub struct TaskRunner {
    driver: Arc<dyn BrowserDriver>,
    model: Arc<dyn Model>,
    limits: TaskLimits,
    slots: Arc<Semaphore>,
    progress: Option<ProgressSink>,
}

impl std::fmt::Debug for TaskRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskRunner")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl TaskRunner {
    /// A runner; the limits are validated here.
    pub fn new(
        driver: Arc<dyn BrowserDriver>,
        model: Arc<dyn Model>,
        limits: TaskLimits,
    ) -> Result<Self, LimitError> {
        limits.validate()?;
        Ok(Self {
            driver,
            model,
            limits,
            slots: Arc::new(Semaphore::new(limits.max_concurrent_tasks)),
            progress: None,
        })
    }

    /// Report each step to `sink`.
    #[must_use]
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The limits every task runs within.
    pub fn limits(&self) -> TaskLimits {
        self.limits
    }

    /// Run one task until it ends. Cancelling `cancel` (or dropping the returned future) stops
    /// the model call and the running tool; when this returns, the session has been disposed.
    pub async fn run(
        &self,
        request: TaskRequest,
        cancel: CancellationToken,
    ) -> Result<TaskResult, RunError> {
        self.run_with_progress(request, cancel, self.progress.clone())
            .await
    }

    /// [`TaskRunner::run`], reporting this task's steps to `progress` instead of the runner's sink.
    pub async fn run_with_progress(
        &self,
        request: TaskRequest,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Result<TaskResult, RunError> {
        let hooks = Hooks {
            progress,
            record: false,
            window: TaskWindow::default(),
        };
        let (result, _) = self.run_inner(request, cancel, hooks).await?;
        Ok(result)
    }

    /// [`TaskRunner::run_with_progress`], writing the task's flight record as it goes: after
    /// each browser step the page's URL and title are read, and a thumbnail is made where the
    /// page changed or the worker took a screenshot.
    /// The driver offers the task's live view in `window` while the session runs (if it can);
    /// where `window`'s help desk is staffed, the worker may ask a person for help there.
    pub async fn run_recorded(
        &self,
        request: TaskRequest,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
        window: &TaskWindow,
    ) -> Result<(TaskResult, FlightRecord), RunError> {
        let fallback = Recorder::new(&request);
        let hooks = Hooks {
            progress,
            record: true,
            window: window.clone(),
        };
        let (result, record) = self.run_inner(request, cancel, hooks).await?;
        // A recorded run always returns its record; the fallback only keeps this total.
        let record =
            record.unwrap_or_else(|| fallback.finish(&result, &crate::secrets::Secrets::default()));
        Ok((result, record))
    }

    async fn run_inner(
        &self,
        request: TaskRequest,
        cancel: CancellationToken,
        hooks: Hooks,
    ) -> Result<(TaskResult, Option<FlightRecord>), RunError> {
        if request.task.trim().is_empty() {
            return Err(RunError::EmptyTask);
        }
        let Ok(_slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            return Err(RunError::Busy {
                running: self.limits.max_concurrent_tasks,
            });
        };
        let started = Instant::now();
        let deadline = Deadline::now() + self.limits.timeout;
        // The driver's context ends with the task, whichever way it ends.
        request.secrets.check_scope(&request.scope)?;
        if let Some(given) = request.max_download_bytes
            && (given == 0 || given > MAX_DOWNLOAD_BYTES_CEILING)
        {
            return Err(RunError::DownloadLimit { given });
        }
        if let Some(state) = &request.state {
            state.check(&request.scope)?;
        }
        // A loaded session's values are scrubbed like secrets (the worker never needs them).
        let hidden = request
            .state
            .as_ref()
            .map(SessionState::values)
            .unwrap_or_default();
        let context = TaskContext::new(cancel.child_token(), self.limits)
            .with_scope(request.scope.clone())
            .with_route(request.route.clone())
            .with_browser(request.browser.clone())
            .with_secrets(request.secrets.clone().hiding(&hidden))
            .with_state(request.state.clone(), request.return_state)
            .with_uploads(request.uploads.clone())
            .with_downloads(request.max_download_bytes)
            .with_live(hooks.window.live)
            .with_human_wait(hooks.window.help.time_for_help(&self.limits));
        let _end_context = context.cancel.clone().drop_guard();

        let mut run = Run {
            runner: self,
            progress: hooks.progress,
            context: context.clone(),
            cancel: &cancel,
            deadline,
            timings: Timings::default(),
            steps: 0,
            worker_steps: 0,
            last_text: String::new(),
            usage: Usage::default(),
            kept: KeptOutputs::new(self.limits.max_kept_output_bytes),
            context_use: ContextUse::default(),
            recorder: hooks.record.then(|| Recorder::new(&request)),
            help: hooks.window.help,
            human_left: self.limits.human_timeout,
            answer_tries: 0,
            data: None,
        };
        let start_began = Instant::now();
        let session = match run.bounded(self.driver.start(context.clone())).await {
            Bounded::Done(Ok(session)) => session,
            Bounded::Done(Err(error)) => {
                tracing::warn!(%error, "the browser session did not start");
                return Ok(run.finish(
                    Ended::Failed,
                    &format!("The browser could not start: {error}"),
                    started,
                ));
            }
            Bounded::TimedOut => {
                return Ok(run.finish(
                    Ended::TimedOut,
                    &timed_out_report(&self.limits, ""),
                    started,
                ));
            }
            Bounded::Cancelled => {
                return Ok(run.finish(Ended::Cancelled, "The task was cancelled.", started));
            }
        };
        run.timings.browser_start_ms = millis(start_began.elapsed());
        run.timings.browser_warm = session.warm;
        let mut disposer = DisposeGuard(Some(session.dispose));
        // The same bytes for every task (see `instructions`): the task's own text is its message.
        let system = format!(
            "{STANDING_INSTRUCTIONS}\n\n{}\n\n{}",
            session.guide.trim(),
            session.prompt.trim()
        );
        let (ended, report) = run.converse(&request, system, &session.tools).await;

        let dispose_began = Instant::now();
        disposer.dispose().await;
        run.timings.dispose_ms = millis(dispose_began.elapsed());
        Ok(run.finish(ended, &report, started))
    }
}

/// What a run's caller hears of it.
struct Hooks {
    progress: Option<ProgressSink>,
    /// Write its flight record.
    record: bool,
    /// Where the driver offers its live view, and where a person may be asked for help.
    window: TaskWindow,
}

/// One task in progress.
struct Run<'a> {
    runner: &'a TaskRunner,
    progress: Option<ProgressSink>,
    context: TaskContext,
    cancel: &'a CancellationToken,
    deadline: Deadline,
    timings: Timings,
    /// The model's steps so far.
    steps: usize,
    /// Steps the worker took itself before the model's (opening the start page): the record
    /// numbers the model's step `n` as `worker_steps + n`.
    worker_steps: usize,
    last_text: String,
    usage: Usage,
    kept: KeptOutputs,
    context_use: ContextUse,
    recorder: Option<Recorder>,
    help: HelpDesk,
    /// What is left of the task's time for a person (its human timeout, across its calls).
    human_left: Duration,
    /// Answers (or reports in their place) that missed the task's output schema.
    answer_tries: usize,
    /// The answer that matched the task's output schema (scrubbed when the result is made, with
    /// every value learned by then).
    data: Option<serde_json::Value>,
}

enum Bounded<T> {
    Done(T),
    TimedOut,
    Cancelled,
}

impl Run<'_> {
    /// Await `future` unless the task is cancelled or out of time first (then drop it).
    async fn bounded<T>(&self, future: impl std::future::Future<Output = T>) -> Bounded<T> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Bounded::Cancelled,
            () = tokio::time::sleep_until(self.deadline) => Bounded::TimedOut,
            value = future => Bounded::Done(value),
        }
    }

    async fn converse(
        &mut self,
        request: &TaskRequest,
        system: String,
        tools: &[Arc<dyn Tool>],
    ) -> (Ended, String) {
        let limits = self.runner.limits;
        let mut definitions = self.definitions(tools);
        if let Some(schema) = &request.output_schema {
            definitions.push(schema.definition());
        }
        let first = match self.first_message(request, tools, &definitions).await {
            Ok(first) => first,
            Err(ended) => return ended,
        };
        let mut model_request = ModelRequest {
            system,
            messages: vec![first],
            tools: definitions,
            max_output_tokens: None,
        };
        // Set when a limit is spent: the next turn is the last, and ends the task this way.
        let mut final_turn: Option<Ended> = None;
        let mut corrections = 0;
        let mut kept = nudges::Kept::default();
        // A model that writes its calls as text (a small local one) is reminded of its task.
        let mut writes_calls_as_text = false;
        loop {
            if let Err(report) = self.hold_to_budget(&mut model_request, &mut final_turn) {
                return (Ended::TokenBudget, report);
            }
            let began = Instant::now();
            let turn = self
                .bounded(self.runner.model.next_turn(model_request.clone()))
                .await;
            self.timings.model_ms += millis(began.elapsed());
            let turn: AssistantTurn = match turn {
                Bounded::Done(Ok(turn)) => turn,
                Bounded::Done(Err(error)) => {
                    tracing::warn!(%error, "the model failed");
                    return (
                        Ended::Failed,
                        format!("The model failed: {}", scrub(&error.to_string())),
                    );
                }
                Bounded::TimedOut => {
                    return (Ended::TimedOut, timed_out_report(&limits, &self.last_text));
                }
                Bounded::Cancelled => return (Ended::Cancelled, cancelled_report(&self.last_text)),
            };
            self.usage.add(&turn.usage);
            writes_calls_as_text |= turn.call_read_from_text;
            if let Some(recorder) = &mut self.recorder {
                recorder.turn(began, &turn, self.context_use.chars_shown);
            }
            if !turn.text.trim().is_empty() {
                self.last_text.clone_from(&turn.text);
            }
            let last = final_turn.is_some();
            if corrections::corrected(&mut model_request, &turn, &mut corrections, last) {
                continue;
            }
            if let Some(schema) = &request.output_schema {
                match self.judge_answer(schema, &turn, &mut model_request, final_turn) {
                    answer::Judged::NotAnAnswer => {}
                    answer::Judged::Again => continue,
                    answer::Judged::Ends(ended, report) => return (ended, report),
                }
            }
            if turn.tool_calls.is_empty() || final_turn.is_some() {
                return (final_turn.unwrap_or(Ended::Completed), report_of(&turn));
            }
            if limits.max_task_tokens > 0 && self.usage.total() >= limits.max_task_tokens {
                // The backend spent more than the estimate said: nothing more fits, so the
                // turn's calls are not run and no report turn is asked for.
                return (
                    Ended::TokenBudget,
                    token_budget::unsent_report(
                        self.usage.total(),
                        limits.max_task_tokens,
                        None,
                        &self.last_text,
                    ),
                );
            }
            model_request
                .messages
                .push(Message::Assistant { turn: turn.clone() });
            let follow = match self
                .run_calls(
                    tools,
                    &model_request.tools,
                    writes_calls_as_text.then_some(request.task.as_str()),
                    &turn,
                    &mut final_turn,
                    &mut kept,
                )
                .await
            {
                Ok(follow) => follow,
                Err(ended) => return ended,
            };
            model_request.messages.extend(follow);
        }
    }

    /// The task's first message, after opening its start page (if it has one).
    async fn first_message(
        &mut self,
        request: &TaskRequest,
        tools: &[Arc<dyn Tool>],
        definitions: &[ToolDefinition],
    ) -> Result<Message, (Ended, String)> {
        let start = match &request.url {
            Some(url) => self.open_start_page(tools, definitions, url).await?,
            None => words::StartPage::NotOpened,
        };
        let text = task_message(request, self.runner.limits.max_steps, &start);
        Ok(Message::User {
            content: vec![Content::text(text)],
        })
    }

    /// The tools the worker is offered: the session's, `read_output` when outputs are kept, and
    /// `ask_human` where a person can be reached.
    fn definitions(&self, tools: &[Arc<dyn Tool>]) -> Vec<ToolDefinition> {
        let mut definitions: Vec<ToolDefinition> =
            tools.iter().map(|tool| tool.definition()).collect();
        if kept_output::offered(&self.runner.limits) {
            definitions.push(kept_output::definition());
        }
        if self.help.is_staffed() {
            definitions.push(help::definition());
        }
        definitions
    }

    /// Before each request of a task with a token budget: cap its answer at what is left, or
    /// end the task (`Err` with its report) when not even a report turn fits.
    fn hold_to_budget(
        &self,
        request: &mut ModelRequest,
        final_turn: &mut Option<Ended>,
    ) -> Result<(), String> {
        let budget = self.runner.limits.max_task_tokens;
        if budget > 0 {
            let cap = token_budget::fit_request(
                request,
                final_turn,
                self.usage.total(),
                budget,
                &self.last_text,
            )?;
            request.max_output_tokens = Some(cap);
        }
        Ok(())
    }

    fn report_progress(&self, call: &ToolCall) {
        if let Some(sink) = &self.progress {
            sink(Progress {
                step: self.steps,
                max_steps: self.runner.limits.max_steps,
                summary: summarize(call),
            });
        }
    }

    fn finish(
        &mut self,
        ended: Ended,
        report: &str,
        started: Instant,
    ) -> (TaskResult, Option<FlightRecord>) {
        let result = self.result(ended, report, started);
        let record = self
            .recorder
            .take()
            .map(|recorder| recorder.finish(&result, &self.context.secrets));
        (result, record)
    }

    fn result(&mut self, ended: Ended, report: &str, started: Instant) -> TaskResult {
        self.timings.total_ms = millis(started.elapsed());
        let egress = self.context.egress_record();
        TaskResult {
            report: cut(
                &self.context.secrets.scrub(report),
                self.runner.limits.max_output_chars,
            ),
            screenshots: self.context.kept_screenshots(),
            steps_used: self.steps,
            ended,
            egress_refusals: egress.refusals,
            egress_refusals_not_listed: egress.refusals_not_listed,
            egress_refusals_by_class: egress.refusals_by_class,
            egress_failures: egress.failures,
            egress_failures_not_listed: egress.failures_not_listed,
            egress_bytes: self.context.egress_bytes(),
            egress_allowed: egress.allowed,
            egress_allowed_not_listed: egress.allowed_not_listed,
            egress_bytes_by_route: egress.bytes_by_route,
            timings: self.timings,
            usage: self.usage,
            context: self.context_use.with_store(&self.kept),
            scope: ScopeReport::from(&self.context.scope),
            state: self
                .context
                .final_state()
                .map(|state| state.restricted_to(&self.context.scope)),
            downloads: self.context.downloads.all(),
            data: self
                .data
                .take()
                .map(|data| crate::answer::scrubbed(&data, &self.context.secrets)),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
