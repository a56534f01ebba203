//! Airlock's Docker driver: one sealed container per browser task.
//!
//! For each task the driver makes a private socket directory, starts the task's egress proxy in
//! it, and starts a container with no network whose only way out is that socket (bind-mounted
//! read-only at `/egress`). The worker gets one tool, `agent_browser`, which runs agent-browser in
//! the container by exec (never through a shell) after the command policy allowed it. Disposing the
//! session removes the container, stops the proxy and removes the directory; containers whose
//! owner died are removed the next time a driver starts, or by `airlock cleanup`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), airlock_worker::DriverError> {
//! use airlock_driver_docker::{DockerDriver, DriverConfig};
//! use airlock_worker::BrowserDriver;
//!
//! let driver = DockerDriver::connect(DriverConfig::default()).await?;
//! driver.check().await?; // names the fix when Docker, the image or the user is wrong
//! # Ok(()) }
//! ```

mod cdp;
mod error;
mod exec;
mod owner;
mod pool;
mod runner;
mod spec;
#[cfg(test)]
mod testing;
mod tool;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_policy::EgressPolicy;
use airlock_proxy::{EgressProxy, ProxyConfig};
use airlock_worker::{
    BoxFuture, BrowserDriver, BrowserSession, Dispose, DriverError, TaskContext, Tool,
};
use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use tokio_util::sync::CancellationToken;

pub use cdp::{CdpBrowser, CdpError, MAX_BROWSER_MESSAGE_BYTES};
pub use error::DockerError;
pub use exec::ExecError;
pub use spec::{ContainerOptions, Resources, SECCOMP_PROFILE, container_spec, relay_mode};
use spec::{LABEL_OWNER, LABEL_TASK};
pub use tool::{AgentBrowserInput, TOOL_NAME};

/// The image tag this version of Airlock expects.
pub fn default_image() -> String {
    format!("airlock-browser:{}", env!("CARGO_PKG_VERSION"))
}

/// How the driver runs tasks.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The browser image.
    pub image: String,
    /// Where the browser may go.
    pub egress: EgressPolicy,
    /// The proxy's limits.
    pub proxy_limits: airlock_proxy::ProxyLimits,
    /// Nameservers for the proxy; empty means the system's.
    pub nameservers: Vec<SocketAddr>,
    /// Container limits.
    pub resources: Resources,
    /// The longest one agent-browser command may run.
    pub command_timeout: Duration,
    /// The most output bytes kept from one command. Large enough for the snapshot of a heavy
    /// page (peers report 540 KB); the worker sees a preview and pages the rest.
    pub max_command_output_bytes: usize,
    /// The uid:gid containers run as; `None` uses this process's.
    pub user: Option<(u32, u32)>,
    /// How long a container outlives its task's time limit before it exits by itself.
    pub lifetime_grace: Duration,
    /// Chromium's own sandbox. Off only by the user's explicit, logged `--no-browser-sandbox`.
    pub browser_sandbox: bool,
    /// The OCI runtime: `runc` (Docker's default), or `runsc` to run the container under
    /// gVisor's user-space kernel. The daemon must offer it (`check()` says how).
    pub runtime: String,
    /// Sealed browsers kept ready before tasks ask for them.
    pub pool: PoolConfig,
}

/// The warm pool: how many sealed browsers wait, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Sessions kept ready; 0 for none (every task starts cold).
    pub size: usize,
    /// A warm session older than this is replaced.
    pub max_age: Duration,
    /// The longest task a warm session may serve (the task time limit), so its container's own
    /// lifetime covers waiting and the task.
    pub task_timeout: Duration,
    /// CDP browsers kept ready for `airlock serve`'s /cdp and `airlock cdp`; 0 for none.
    pub cdp_size: usize,
    /// The longest CDP lease a warm CDP browser may serve.
    pub cdp_lease: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            size: 0,
            max_age: Duration::from_secs(600),
            task_timeout: Duration::from_secs(300),
            cdp_size: 0,
            cdp_lease: Duration::from_secs(900),
        }
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            image: default_image(),
            egress: EgressPolicy::default(),
            proxy_limits: airlock_proxy::ProxyLimits::default(),
            nameservers: Vec::new(),
            resources: Resources::default(),
            command_timeout: Duration::from_secs(30),
            max_command_output_bytes: 2 * 1024 * 1024,
            user: None,
            lifetime_grace: Duration::from_secs(60),
            browser_sandbox: true,
            runtime: "runc".to_owned(),
            pool: PoolConfig::default(),
        }
    }
}

/// The command that builds the image, quoted when it is missing.
pub(crate) const BUILD_COMMAND: &str = "cargo xtask image";

/// Runs each task in its own sealed container.
pub struct DockerDriver {
    docker: Docker,
    config: DriverConfig,
    user: (u32, u32),
    /// Containers whose removal failed, retried at [`DockerDriver::shutdown`].
    failed_removals: Arc<Mutex<Vec<String>>>,
    /// Orphans removed when the driver connected.
    removed_orphans: Vec<String>,
    /// Proxy directories of dead owners removed when the driver connected.
    removed_egress_dirs: Vec<PathBuf>,
    /// Makes sessions, for tasks and for the pool.
    maker: Arc<Maker>,
    /// Warm sessions, once [`DockerDriver::start_pool`] ran with `config.pool.size` > 0.
    pool: std::sync::OnceLock<pool::Pool>,
    /// Warm CDP browsers, once [`DockerDriver::start_pool`] ran with `config.pool.cdp_size` > 0.
    cdp_pool: std::sync::OnceLock<pool::Pool>,
}

impl std::fmt::Debug for DockerDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerDriver")
            .field("image", &self.config.image)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

static TASK_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DockerDriver {
    /// Connect to the local daemon (`DOCKER_HOST` if it is a unix socket, else the default) and
    /// agree on an API version. Remote daemons are refused: the proxy socket must be on the host
    /// that runs the container. Orphaned task containers are removed.
    pub async fn connect(config: DriverConfig) -> Result<Self, DriverError> {
        if let Ok(host) = std::env::var("DOCKER_HOST")
            && !host.is_empty()
            && !host.starts_with("unix://")
        {
            return Err(DockerError::RemoteDaemon { host }.into());
        }
        let docker = Docker::connect_with_unix_defaults()
            .map_err(DockerError::Unreachable)?
            .negotiate_version()
            .await
            .map_err(DockerError::NotAnswering)?;
        let user = config.user.unwrap_or_else(current_user);
        let failed_removals: Arc<Mutex<Vec<String>>> = Arc::default();
        let maker = Arc::new(Maker {
            docker: docker.clone(),
            config: config.clone(),
            owner: owner::this_process(),
            user,
            failed_removals: Arc::clone(&failed_removals),
        });
        let mut driver = Self {
            docker,
            config,
            user,
            failed_removals,
            removed_orphans: Vec::new(),
            removed_egress_dirs: Vec::new(),
            maker,
            pool: std::sync::OnceLock::new(),
            cdp_pool: std::sync::OnceLock::new(),
        };
        match driver.cleanup_orphans().await {
            Ok(removed) => {
                if !removed.is_empty() {
                    tracing::info!(?removed, "removed task containers whose owner is gone");
                }
                driver.removed_orphans = removed;
            }
            Err(error) => tracing::warn!(%error, "could not look for orphaned task containers"),
        }
        driver.removed_egress_dirs = driver
            .remove_orphaned_egress_dirs(&std::env::temp_dir())
            .await;
        if !driver.removed_egress_dirs.is_empty() {
            tracing::info!(removed = ?driver.removed_egress_dirs, "removed proxy directories whose owner is gone");
        }
        Ok(driver)
    }

    /// The Docker client, for callers that inspect what the driver made.
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The orphaned task containers removed when this driver connected.
    pub fn removed_orphans(&self) -> &[String] {
        &self.removed_orphans
    }

    /// The proxy directories of dead owners removed when this driver connected.
    pub fn removed_egress_dirs(&self) -> &[PathBuf] {
        &self.removed_egress_dirs
    }

    /// The configuration.
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// Remove task containers whose owning process is gone. Returns their names.
    pub async fn cleanup_orphans(&self) -> Result<Vec<String>, DriverError> {
        let filters =
            std::collections::HashMap::from([("label".to_owned(), vec![LABEL_TASK.to_owned()])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(DockerError::ListContainers)?;
        let mut removed = Vec::new();
        for container in containers {
            let labels = container.labels.unwrap_or_default();
            let owner = labels.get(LABEL_OWNER).map_or("", String::as_str);
            if !self.owner_gone(owner::liveness(owner)).await {
                continue;
            }
            let Some(id) = container.id else { continue };
            let name = container
                .names
                .and_then(|names| names.first().cloned())
                .unwrap_or_else(|| id.clone());
            if remove_container(&self.docker, &id).await {
                removed.push(name.trim_start_matches('/').to_owned());
            }
        }
        Ok(removed)
    }

    /// Whether an owner is gone: asked of Docker when it ran in another container (another
    /// replica on this daemon), whose processes this one cannot see.
    async fn owner_gone(&self, liveness: owner::Liveness) -> bool {
        match liveness {
            owner::Liveness::Gone => true,
            owner::Liveness::Alive | owner::Liveness::Unknown => false,
            owner::Liveness::InContainer(container) => {
                match self.docker.inspect_container(&container, None).await {
                    Ok(info) => info.state.and_then(|state| state.running) != Some(true),
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404,
                        ..
                    }) => true,
                    // Unsure: leave it; the container's own lifetime still ends it.
                    Err(_) => false,
                }
            }
        }
    }

    /// Remove the proxy directories in `parent` whose owning process is gone (a host killed with
    /// SIGKILL never ran its proxy's cleanup). Only directories of this user whose name carries an
    /// owner tag are considered; symlinks are never followed. Returns what was removed.
    async fn remove_orphaned_egress_dirs(&self, parent: &Path) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        for (path, liveness) in tagged_egress_dirs(parent) {
            if !self.owner_gone(liveness).await {
                continue;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => removed.push(path),
                Err(error) => {
                    tracing::warn!(%error, path = %path.display(), "could not remove an orphaned proxy directory");
                }
            }
        }
        removed
    }

    /// Remove the warm pool's sessions, and retry removals that failed during dispose. Call
    /// before the program exits.
    pub async fn shutdown(&self) {
        for pool in [self.pool.get(), self.cdp_pool.get()].into_iter().flatten() {
            pool.shutdown().await;
        }
        let pending: Vec<String> = std::mem::take(
            &mut *self
                .failed_removals
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for name in pending {
            if !remove_container(&self.docker, &name).await {
                tracing::warn!(container = %name, "could not remove a task container; `airlock cleanup` will retry");
            }
        }
    }

    async fn start_session(&self, context: TaskContext) -> Result<BrowserSession, DriverError> {
        // Here as well as in `check()`: a library caller that skips the check still never runs a
        // task as root, on the host or in the container.
        refuse_root(current_user().0, self.user.0)?;
        let pool = self.pool.get();
        if let Some(pool) = pool
            && let Some(prepared) = pool.take().await
        {
            return Ok(self.maker.bind(prepared, context, true));
        }
        // The pool was empty: its refill yields to this cold start until its first answer, as it
        // does to a task that took a warm one (cancelled at that answer, or when the task ends).
        let first_answer = CancellationToken::new();
        if let Some(pool) = pool {
            pool.expect_first_answer(first_answer.clone());
        }
        // Cancelled if the start fails; handed to the session if it does not.
        let first_answer = first_answer.drop_guard();
        let lifetime = context.limits.timeout + self.config.lifetime_grace;
        let mut prepared = self
            .maker
            .prepare(lifetime, None, Kind::AgentBrowser)
            .await?;
        prepared.first_answer = first_answer.disarm();
        Ok(self.maker.bind(prepared, context, false))
    }

    /// A sealed browser for one CDP client, for at most `lease` (its container exits by itself a
    /// little after that even if nobody removes it). From the warm CDP pool when one is ready.
    pub async fn start_cdp(&self, lease: Duration) -> Result<CdpBrowser, DriverError> {
        refuse_root(current_user().0, self.user.0)?;
        if let Some(pool) = self.cdp_pool.get()
            && lease <= self.config.pool.cdp_lease
            && let Some(prepared) = pool.take().await
        {
            return Ok(prepared.into_cdp(true));
        }
        let lifetime = lease + self.config.lifetime_grace;
        let prepared = self.maker.prepare(lifetime, None, Kind::Cdp).await?;
        Ok(prepared.into_cdp(false))
    }

    /// Start keeping `config.pool.size` browsers warm (nothing if 0, or if already started). Call
    /// after [`BrowserDriver::check`] passed, so a pool is never filled on a setup that cannot
    /// run tasks; [`DockerDriver::shutdown`] removes what it holds.
    pub fn start_pool(&self) -> Result<(), DriverError> {
        let pool = self.config.pool;
        for (size, lease, kind, slot) in [
            (pool.size, pool.task_timeout, Kind::AgentBrowser, &self.pool),
            (pool.cdp_size, pool.cdp_lease, Kind::Cdp, &self.cdp_pool),
        ] {
            if size == 0 || slot.get().is_some() {
                continue;
            }
            refuse_root(current_user().0, self.user.0)?;
            let lifetime = pool.max_age + lease + self.config.lifetime_grace;
            let _ = slot.set(pool::Pool::start(
                Arc::clone(&self.maker),
                size,
                pool.max_age,
                lifetime,
                kind,
            ));
        }
        Ok(())
    }

    /// Warm sessions ready now (0 without a pool).
    pub fn warm_sessions(&self) -> usize {
        self.pool.get().map_or(0, pool::Pool::ready_count)
    }

    /// Warm CDP browsers ready now (0 without a CDP pool).
    pub fn warm_cdp_browsers(&self) -> usize {
        self.cdp_pool.get().map_or(0, pool::Pool::ready_count)
    }

    /// Why a pool could not make its last warm session, if it could not.
    pub fn pool_error(&self) -> Option<String> {
        [self.pool.get(), self.cdp_pool.get()]
            .into_iter()
            .flatten()
            .find_map(pool::Pool::last_error)
    }

    /// The runtimes the daemon offers, by name, with their extra arguments.
    pub async fn runtimes(&self) -> Result<Vec<(String, Vec<String>)>, DriverError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(DockerError::NotAnswering)?;
        let mut runtimes: Vec<(String, Vec<String>)> = info
            .runtimes
            .unwrap_or_default()
            .into_iter()
            .map(|(name, runtime)| (name, runtime.runtime_args.unwrap_or_default()))
            .collect();
        runtimes.sort();
        Ok(runtimes)
    }

    /// The configured runtime is offered by the daemon, and gVisor may reach the proxy's socket.
    async fn check_runtime(&self) -> Result<(), DriverError> {
        let runtime = &self.config.runtime;
        let runtimes = self.runtimes().await?;
        let Some((_, args)) = runtimes.iter().find(|(name, _)| name == runtime) else {
            return Err(DockerError::RuntimeMissing {
                runtime: runtime.clone(),
                offered: runtimes
                    .iter()
                    .map(|(name, _)| name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into());
        };
        // runsc keeps host Unix sockets out of the sandbox unless told otherwise; the copying
        // relay must connect to proxy.sock.
        if runtime == "runsc"
            && !args
                .iter()
                .any(|arg| matches!(arg.as_str(), "--host-uds=open" | "--host-uds=all"))
        {
            return Err(DockerError::RunscCannotReachProxy.into());
        }
        Ok(())
    }
}

/// What making a session needs, shared by the driver and its pool's filler.
pub(crate) struct Maker {
    docker: Docker,
    config: DriverConfig,
    owner: String,
    user: (u32, u32),
    failed_removals: Arc<Mutex<Vec<String>>>,
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
    name: String,
    guide: String,
    pending: tool::PendingRefusals,
    /// How the session's commands run (agent-browser sessions; a CDP session runs none).
    commands: runner::Commands,
    /// Cancelled once the task that takes this session has its first answer (and the command
    /// that follows it at once: `tool::TaskStart`), or has ended: the pool's refill waits for it.
    pub(crate) first_answer: CancellationToken,
    pipe: Option<cdp::Pipe>,
    pub(crate) made_at: std::time::Instant,
}

impl Prepared {
    /// Remove everything it holds.
    pub(crate) async fn dispose(mut self) {
        self.made.undo().await;
    }

    /// Whether its browser still answers: the container runs and, for CDP, Chromium answers a
    /// command.
    pub(crate) async fn answers(&mut self, maker: &Maker) -> bool {
        if !maker.alive(&self.name).await {
            return false;
        }
        match &mut self.pipe {
            Some(pipe) => pipe
                .wait_until_answering(maker.config.command_timeout)
                .await
                .is_ok(),
            None => true,
        }
    }

    /// Lease a CDP session to its client. What the proxy saw before (Chromium's start-up) is
    /// not the client's.
    fn into_cdp(self, warm: bool) -> CdpBrowser {
        let Self {
            made,
            name,
            pending,
            pipe,
            first_answer,
            ..
        } = self;
        // A CDP client's first page is its own business; the refill need not wait for it.
        first_answer.cancel();
        pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
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
        pool: Option<pool::Yield<'_>>,
        kind: Kind,
    ) -> Result<Prepared, DriverError> {
        let warm = pool.is_some();
        let yield_to_first_answers = || async move {
            if let Some(patience) = pool {
                patience.to_first_answers().await;
            }
        };
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
        };
        let name = options.name();
        // From here on, everything made is undone by the guard unless the session takes it over.
        let mut made = Made {
            docker: self.docker.clone(),
            container: None,
            proxy: Some(proxy),
            failed_removals: Arc::clone(&self.failed_removals),
            context: None,
            first_answer: None,
        };
        let create = CreateContainerOptionsBuilder::default().name(&name).build();
        self.docker
            .create_container(Some(create), container_spec(&options))
            .await
            .map_err(DockerError::CreateContainer)?;
        made.container = Some(name.clone());
        if warm {
            // Made beside a running task: it yields the CPU to it while its browser starts.
            self.set_cpu_weight(&name, BACKGROUND_CPU_SHARES).await?;
        }
        yield_to_first_answers().await;
        self.docker
            .start_container(&name, None)
            .await
            .map_err(DockerError::StartContainer)?;

        let (guide, commands, pipe) = match kind {
            Kind::AgentBrowser => {
                // One exec for the runner; every command after it is a process spawn inside.
                yield_to_first_answers().await;
                let runner = runner::Runner::launch(&self.docker, &name).await?;
                let commands = runner::Commands::new(
                    self.docker.clone(),
                    name.clone(),
                    Some(Arc::new(runner)),
                );
                yield_to_first_answers().await;
                let guide = self
                    .wait_for_relay_then(&commands, AFTER_RELAY_GUIDE)
                    .await?;
                if let Some(patience) = pool {
                    yield_to_first_answers().await;
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
                let mut pipe = cdp::Pipe::launch(&self.docker, &name).await?;
                pipe.wait_until_answering(self.config.command_timeout)
                    .await?;
                (String::new(), commands, Some(pipe))
            }
        };
        if warm {
            // Started, and idle until taken: its full weight back now, so the take that hands it
            // to a task (and which a task waits on) asks Docker for nothing more.
            self.set_cpu_weight(&name, TASK_CPU_SHARES).await?;
        }
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

    /// The session's own egress proxy, and where it puts the refusals the worker is told of.
    fn start_proxy(&self) -> Result<(EgressProxy, tool::PendingRefusals), DriverError> {
        let pending: tool::PendingRefusals = Arc::default();
        let sink = Arc::clone(&pending);
        let mut proxy_config = ProxyConfig::new(self.config.egress.clone())
            .with_dir_tag(owner::dir_tag())
            .with_limits(self.config.proxy_limits)
            .with_events(Arc::new(move |event| {
                // Refusals and failures are told to the worker; allowed requests are not news.
                if !matches!(event.outcome, airlock_proxy::Outcome::Allowed { .. }) {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(event);
                }
            }));
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
        // What the proxy saw before the task (Chromium's own start-up requests) is not the task's.
        let before: Vec<_> =
            std::mem::take(&mut *pending.lock().unwrap_or_else(PoisonError::into_inner));
        if !before.is_empty() {
            tracing::debug!(
                count = before.len(),
                "proxy events before the task took its session, not reported to it"
            );
        }
        made.context = Some(context.clone());
        made.first_answer = Some(first_answer.clone());
        let tool = tool::AgentBrowserTool {
            commands,
            start: tool::TaskStart::new(first_answer),
            context,
            pending,
            command_timeout: self.config.command_timeout,
            max_output_bytes: self.config.max_command_output_bytes,
            screenshots_taken: AtomicU64::new(0),
        };
        BrowserSession {
            tools: vec![Arc::new(tool) as Arc<dyn Tool>],
            guide,
            prompt: DRIVER_PROMPT.to_owned(),
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

    /// The container's CPU weight against other containers (Docker's default is 1024).
    pub(crate) async fn set_cpu_weight(
        &self,
        container: &str,
        shares: i64,
    ) -> Result<(), DriverError> {
        let update = bollard::models::ContainerUpdateBody {
            cpu_shares: Some(shares),
            ..Default::default()
        };
        self.docker
            .update_container(container, update)
            .await
            .map_err(|e| DockerError::UpdateContainer(e).into())
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

/// A refill's container, frozen with Docker's pause (the cgroup freezer) while a task waits for
/// its first answer.
struct Freezable<'a> {
    docker: &'a Docker,
    name: &'a str,
}

impl pool::Freeze for Freezable<'_> {
    async fn freeze(&self) -> Result<(), DriverError> {
        self.docker
            .pause_container(self.name)
            .await
            .map_err(|e| DockerError::PauseContainer(e).into())
    }

    async fn thaw(&self) -> Result<(), DriverError> {
        self.docker
            .unpause_container(self.name)
            .await
            .map_err(|e| DockerError::UnpauseContainer(e).into())
    }
}

/// A warm container's CPU weight while its browser starts: the lowest Docker takes, so starting
/// the next browser gets only the CPU the running tasks leave (at 128, an eighth of a task's, the
/// refill still slowed back-to-back tasks' page loads more).
const BACKGROUND_CPU_SHARES: i64 = 2;
/// Docker's default CPU weight, which a warm container gets back once its browser is up.
const TASK_CPU_SHARES: i64 = 1024;

/// After the relay is ready: print agent-browser's guide (an agent-browser session).
const AFTER_RELAY_GUIDE: &str = "exec agent-browser skills get core";
/// After the relay is ready: nothing (a CDP session starts its Chromium by its own exec).
const AFTER_RELAY_NOTHING: &str = "exit 0";

/// Created by `airlock-relay` in the container once the browser's way out exists.
const RELAY_READY_FILE: &str = "/tmp/.airlock-relay-ready";
/// The start-up exec's exit code when the relay never became ready (distinct from agent-browser's).
const RELAY_NOT_READY_EXIT: i64 = 97;

/// What the driver adds to agent-browser's guide.
const DRIVER_PROMPT: &str = "\
How to run the commands in the guide: call the `agent_browser` tool with the words after \
`agent-browser` as a list in `args`, one command per call. There is no shell: no quoting, no \
pipes, no `&&`, no redirection, no environment variables. For example, the guide's \
`agent-browser fill @e2 \"hello world\"` is {\"args\": [\"fill\", \"@e2\", \"hello world\"]}, and \
`cat script.js | agent-browser eval --stdin` is {\"args\": [\"eval\", \"--stdin\"], \"stdin\": \"<the script>\"}. \
Screenshots are shown to you and saved by the tool wherever it likes (any path you give is ignored); \
set `keep` to true to return one with your report. The browser is already set up: commands that \
change how it is launched, its proxy, its profile or files on disk are refused, and so are \
destinations that are not public. When a request is refused, the tool result says so. \
What you read fills your context, so ask for no more than you need: to read, `get text <selector>` \
gives an element's text without the tree around it (on long tables and link lists a third to a quarter \
of `snapshot`); `snapshot -i` lists only what you can click or fill; `snapshot -s <css selector>` \
scopes a snapshot to one part of the page. An output too long to show whole comes as a preview with an \
id: search it with `read_output` and `find`, or read on from an offset, instead of running the command \
again.";

impl BrowserDriver for DockerDriver {
    fn check(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(async move {
            refuse_root(current_user().0, self.user.0)?;
            if self.config.browser_sandbox {
                user_namespaces(&|path| std::fs::read_to_string(path).ok())?;
            }
            self.docker
                .ping()
                .await
                .map_err(DockerError::NotAnswering)?;
            self.check_runtime().await?;
            if self.docker.inspect_image(&self.config.image).await.is_err() {
                return Err(DockerError::ImageMissing {
                    image: self.config.image.clone(),
                }
                .into());
            }
            Ok(())
        })
    }

    fn start(&self, context: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>> {
        Box::pin(self.start_session(context))
    }
}

/// What a session made: removed on dispose, or by drop if the start never finished.
struct Made {
    docker: Docker,
    container: Option<String>,
    proxy: Option<EgressProxy>,
    failed_removals: Arc<Mutex<Vec<String>>>,
    /// Where the proxy's byte counts go when it stops (once a task has the session).
    context: Option<TaskContext>,
    /// The session's first-answer signal (once a task has it): an ended task has had its say.
    first_answer: Option<CancellationToken>,
}

impl Made {
    async fn undo(&mut self) {
        if let Some(first_answer) = &self.first_answer {
            first_answer.cancel();
        }
        if let (Some(proxy), Some(context)) = (&self.proxy, &self.context) {
            let stats = proxy.stats();
            context.record_egress_bytes(airlock_worker::EgressBytes {
                up: stats.bytes_up,
                down: stats.bytes_down,
            });
        }
        undo(
            self.docker.clone(),
            self.container.take(),
            self.proxy.take(),
            Arc::clone(&self.failed_removals),
        )
        .await;
    }
}

/// Remove the container (remembering a failure for retry) and stop the proxy.
async fn undo(
    docker: Docker,
    container: Option<String>,
    proxy: Option<EgressProxy>,
    failed_removals: Arc<Mutex<Vec<String>>>,
) {
    if let Some(name) = container
        && !remove_container(&docker, &name).await
    {
        tracing::warn!(container = %name, "could not remove a task container; will retry at shutdown");
        failed_removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(name);
    }
    if let Some(proxy) = proxy {
        proxy.stop().await;
    }
}

impl Dispose for Made {
    fn dispose(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.undo().await })
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        // A start that failed or was cancelled half-way: finish the undo on the runtime. If the
        // runtime is going away, the proxy's own drop still removes its directory, and the
        // container exits at the end of its lifetime (or `airlock cleanup` removes it).
        if (self.container.is_some() || self.proxy.is_some())
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(undo(
                self.docker.clone(),
                self.container.take(),
                self.proxy.take(),
                Arc::clone(&self.failed_removals),
            ));
        }
    }
}

/// Force-remove a container; a container that is already gone counts as removed.
async fn remove_container(docker: &Docker, name: &str) -> bool {
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    match docker.remove_container(name, Some(options)).await {
        // Gone already counts as removed, and so does a removal auto-remove already started.
        Ok(())
        | Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => true,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        }) if message.contains("already in progress") => true,
        Err(error) => {
            tracing::warn!(%error, container = %name, "removing a task container failed");
            false
        }
    }
}

/// The proxy directories in `parent` that carry an owner tag and belong to this user, with what
/// is known of their owner. Symlinks are never followed.
fn tagged_egress_dirs(parent: &Path) -> Vec<(PathBuf, owner::Liveness)> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let uid = current_user().0;
    entries
        .flatten()
        .filter_map(|entry| {
            let liveness = entry.file_name().to_str().and_then(owner::dir_owner)?;
            let path = entry.path();
            let ours = std::fs::symlink_metadata(&path).is_ok_and(|meta| {
                meta.is_dir() && std::os::unix::fs::MetadataExt::uid(&meta) == uid
            });
            ours.then_some((path, liveness))
        })
        .collect()
}

/// Whether the host lets an unprivileged process make a user namespace, as Chromium's sandbox
/// needs. `read` returns a `/proc/sys` file's text (tests pass their own).
fn user_namespaces(read: &dyn Fn(&str) -> Option<String>) -> Result<(), DockerError> {
    let value = |path: &str| read(path).and_then(|text| text.trim().parse::<u64>().ok());
    if value("/proc/sys/user/max_user_namespaces") == Some(0) {
        return Err(DockerError::NoUserNamespaces {
            why: "user.max_user_namespaces is 0".to_owned(),
            fix: "sysctl -w user.max_user_namespaces=15000",
        });
    }
    // Debian and Ubuntu kernels before 6.x had their own switch.
    if value("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
        return Err(DockerError::NoUserNamespaces {
            why: "kernel.unprivileged_userns_clone is 0".to_owned(),
            fix: "sysctl -w kernel.unprivileged_userns_clone=1",
        });
    }
    // Ubuntu 23.10 and later let only AppArmor-profiled programs make them.
    if value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) {
        return Err(DockerError::NoUserNamespaces {
            why: "kernel.apparmor_restrict_unprivileged_userns is 1".to_owned(),
            fix: "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or give dockerd's containers an AppArmor profile that allows userns)",
        });
    }
    Ok(())
}

/// Neither this process nor the container may run as uid 0.
fn refuse_root(process_uid: u32, container_uid: u32) -> Result<(), DockerError> {
    if process_uid == 0 {
        return Err(DockerError::RunningAsRoot);
    }
    if container_uid == 0 {
        return Err(DockerError::RootContainerUser);
    }
    Ok(())
}

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

/// This process's real uid and gid, from `/proc/self/status`.
pub fn current_user() -> (u32, u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|id| id.parse().ok())
            // Unknown means we cannot prove we are not root; treat it as root.
            .unwrap_or(0)
    };
    (field("Uid:"), field("Gid:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_refused_on_the_host_and_in_the_container() {
        assert!(matches!(
            refuse_root(0, 1000),
            Err(DockerError::RunningAsRoot)
        ));
        assert!(matches!(
            refuse_root(1000, 0),
            Err(DockerError::RootContainerUser)
        ));
        assert!(matches!(refuse_root(0, 0), Err(DockerError::RunningAsRoot)));
        assert!(refuse_root(1000, 1000).is_ok());
    }

    #[test]
    fn user_namespaces_are_checked_where_each_kernel_switches_them() {
        let host = |settings: &[(&'static str, &'static str)]| {
            let settings = settings.to_vec();
            move |path: &str| {
                settings
                    .iter()
                    .find(|(name, _)| *name == path)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        assert!(
            user_namespaces(&host(&[("/proc/sys/user/max_user_namespaces", "15000\n")])).is_ok()
        );
        assert!(
            user_namespaces(&host(&[])).is_ok(),
            "a kernel without the switches allows them"
        );
        for (setting, value) in [
            ("/proc/sys/user/max_user_namespaces", "0"),
            ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
            ),
        ] {
            let error = user_namespaces(&host(&[(setting, value)])).unwrap_err();
            let text = error.to_string();
            assert!(
                matches!(error, DockerError::NoUserNamespaces { .. }),
                "{setting}"
            );
            assert!(
                text.contains("sysctl -w") && text.contains("--no-browser-sandbox"),
                "{text}"
            );
        }
    }

    #[test]
    fn only_this_users_tagged_directories_are_judged() {
        let parent = tempfile::tempdir().unwrap();
        let boot = owner::dir_tag().get(1..9).unwrap().to_owned();
        // This process's pid with a start time it never had: that owner is gone.
        let dead = parent.path().join(format!(
            "airlock-egress-b{boot}p{}s1-dead01",
            std::process::id()
        ));
        let alive = parent
            .path()
            .join(format!("airlock-egress-{}-live01", owner::dir_tag()));
        let untagged = parent.path().join("airlock-egress-AbC123");
        for dir in [&dead, &alive, &untagged] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("proxy.sock"), "").unwrap();
        }
        // A link named like a dead owner's directory is not followed.
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("keep"), "").unwrap();
        let link = parent.path().join(format!(
            "airlock-egress-b{boot}p{}s1-link01",
            std::process::id()
        ));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();

        let mut judged = tagged_egress_dirs(parent.path());
        judged.sort();
        let mut expected = vec![
            (dead.clone(), owner::Liveness::Gone),
            (alive.clone(), owner::Liveness::Alive),
        ];
        expected.sort();
        assert_eq!(
            judged, expected,
            "an untagged directory or a link was judged"
        );
        assert!(target.path().join("keep").exists());
    }
}
