//! What every benchmark section runs on: the processes it starts (ended with it), ports and paths
//! to wait for, and agent-browser with the image's Chromium flags.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Processes the bench started, ended when it ends (or fails).
#[derive(Default)]
pub(super) struct Children(pub(super) Vec<Child>);

impl Children {
    /// End every child with SIGTERM (so servers drain and remove what they made), and wait.
    pub(super) fn terminate(&mut self) {
        for child in &mut self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
        self.0.clear();
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(super) use crate::util::free_port;

/// Wait (bounded) until something accepts connections on the port.
pub(super) fn wait_for_port(port: u16, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    // A connection whose two ends are one socket (the kernel may give the probe the port it
    // probes) means nothing listens yet.
    let listening = || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok_and(|stream| stream.local_addr().ok() != stream.peer_addr().ok())
    };
    while !listening() {
        if Instant::now() > deadline {
            bail!("{what} did not listen on port {port} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Wait (bounded) until a file exists, such as a socket a child process creates.
pub(super) fn wait_for_path(path: &Path, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if Instant::now() > deadline {
            bail!("{what} did not appear at {} within 10 s", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Start tinyproxy on a free port (room for the 256-client micro-benchmark), ended with `children`.
/// The directory of the proxies' sockets, made and given to the test user.
pub(super) fn proxies_dir(root: &Path) -> anyhow::Result<std::path::PathBuf> {
    let dir = root.join("target/bench/proxies");
    fs::create_dir_all(&dir)?;
    crate::util::run_loud(
        Command::new("chown")
            .arg(crate::integration::TEST_USER)
            .arg(&dir),
    )?;
    Ok(dir)
}

/// `airlock` as the test user. Started as root it gives root up for `nobody`, who may not write
/// the bench's directories; and it is started as that user itself, not under `runuser`, so its
/// pid is the process to measure.
pub(super) fn airlock_as_test_user(root: &Path) -> anyhow::Result<Command> {
    use std::os::unix::process::CommandExt as _;
    let id = |flag: &str| -> anyhow::Result<u32> {
        Ok(
            crate::util::output(Command::new("id").args([flag, crate::integration::TEST_USER]))?
                .trim()
                .parse()?,
        )
    };
    let mut command = Command::new(root.join("target/release/airlock"));
    command.uid(id("-u")?).gid(id("-g")?);
    Ok(command)
}

pub(super) fn start_tinyproxy(conf: &Path, children: &mut Children) -> anyhow::Result<u16> {
    let port = free_port()?;
    // A section run alone (`--only proxy-micro`) comes before any other made this directory.
    if let Some(dir) = conf.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(
        conf,
        format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 60\nMaxClients 1024\nAllow 127.0.0.1\nLogLevel Critical\n"
        ),
    )?;
    children.0.push(
        Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    Ok(port)
}

/// Flags the image gives Chromium, so the host baseline runs the same browser settings.
const CHROMIUM_ARGS: &str = "--no-sandbox,--disable-gpu,--disable-dev-shm-usage,--no-first-run,--disable-background-networking,--disable-component-update,--disable-sync,--disable-default-apps,--no-startup-window";

pub(super) fn agent_browser_command(binary: &Path, session: &str, proxy: Option<&str>) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["--session", session])
        .env("AGENT_BROWSER_EXECUTABLE_PATH", "/usr/bin/chromium")
        .env("AGENT_BROWSER_ARGS", CHROMIUM_ARGS)
        .env("AGENT_BROWSER_NO_VERSION_CHECK", "1")
        .env(
            "AGENT_BROWSER_SKILLS_DIR",
            binary
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("."))
                .join("skill-data"),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(proxy) = proxy {
        command
            .env("AGENT_BROWSER_PROXY", proxy)
            .env("AGENT_BROWSER_PROXY_BYPASS", "<-loopback>");
    }
    command
}

pub(super) fn timed(command: &mut Command) -> anyhow::Result<f64> {
    let began = Instant::now();
    let status = command.status()?;
    if !status.success() {
        bail!("benchmark command failed ({status})");
    }
    Ok(began.elapsed().as_secs_f64() * 1000.0)
}

/// Run a setup command, showing its output only if it fails.
pub(super) fn run_quiet(command: &mut Command) -> anyhow::Result<()> {
    let out = command
        .output()
        .with_context(|| format!("starting {}", crate::util::display(command)))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            crate::util::display(command),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
