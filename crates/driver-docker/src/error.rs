//! Why the Docker driver cannot run tasks, or could not start one: one variant per condition,
//! each naming the fix. The worker sees it wrapped in its port's `DriverError`.

use airlock_proxy::ProxyError;

use crate::config::BUILD_COMMAND;
use crate::exec::ExecError;

/// What went wrong with Docker, the image, the user or a task's container.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// `DOCKER_HOST` names a daemon that is not a local unix socket.
    #[error(
        "DOCKER_HOST is {host}: Airlock needs the local Docker daemon (a unix:// socket), because the \
         browser's proxy socket must be on the machine that runs the container. Unset DOCKER_HOST or point it at unix:///var/run/docker.sock"
    )]
    RemoteDaemon {
        /// The value of `DOCKER_HOST`.
        host: String,
    },
    /// The Docker client could not be set up for the local socket.
    #[error(
        "cannot reach the Docker daemon: {0}. Install Docker (Debian: apt-get install docker.io) and start dockerd"
    )]
    Unreachable(#[source] bollard::errors::Error),
    /// The daemon's socket exists but nothing answers on it (or this user may not use it).
    #[error(
        "the Docker daemon does not answer: {0}. Start dockerd (or check that this user is in the docker group)"
    )]
    NotAnswering(#[source] bollard::errors::Error),
    /// This process runs as root.
    #[error(
        "Airlock does not run as root: run it as an ordinary user in the docker group (usermod -aG docker USER)"
    )]
    RunningAsRoot,
    /// The configured container user is uid 0.
    #[error(
        "the configured container user is uid 0: leave it unset (the default, uid 2000000000, owns nothing on the host)"
    )]
    RootContainerUser,
    /// The configured container user is this process's own uid.
    #[error(
        "the configured container user is uid {uid}, this process's own: a browser that escaped its container would own your files; leave it unset (the default, uid 2000000000, owns nothing on the host)"
    )]
    ContainerUserIsYours {
        /// This process's uid.
        uid: u32,
    },
    /// Chromium's sandbox is on but this kernel does not let an unprivileged process make a
    /// user namespace.
    #[error(
        "Chromium's sandbox needs unprivileged user namespaces, and this host refuses them ({why}): {fix}; or run with --no-browser-sandbox to go without Chromium's sandbox (logged)"
    )]
    NoUserNamespaces {
        /// Which setting refuses them.
        why: String,
        /// The command that allows them.
        fix: &'static str,
    },
    /// The configured runtime is not registered with the daemon.
    #[error(
        "the Docker daemon offers no runtime `{runtime}` (it offers {offered}): register it in /etc/docker/daemon.json, for gVisor {{\"runtimes\": {{\"runsc\": {{\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": [\"--network=none\", \"--host-uds=open\"]}}}}}}, then reload dockerd (kill -HUP); or use --runtime runc"
    )]
    RuntimeMissing {
        /// The runtime asked for.
        runtime: String,
        /// The ones the daemon offers.
        offered: String,
    },
    /// A gVisor runtime (runsc, under any name) is registered without access to host Unix sockets.
    #[error(
        "the runtime `{runtime}` is gVisor's runsc, registered without --host-uds=open, so the container cannot reach the egress proxy's socket: add \"--host-uds=open\" to its runtimeArgs in /etc/docker/daemon.json and reload dockerd (kill -HUP)"
    )]
    RunscCannotReachProxy {
        /// The runtime's name in the daemon.
        runtime: String,
    },
    /// The browser image is not in the daemon.
    #[error(
        "the image {image} is missing: build it with `{BUILD_COMMAND}` from an Airlock checkout"
    )]
    ImageMissing {
        /// The image tag looked for.
        image: String,
    },
    /// Listing task containers (for orphan cleanup) failed.
    #[error("listing containers failed: {0}; check that dockerd is running")]
    ListContainers(#[source] bollard::errors::Error),
    /// The task asked for a route the operator did not configure.
    #[error("the task's route: {0}")]
    Route(#[source] airlock_policy::RouteError),
    /// The task's egress proxy could not be set up or started.
    #[error("the egress proxy could not start: {0}")]
    Proxy(#[source] ProxyError),
    /// Docker refused to create the task container.
    #[error(
        "creating the task container failed: {0}; `docker info` shows whether the daemon is healthy"
    )]
    CreateContainer(#[source] bollard::errors::Error),
    /// The runtime ended while Docker created the container (the program is stopping).
    #[error(
        "creating the task container was interrupted because Airlock is stopping; start the task again"
    )]
    CreateInterrupted,
    /// `AIRLOCK_OWNER` names this replica, but its heartbeat file could not be written: a
    /// successor would take its live containers for orphans.
    #[error(
        "AIRLOCK_OWNER is set, so this replica keeps a heartbeat in {path}, which could not be written ({source}): make the state directory (TMPDIR) writable, or unset AIRLOCK_OWNER"
    )]
    Heartbeat {
        /// The heartbeat directory.
        path: std::path::PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// Docker could not start the task container.
    #[error(
        "starting the task container failed: {0}; `docker info` shows whether the daemon is healthy"
    )]
    StartContainer(#[source] bollard::errors::Error),
    /// A warm container's CPU weight could not be changed.
    #[error(
        "changing a warm container's CPU weight failed: {0}; `docker info` shows whether the daemon is healthy"
    )]
    UpdateContainer(#[source] bollard::errors::Error),
    /// A refill's container could not be frozen while a task waited for its first answer.
    #[error(
        "pausing a warm container failed: {0}; `docker info` shows whether the daemon is healthy (and whether its runtime supports pause)"
    )]
    PauseContainer(#[source] bollard::errors::Error),
    /// A refill's frozen container could not be let go on; the session is removed.
    #[error(
        "unpausing a warm container failed: {0}; `docker info` shows whether the daemon is healthy, and `airlock cleanup` removes the container"
    )]
    UnpauseContainer(#[source] bollard::errors::Error),
    /// The start-up exec (relay wait and guide) could not run.
    #[error("reading agent-browser's guide failed: {0}")]
    GuideExec(#[source] ExecError),
    /// The relay never marked itself ready.
    #[error(
        "the container's proxy relay did not start within 10 s; see `docker logs` of the task container"
    )]
    RelayNotReady,
    /// agent-browser could not print its guide.
    #[error(
        "`agent-browser skills get core` failed in the container: {stderr}; rebuild the image with `{BUILD_COMMAND}`"
    )]
    GuideFailed {
        /// What agent-browser printed on stderr.
        stderr: String,
    },
    /// The exec that starts the session's command runner could not be made or attached.
    #[error(
        "starting the command runner in the task container failed: {0}; `docker info` shows whether the daemon is healthy"
    )]
    RunnerExec(#[source] bollard::errors::Error),
    /// Docker started the runner's exec detached, so its answers cannot be read.
    #[error(
        "docker started the command runner detached, so its answers cannot be read; check the Docker daemon's version (20.10 or later)"
    )]
    RunnerDetached,
    /// The exec that starts a CDP browser could not be made or attached.
    #[error(
        "starting the CDP browser in its container failed: {0}; `docker info` shows whether the daemon is healthy"
    )]
    CdpExec(#[source] bollard::errors::Error),
    /// Docker started the CDP browser's exec detached, so its DevTools pipe cannot be reached.
    #[error(
        "docker started the CDP browser detached, so its DevTools pipe cannot be reached; check the Docker daemon's version (20.10 or later)"
    )]
    CdpDetached,
    /// Chromium exited before it answered its first command.
    #[error(
        "the CDP browser exited before it answered; its last words: {stderr}; rebuild the image with `{BUILD_COMMAND}`"
    )]
    CdpBrowserExited {
        /// The end of Chromium's stderr.
        stderr: String,
    },
    /// Chromium did not answer its first command in time.
    #[error(
        "the CDP browser did not answer within {seconds} s (a busy host? its last words: {stderr}); try again, or lower max_concurrent_tasks"
    )]
    CdpBrowserSilent {
        /// The wait.
        seconds: u64,
        /// The end of Chromium's stderr.
        stderr: String,
    },
    /// The starting session state could not be loaded into the browser.
    #[error(
        "loading the session state into the browser failed: {why}; give Playwright storageState JSON (cookies and origins) for the task's sites"
    )]
    StateLoad {
        /// What agent-browser said.
        why: String,
    },
    /// The task's browser settings could not be applied.
    #[error(
        "setting the task's browser ({setting}) failed: {why}; leave that setting out, or report this with the image's agent-browser version"
    )]
    BrowserSettings {
        /// The setting, as agent-browser's words.
        setting: String,
        /// What agent-browser said.
        why: String,
    },
    /// A caller's file could not be placed in the container.
    #[error("placing the file `{name}` in the browser's container failed: {why}")]
    PlaceFile {
        /// The file's name.
        name: String,
        /// What the container said.
        why: String,
    },
}

impl From<DockerError> for airlock_worker::DriverError {
    fn from(error: DockerError) -> Self {
        Self::new(error)
    }
}
