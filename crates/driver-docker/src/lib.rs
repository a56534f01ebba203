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

mod ca;
mod cdp;
mod config;
mod demand;
mod destinations;
mod download_input;
mod error;
mod exec;
mod exec_socket;
mod guide;
mod heartbeat;
mod host;
mod image_age;
mod live;
mod orphans;
mod owner;
mod pool;
mod refill_wait;
mod runner;
mod secret_input;
mod session;
mod session_state;
mod spec;
mod sync;
mod teardown;
#[cfg(test)]
mod testing;
mod tool;
mod touch;
mod unseen_egress;
mod upload_input;
mod weight;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::Scope;
use airlock_worker::{BoxFuture, BrowserDriver, BrowserSession, DriverError, TaskContext};
use bollard::Docker;
use tokio_util::sync::CancellationToken;

pub use cdp::{CdpBrowser, CdpError, MAX_BROWSER_MESSAGE_BYTES};
pub use config::{DEFAULT_COMMAND_TIMEOUT, DriverConfig, PoolConfig, default_image};
pub use error::DockerError;
pub use exec::ExecError;
pub use guide::{Guide, UnknownGuide};
pub use host::{CONTAINER_USER, current_user};
pub use image_age::{
    ImageAge, LABEL_BUILT, LABEL_CHROMIUM, STALE_AFTER, host_apt_chromium, is_older_version,
};
pub use pool::PoolClaims;
pub use spec::{ContainerOptions, Resources, SECCOMP_PROFILE, container_spec, relay_mode};
pub use tool::{AgentBrowserInput, TOOL_NAME};

use host::{refuse_root, user_namespaces};
use session::{Kind, Maker};
use teardown::remove_container;

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
    /// This replica's heartbeat, when the engine named it (`AIRLOCK_OWNER`).
    _heartbeat: Option<heartbeat::Heartbeat>,
}

impl std::fmt::Debug for DockerDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerDriver")
            .field("image", &self.config.image)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// How long one Docker call may take on a configured socket: bollard's own default for the
/// default socket.
const DOCKER_TIMEOUT_SECS: u64 = 120;

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
        let docker = match &config.docker_socket {
            Some(socket) => Docker::connect_with_unix(
                &socket.to_string_lossy(),
                DOCKER_TIMEOUT_SECS,
                bollard::API_DEFAULT_VERSION,
            ),
            None => Docker::connect_with_unix_defaults(),
        }
        .map_err(DockerError::Unreachable)?
        .negotiate_version()
        .await
        .map_err(DockerError::NotAnswering)?;
        let user = config.user.unwrap_or(CONTAINER_USER);
        // Before anything is made: a successor must never see this replica's containers without
        // its heartbeat.
        let heartbeat = match owner::own_heartbeat() {
            Some(instance) => {
                let dir = heartbeat::default_dir();
                Some(
                    heartbeat::Heartbeat::start(&dir, &instance)
                        .map_err(|source| DockerError::Heartbeat { path: dir, source })?,
                )
            }
            None => None,
        };
        let failed_removals: Arc<Mutex<Vec<String>>> = Arc::default();
        let maker = Arc::new(Maker {
            docker: docker.clone(),
            config: config.clone(),
            owner: owner::this_process(),
            user,
            failed_removals: Arc::clone(&failed_removals),
            unasked: std::sync::atomic::AtomicU64::new(0),
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
            _heartbeat: heartbeat,
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

    /// Remove the warm pool's sessions, and retry removals that failed during dispose. Call
    /// before the program exits.
    pub async fn shutdown(&self) {
        for pool in [self.pool.get(), self.cdp_pool.get()].into_iter().flatten() {
            pool.shutdown().await;
        }
        let pending: Vec<String> = std::mem::take(&mut *sync::lock(&self.failed_removals));
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
        // An unknown route is the caller's mistake: refused before any container is made.
        if let Some(name) = &context.route {
            self.config.routes.named(name).map_err(DockerError::Route)?;
        }
        // A warm browser's container outlives the pool's task time only: a session that may last
        // longer (a `--direct` one) starts cold. So does one whose locale or time zone its
        // browser must launch with (a warm one launched with the defaults).
        let need = context.limits.timeout + context.human_wait;
        let pool = self
            .pool
            .get()
            .filter(|_| need <= self.config.pool.task_timeout && !context.browser.needs_launch());
        if let Some(pool) = pool
            && let Some(prepared) = pool.take().await
        {
            let prepared = self.with_route(prepared, context.route.as_deref()).await?;
            let prepared = self.with_browser_settings(prepared, &context).await?;
            let prepared = self.with_state(prepared, &context).await?;
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
        // The task's time stands still while it waits for a person: the browser outlives both.
        let lifetime = context.limits.timeout + context.human_wait + self.config.lifetime_grace;
        let mut prepared = self
            .maker
            .prepare(
                lifetime,
                None,
                Kind::AgentBrowser,
                context.browser.launch_env(),
            )
            .await?;
        prepared.first_answer = first_answer.disarm();
        let prepared = self.with_route(prepared, context.route.as_deref()).await?;
        let prepared = self.with_browser_settings(prepared, &context).await?;
        let prepared = self.with_state(prepared, &context).await?;
        Ok(self.maker.bind(prepared, context, false))
    }

    /// The session leaving by the task's route from here on (removed if that fails), before
    /// its state loads or its first command runs.
    async fn with_route(
        &self,
        prepared: session::Prepared,
        route: Option<&str>,
    ) -> Result<session::Prepared, DriverError> {
        match prepared.choose_route(route) {
            Ok(()) => Ok(prepared),
            Err(error) => {
                prepared.dispose(&self.maker.unasked).await;
                Err(error.into())
            }
        }
    }

    /// The session's browser set as the task asked (removed if that fails), before its state
    /// loads: agent-browser's `set` commands hold for the tabs opened later too, and so does a
    /// device's touch, which the session holds (`touch`).
    async fn with_browser_settings(
        &self,
        mut prepared: session::Prepared,
        context: &TaskContext,
    ) -> Result<session::Prepared, DriverError> {
        let commands = prepared.commands().clone();
        let commands = runner::DriverCommands {
            commands: &commands,
            timeout: self.config.command_timeout,
        };
        for command in context.browser.set_commands() {
            if let Err(why) = commands.run(&command, None).await {
                prepared.dispose(&self.maker.unasked).await;
                return Err(DockerError::BrowserSettings {
                    setting: command[1..].join(" "),
                    why,
                }
                .into());
            }
        }
        if context.browser.device.is_some() {
            let touch = async {
                let cdp_url = commands.agent_browser(&["get", "cdp-url"], None).await?;
                touch::hold(
                    &self.docker,
                    &prepared.name,
                    &cdp_url,
                    self.config.command_timeout,
                )
                .await
            };
            match touch.await {
                Ok(touch) => prepared.hold_touch(touch),
                Err(why) => {
                    prepared.dispose(&self.maker.unasked).await;
                    return Err(DockerError::BrowserSettings {
                        setting: "touch".to_owned(),
                        why,
                    }
                    .into());
                }
            }
        }
        Ok(prepared)
    }

    /// The session with the task's starting state loaded and its files placed (removed if that
    /// fails).
    async fn with_state(
        &self,
        prepared: session::Prepared,
        context: &TaskContext,
    ) -> Result<session::Prepared, DriverError> {
        // Loading the state is the task's own doing, whatever requests it makes.
        prepared.hand_over(&self.maker.unasked);
        let timeout = self.config.command_timeout;
        // A clone, so the future holds no borrow of the session (whose CDP pipe is not `Sync`).
        let commands = prepared.commands().clone();
        let placed = async {
            if let Some(state) = &context.state_in {
                session_state::load(&commands, state, timeout).await?;
            }
            upload_input::place(&commands, &context.uploads, timeout).await
        };
        match placed.await {
            Ok(()) => Ok(prepared),
            Err(error) => {
                prepared.dispose(&self.maker.unasked).await;
                Err(error.into())
            }
        }
    }

    /// A sealed browser for one CDP client, for at most `lease` (its container exits by itself a
    /// little after that even if nobody removes it), reaching only `scope` by the route `route`
    /// (`None`: the operator's default). From the warm CDP
    /// pool when one is ready.
    pub async fn start_cdp(
        &self,
        lease: Duration,
        scope: Scope,
        route: Option<&str>,
    ) -> Result<CdpBrowser, DriverError> {
        refuse_root(current_user().0, self.user.0)?;
        if let Some(name) = route {
            self.config.routes.named(name).map_err(DockerError::Route)?;
        }
        if let Some(pool) = self.cdp_pool.get()
            && lease <= self.config.pool.cdp_lease
            && let Some(prepared) = pool.take().await
        {
            let prepared = self.with_route(prepared, route).await?;
            return Ok(prepared.into_cdp(true, scope, &self.maker.unasked));
        }
        let lifetime = lease + self.config.lifetime_grace;
        let prepared = self
            .maker
            .prepare(lifetime, None, Kind::Cdp, Vec::new())
            .await?;
        let prepared = self.with_route(prepared, route).await?;
        Ok(prepared.into_cdp(false, scope, &self.maker.unasked))
    }

    /// Start keeping `config.pool.size` (to `max_size`) browsers warm (nothing if both are 0,
    /// or if already started). Call after [`BrowserDriver::check`] passed, so a pool is never
    /// filled on a setup that cannot run tasks; [`DockerDriver::shutdown`] removes what it holds.
    pub fn start_pool(&self) -> Result<(), DriverError> {
        let pool = self.config.pool;
        let sizes = (pool.size, pool.max_size.max(pool.size));
        for (sizes, lease, kind, slot) in [
            (sizes, pool.task_timeout, Kind::AgentBrowser, &self.pool),
            (
                (pool.cdp_size, pool.cdp_size),
                pool.cdp_lease,
                Kind::Cdp,
                &self.cdp_pool,
            ),
        ] {
            if sizes.1 == 0 || slot.get().is_some() {
                continue;
            }
            refuse_root(current_user().0, self.user.0)?;
            let lifetime = pool.max_age + lease + self.config.lifetime_grace;
            let _ = slot.set(pool::Pool::start(
                Arc::clone(&self.maker),
                demand::Demand::new(sizes.0, sizes.1, pool.demand_window),
                pool.max_age,
                lifetime,
                kind,
            ));
        }
        Ok(())
    }

    /// Requests browsers made before a task or client took them, since the driver connected:
    /// Chromium's own traffic, which no page asked for (each is also logged as a warning). With
    /// the image's policy and flags it stays 0.
    pub fn unasked_requests(&self) -> u64 {
        self.maker
            .unasked
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Warm sessions ready now (0 without a pool).
    pub fn warm_sessions(&self) -> usize {
        self.pool.get().map_or(0, pool::Pool::ready_count)
    }

    /// Warm sessions the pool means to hold now, from the tasks it has seen (0 without a pool).
    pub fn pool_target(&self) -> usize {
        self.pool.get().map_or(0, pool::Pool::target)
    }

    /// How tasks have started: with a warm session, with the one a refill under way was making
    /// (the pool was empty), or cold (all 0 without a pool).
    pub fn pool_claims(&self) -> PoolClaims {
        self.pool
            .get()
            .map_or_else(PoolClaims::default, pool::Pool::claims)
    }

    /// How long the warm pool's refills have waited, or stayed frozen, for tasks' first answers
    /// since the driver connected (zero without a pool): what keeping a refill off a running
    /// task's first page load has cost the pool in making time.
    pub fn pool_refill_held(&self) -> std::time::Duration {
        self.pool
            .get()
            .map_or(std::time::Duration::ZERO, pool::Pool::refill_held)
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
    /// The image's Chromium and build date, from the labels `cargo xtask image` writes.
    pub async fn image_age(&self) -> Result<ImageAge, DriverError> {
        let image = &self.config.image;
        let inspected =
            self.docker
                .inspect_image(image)
                .await
                .map_err(|_| DockerError::ImageMissing {
                    image: image.clone(),
                })?;
        let labels = inspected
            .config
            .and_then(|config| config.labels)
            .unwrap_or_default();
        Ok(ImageAge::from_labels(image, &labels))
    }

    async fn check_runtime(&self) -> Result<(), DriverError> {
        let runtime = &self.config.runtime;
        let info = self
            .docker
            .info()
            .await
            .map_err(DockerError::NotAnswering)?;
        let runtimes = info.runtimes.unwrap_or_default();
        let Some(registered) = runtimes.get(runtime) else {
            let mut offered: Vec<&str> = runtimes.keys().map(String::as_str).collect();
            offered.sort_unstable();
            return Err(DockerError::RuntimeMissing {
                runtime: runtime.clone(),
                offered: offered.join(", "),
            }
            .into());
        };
        // runsc keeps host Unix sockets out of the sandbox unless told otherwise; the copying
        // relay must connect to proxy.sock. Known by its program, whatever name it has here.
        let args = registered.runtime_args.as_deref().unwrap_or_default();
        if spec::is_gvisor(runtime, registered.path.as_deref())
            && !args
                .iter()
                .any(|arg| matches!(arg.as_str(), "--host-uds=open" | "--host-uds=all"))
        {
            return Err(DockerError::RunscCannotReachProxy {
                runtime: runtime.clone(),
            }
            .into());
        }
        Ok(())
    }
}

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
