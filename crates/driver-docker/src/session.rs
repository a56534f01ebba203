//! Make one sealed session: its proxy, its container, the runner, the relay and the guide (for the
//! pool also Chromium on `about:blank`), then bind it to one task. `Made` undoes exactly what was
//! made.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::Scope;
use airlock_proxy::{EgressProxy, ProxyConfig};
use airlock_worker::{BrowserSession, DriverError, TaskContext, Tool};
use bollard::Docker;
use bollard::query_parameters::CreateContainerOptionsBuilder;
use tokio_util::sync::CancellationToken;

use crate::cdp::{CdpBrowser, Pipe};
use crate::config::DriverConfig;
use crate::guide::{COMPACT_GUIDE, Guide};
use crate::refill_wait::{Freezable, Yield};
use crate::spec::{ContainerOptions, container_spec};
use crate::teardown::{Made, remove_container};
use crate::unseen_egress::{self, PendingRefusals};
use crate::{DockerError, owner, runner, tool, weight};

static TASK_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What making a session needs, shared by the driver and its pool's filler.
pub(crate) struct Maker {
    pub(crate) docker: Docker,
    pub(crate) config: DriverConfig,
    pub(crate) owner: String,
    pub(crate) user: (u32, u32),
    pub(crate) failed_removals: Arc<Mutex<Vec<String>>>,
    /// Requests browsers made before a task or client took them: no page asked for them.
    pub(crate) unasked: std::sync::atomic::AtomicU64,
}

/// Which browser a session holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// agent-browser's, driven by exec'd commands (tasks, `--direct`).
    AgentBrowser,
    /// Chromium with its DevTools on an exec's pipe, for one CDP client.
    Cdp,
}

/// A session made but not yet given to a task: container running, proxy listening, relay ready,
/// guide read (and, when warm, Chromium launched on `about:blank`). A CDP session holds its
/// Chromium, launched and answering, instead of a guide.
pub(crate) struct Prepared {
    made: Made,
    pub(crate) name: String,
    guide: String,
    pending: PendingRefusals,
    /// How the session's commands run (agent-browser sessions; a CDP session runs none).
    commands: runner::Commands,
    /// Cancelled once the task that takes this session has its first answer (and the command
    /// that follows it at once: `tool::TaskStart`), or has ended: the pool's refill waits for it.
    pub(crate) first_answer: CancellationToken,
    pipe: Option<Pipe>,
    pub(crate) made_at: std::time::Instant,
}

impl Prepared {
    /// Remove everything it holds. What its browser asked for while nobody had taken it is
    /// counted in `unasked` first.
    pub(crate) async fn dispose(mut self, unasked: &std::sync::atomic::AtomicU64) {
        self.hand_over(unasked);
        self.made.undo().await;
    }

    /// From here, requests are a task's or client's: count those before as unasked.
    pub(crate) fn hand_over(&self, unasked: &std::sync::atomic::AtomicU64) {
        unseen_egress::hand_over(&self.pending, unasked);
    }

    /// Keep `touch` for as long as the session: it ends when the session is disposed of.
    pub(crate) fn hold_touch(&mut self, touch: crate::touch::Touch) {
        self.made.touch = Some(touch);
    }

    /// How its commands run.
    pub(crate) fn commands(&self) -> &runner::Commands {
        &self.commands
    }

    /// Whether its browser still answers: the container runs and, for CDP, Chromium answers a
    /// command.
    pub(crate) async fn answers(&mut self, maker: &Maker) -> bool {
        if !maker.alive(&self.name).await {
            return false;
        }
        if let Some(pipe) = &mut self.pipe {
            return pipe
                .wait_until_answering(maker.config.command_timeout)
                .await
                .is_ok();
        }
        // A warm agent-browser session's Chromium must still run too: a dead one would be
        // relaunched cold at the task's first command, and the task told it came warm.
        let check = ["sh".to_owned(), "-c".to_owned(), BROWSER_RUNS.to_owned()];
        self.commands
            .run(&check, None, Duration::from_secs(5), 1024)
            .await
            .is_ok_and(|output| output.exit_code == 0)
    }

    /// Send the browser's traffic by the route `route` (by name; `None`: the operator's
    /// default) from now on. A warm session's proxy is route-agnostic until here: its browser
    /// has only opened `about:blank`, and any tunnel it holds on another route closes.
    pub(crate) fn choose_route(&self, route: Option<&str>) -> Result<(), DockerError> {
        if let (Some(name), Some(proxy)) = (route, &self.made.proxy) {
            proxy.choose_route(name).map_err(DockerError::Route)?;
        }
        Ok(())
    }

    /// Lease a CDP session to its client. What the proxy saw before (Chromium's start-up) is
    /// not the client's.
    pub(crate) fn into_cdp(
        self,
        warm: bool,
        scope: Scope,
        unasked: &std::sync::atomic::AtomicU64,
    ) -> CdpBrowser {
        let Self {
            made,
            name,
            pending,
            pipe,
            first_answer,
            ..
        } = self;
        // Before the client's first message: from here the browser reaches only its scope.
        if let Some(proxy) = &made.proxy {
            proxy.set_scope(scope);
        }
        // A CDP client's first page is its own business; the refill need not wait for it.
        first_answer.cancel();
        unseen_egress::hand_over(&pending, unasked);
        CdpBrowser {
            // Invariant: `prepare` with `Kind::Cdp` always sets the pipe, and only CDP sessions
            // are leased here (the CDP pool makes only those).
            pipe: pipe.unwrap_or_else(|| unreachable!("a CDP session without its pipe")),
            made,
            name,
            pending,
            warm,
        }
    }
}

impl Maker {
    /// Make a session whose container exits by itself after `lifetime`. A warm one (made by a
    /// pool, which says how long to yield to tasks' first answers between steps) also launches
    /// Chromium, with the launch settings every later command uses so nothing relaunches it.
    pub(crate) async fn prepare(
        &self,
        lifetime: Duration,
        pool: Option<Yield<'_>>,
        kind: Kind,
        launch_env: Vec<String>,
    ) -> Result<Prepared, DriverError> {
        let warm = pool.is_some();
        let task_id = task_id();
        let (proxy, pending) = self.start_proxy()?;

        let options = ContainerOptions {
            image: self.config.image.clone(),
            task_id: task_id.clone(),
            owner: self.owner.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            user: self.user,
            socket_dir: proxy.socket_dir().to_owned(),
            lifetime_secs: lifetime.as_secs(),
            resources: self.config.resources,
            browser_sandbox: self.config.browser_sandbox,
            runtime: self.config.runtime.clone(),
            extra_ca: !self.config.ca_certs.is_empty(),
            launch_env,
        };
        let name = options.name();
        // From here on, everything made is undone by the guard unless the session takes it over.
        let mut made = Made {
            docker: self.docker.clone(),
            container: None,
            proxy: Some(proxy),
            failed_removals: Arc::clone(&self.failed_removals),
            context: None,
            pending: None,
            first_answer: None,
            state_saver: None,
            touch: None,
        };
        // Recorded before Docker is asked, so a caller that goes away meanwhile (a CDP client
        // that leaves) still has it removed by `made`'s drop; and the creation runs on a task of
        // its own, which removes what it made when nobody is left to take it (a removal that ran
        // before Docker had made it found nothing).
        made.container = Some(name.clone());
        self.create_container(&name, container_spec(&options))
            .await?;
        let reweigh = warm && self.can_reweigh();
        if reweigh {
            // Made beside a running task: it yields the CPU to it while its browser starts.
            weight::set(&self.docker, &name, weight::BACKGROUND).await?;
        }
        // Boxed: the launch's future is large, and it would otherwise sit inside every caller's.
        let steps = Box::pin(async {
            yield_to_first_answers(pool).await;
            self.docker
                .start_container(&name, None)
                .await
                .map_err(DockerError::StartContainer)?;
            self.start_browser(&name, pool, kind).await
        });
        let (guide, commands, pipe) = match pool {
            Some(patience) if reweigh => {
                weight::full_when_done_or_taken_over(
                    &self.docker,
                    &name,
                    patience.taken_over(),
                    steps,
                )
                .await?
            }
            _ => steps.await?,
        };
        Ok(Prepared {
            made,
            name,
            guide,
            pending,
            commands,
            first_answer: CancellationToken::new(),
            pipe,
            made_at: std::time::Instant::now(),
        })
    }

    /// Start what the session drives in its started container `name`: the runner, and for a
    /// warm agent-browser session its Chromium (frozen while a task waits for its first answer);
    /// or the CDP pipe.
    async fn start_browser(
        &self,
        name: &str,
        pool: Option<Yield<'_>>,
        kind: Kind,
    ) -> Result<(String, runner::Commands, Option<Pipe>), DriverError> {
        let name = name.to_owned();
        Ok(match kind {
            Kind::AgentBrowser => {
                // One exec for the runner; every command after it is a process spawn inside.
                yield_to_first_answers(pool).await;
                let runner = runner::Runner::launch(&self.docker, &name).await?;
                let commands = runner::Commands::new(
                    self.docker.clone(),
                    name.clone(),
                    Some(Arc::new(runner)),
                );
                // Before any launch: agent-browser imports it when it starts Chromium.
                crate::ca::place(
                    &commands,
                    &self.config.ca_certs,
                    self.config.command_timeout,
                )
                .await?;
                yield_to_first_answers(pool).await;
                // The short guide is Airlock's own; agent-browser's is read from its binary.
                let guide = match self.config.guide {
                    Guide::Compact => {
                        self.wait_for_relay_then(&commands, AFTER_RELAY_NOTHING)
                            .await?;
                        COMPACT_GUIDE.to_owned()
                    }
                    Guide::AgentBrowser => {
                        self.wait_for_relay_then(&commands, AFTER_RELAY_GUIDE)
                            .await?
                    }
                };
                if let Some(patience) = pool {
                    yield_to_first_answers(pool).await;
                    // The runner has answered (the guide), so its exec has finished starting, and
                    // the launch may not start another: the container can be frozen safely.
                    let container = Freezable {
                        docker: &self.docker,
                        name: &name,
                    };
                    let launch = commands.runner_only();
                    patience
                        .freezing(&container, self.launch_browser(&launch))
                        .await??;
                }
                (guide, commands, None)
            }
            Kind::Cdp => {
                let commands = runner::Commands::new(self.docker.clone(), name.clone(), None);
                self.wait_for_relay_then(&commands, AFTER_RELAY_NOTHING)
                    .await?;
                crate::ca::place(
                    &commands,
                    &self.config.ca_certs,
                    self.config.command_timeout,
                )
                .await?;
                let mut pipe = Pipe::launch(&self.docker, &name).await?;
                pipe.wait_until_answering(self.config.command_timeout)
                    .await?;
                (String::new(), commands, Some(pipe))
            }
        })
    }

    /// Create the container named `name`, safely against the caller going away mid-call.
    async fn create_container(
        &self,
        name: &str,
        spec: bollard::models::ContainerCreateBody,
    ) -> Result<(), DockerError> {
        let abandoned = CancellationToken::new();
        let taken = abandoned.clone().drop_guard();
        let docker = self.docker.clone();
        let owned_name = name.to_owned();
        let creating = tokio::spawn(async move {
            let options = CreateContainerOptionsBuilder::default()
                .name(&owned_name)
                .build();
            let created = docker.create_container(Some(options), spec).await;
            if created.is_ok() && abandoned.is_cancelled() {
                remove_container(&docker, &owned_name).await;
            }
            created
        });
        let created = creating.await;
        taken.disarm();
        match created {
            Ok(created) => created.map(drop).map_err(DockerError::CreateContainer),
            // The task is never aborted: it ends early only with its runtime, or by a panic,
            // which is a bug to surface where it happened.
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(_) => Err(DockerError::CreateInterrupted),
        }
    }

    /// The session's own egress proxy, and where it puts the refusals the worker is told of.
    fn start_proxy(&self) -> Result<(EgressProxy, PendingRefusals), DriverError> {
        let pending: PendingRefusals = Arc::default();
        let sink = Arc::clone(&pending);
        let mut proxy_config = ProxyConfig::new(self.config.egress.clone())
            .with_routes(self.config.routes.clone())
            .with_parent_cas(self.config.ca_certs.clone())
            .with_dir_tag(owner::dir_tag())
            .with_limits(self.config.proxy_limits)
            .with_events(Arc::new(move |event| unseen_egress::record(&sink, event)));
        if !self.config.nameservers.is_empty() {
            proxy_config = proxy_config
                .with_nameservers(&self.config.nameservers)
                .map_err(DockerError::Proxy)?;
        }
        let proxy = EgressProxy::start(proxy_config).map_err(DockerError::Proxy)?;
        Ok((proxy, pending))
    }

    /// Give a prepared session to one task: its tool, its records, its dispose.
    pub(crate) fn bind(
        &self,
        prepared: Prepared,
        context: TaskContext,
        warm: bool,
    ) -> BrowserSession {
        let Prepared {
            mut made,
            guide,
            pending,
            commands,
            first_answer,
            ..
        } = prepared;
        unseen_egress::hand_over(&pending, &self.unasked);
        // Before the task's first command: from here its browser reaches only its scope.
        if let Some(proxy) = &made.proxy {
            proxy.set_scope(context.scope.clone());
        }
        if context.return_state {
            made.state_saver = Some((commands.clone(), self.config.command_timeout));
        }
        made.context = Some(context.clone());
        made.pending = Some(Arc::clone(&pending));
        made.first_answer = Some(first_answer.clone());
        if let Some(container) = &made.container {
            context.live.offer(Arc::new(crate::live::DockerLive {
                docker: self.docker.clone(),
                container: container.clone(),
                watches: Arc::default(),
            }));
        }
        let mut tools: Vec<Arc<dyn Tool>> = Vec::with_capacity(2);
        if context.downloads.limit().is_some() {
            tools.push(Arc::new(crate::download_input::ReadDocumentTool {
                commands: commands.clone(),
                downloads: context.downloads.clone(),
                timeout: self.config.command_timeout,
                max_output_bytes: self.config.max_command_output_bytes,
            }));
        }
        let tool = tool::AgentBrowserTool {
            commands,
            start: tool::TaskStart::new(first_answer),
            context,
            pending,
            command_timeout: self.config.command_timeout,
            max_output_bytes: self.config.max_command_output_bytes,
            screenshots_taken: AtomicU64::new(0),
            secret_on_screen: AtomicBool::new(false),
            scope: made
                .proxy
                .as_ref()
                .map(airlock_proxy::EgressProxy::scope_handle),
        };
        tools.insert(0, Arc::new(tool));
        BrowserSession {
            tools,
            guide,
            prompt: self.config.guide.notes(),
            dispose: Box::new(made),
            warm,
        }
    }

    /// Launch Chromium on `about:blank`: the launch a task's first command would do.
    async fn launch_browser(&self, commands: &runner::Commands) -> Result<(), DriverError> {
        let command = [
            "agent-browser".to_owned(),
            "open".to_owned(),
            "about:blank".to_owned(),
        ];
        let result = commands
            .run(&command, None, self.config.command_timeout, 64 * 1024)
            .await
            .map_err(DockerError::GuideExec)?;
        if result.exit_code != 0 {
            return Err(DockerError::GuideFailed {
                stderr: String::from_utf8_lossy(&result.stderr).trim().to_owned(),
            }
            .into());
        }
        Ok(())
    }

    /// Whether the runtime lets Docker change a running container's CPU weight: runtimes on the
    /// host's kernel do. gVisor's runsc (the release Debian ships) has no `update` command, and it
    /// may be registered under any name, so under anything else a refill keeps the full weight
    /// (the freeze during Chromium's launch still applies).
    fn can_reweigh(&self) -> bool {
        crate::spec::on_host_kernel(&self.config.runtime)
    }

    /// Whether a warm session's container still runs. One inspect, a few milliseconds; an exec
    /// asking agent-browser cost 160–200 ms of every warm start and caught nothing more: when
    /// Chromium alone has died, agent-browser launches a fresh one at the task's first command.
    pub(crate) async fn alive(&self, container: &str) -> bool {
        self.docker
            .inspect_container(container, None)
            .await
            .is_ok_and(|info| {
                info.state
                    .is_some_and(|state| state.running == Some(true) && state.paused != Some(true))
            })
    }

    /// agent-browser's own guide, from the binary in the container, so it always matches it.
    /// The same command first waits (bounded) for the relay's ready file, which `airlock-relay`
    /// creates once it listens and holds its channel to the proxy: one command instead of two on
    /// every task's start, and the browser never starts before its one way out exists.
    async fn wait_for_relay_then(
        &self,
        commands: &runner::Commands,
        then: &str,
    ) -> Result<String, DriverError> {
        let script = format!(
            "tries=0; until [ -e {RELAY_READY_FILE} ]; do \
               tries=$((tries + 1)); \
               if [ $tries -gt 500 ]; then exit {RELAY_NOT_READY_EXIT}; fi; \
               sleep 0.02; \
             done; \
             {then}"
        );
        let command = ["sh".to_owned(), "-c".to_owned(), script];
        let result = commands
            .run(&command, None, Duration::from_secs(30), 512 * 1024)
            .await
            .map_err(DockerError::GuideExec)?;
        match result.exit_code {
            0 => Ok(String::from_utf8_lossy(&result.stdout).into_owned()),
            RELAY_NOT_READY_EXIT => Err(DockerError::RelayNotReady.into()),
            _ => Err(DockerError::GuideFailed {
                stderr: String::from_utf8_lossy(&result.stderr).trim().to_owned(),
            }
            .into()),
        }
    }
}

/// After the relay is ready: print agent-browser's guide (an agent-browser session).
const AFTER_RELAY_GUIDE: &str = "exec agent-browser skills get core";
/// After the relay is ready: nothing (a CDP session starts its Chromium by its own exec; an
/// agent-browser session with the short guide needs nothing from the binary before its task).
const AFTER_RELAY_NOTHING: &str = "exit 0";

/// Created by `airlock-relay` in the container once the browser's way out exists.
const RELAY_READY_FILE: &str = "/tmp/.airlock-relay-ready";
/// The start-up exec's exit code when the relay never became ready (distinct from agent-browser's).
const RELAY_NOT_READY_EXIT: i64 = 97;

/// Exits 0 when Chromium's browser process runs in the container (a process named `chromium`
/// without `--type=`, which its renderers, zygotes and utilities carry).
const BROWSER_RUNS: &str = "for p in $(pgrep -x chromium); do \
      grep -qa -- --type= /proc/$p/cmdline 2>/dev/null || exit 0; \
    done; exit 1";

/// A task id unique on this host: time, pid and a counter.
fn task_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = TASK_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:x}{:x}{count:x}",
        nanos & 0xffff_ffff_ffff,
        std::process::id()
    )
}

/// A warm session's making yields (within its patience) to tasks' first answers; a cold one
/// yields to nobody.
async fn yield_to_first_answers(pool: Option<Yield<'_>>) {
    if let Some(patience) = pool {
        patience.to_first_answers().await;
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt as _;

    use super::*;
    use crate::testing::docker;

    /// With the real daemon: a start abandoned while Docker creates its container (a CDP client
    /// that leaves at that moment) leaves no container behind.
    #[tokio::test]
    async fn a_start_abandoned_while_its_container_is_created_leaves_nothing() {
        if !airlock_testkit::docker::docker_ready() {
            return;
        }
        let docker = docker().await;
        let maker = Maker {
            docker: docker.clone(),
            config: DriverConfig {
                image: airlock_testkit::docker::image(),
                ..DriverConfig::default()
            },
            owner: owner::this_process(),
            user: crate::current_user(),
            failed_removals: Arc::default(),
            unasked: std::sync::atomic::AtomicU64::default(),
        };
        let label = format!("{}={}", crate::spec::LABEL_OWNER, maker.owner);
        let filters = std::collections::HashMap::from([
            ("label", vec![label.as_str()]),
            ("event", vec!["create"]),
        ]);
        let options = bollard::query_parameters::EventsOptionsBuilder::default()
            .filters(&filters)
            .build();
        let mut created = docker.events(Some(options));
        let since = std::time::SystemTime::now();
        let mut prepare = Box::pin(maker.prepare(
            Duration::from_secs(60),
            None,
            Kind::AgentBrowser,
            Vec::new(),
        ));
        // Run the start until Docker has made its container, then abandon it there.
        let name = tokio::select! {
            done = &mut prepare => panic!("the start finished first: {:?}", done.err()),
            event = created.next() => event.unwrap().unwrap().actor.unwrap().attributes.unwrap()["name"].clone(),
        };
        drop(prepare);
        let removed = tokio::task::spawn_blocking(move || {
            airlock_testkit::docker::wait_until_removed(&name, since, Duration::from_secs(30))
        });
        assert!(
            removed.await.unwrap(),
            "the abandoned start's container is still there"
        );
    }
}
