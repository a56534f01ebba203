//! README's front-door command from a state with no browser image, as `cargo xtask ci` proves it
//! before the tests: first as a user in the docker group (not root) with no Airlock image at all,
//! base included, so the base is built through mmdebstrap's unprivileged mode; then as root with
//! the browser image removed. Each must build what is missing and end with a lab page (reached
//! through an explicit `--allow`) seen through the seal. `airlock browse` alone, as a user from a
//! directory it does not own and through sudo, is `cargo xtask integration`'s front door.
//!
//! The user's proof is about the user's rights (the docker group, mmdebstrap's unprivileged
//! mode, a cargo home and data directory of their own), not about compiling the same crates a
//! second time on the same machine, which took CI a quarter of an hour. So when root's cargo home
//! is one the user can reach (CI puts it in `/opt/airlock-ci/cargo`), the user's clone starts with
//! a copy of root's `target/debug` and the user's own copy of the cargo home is mounted, for the
//! user's command alone, at root's path: cargo knows a crate's build by its source's path, so the
//! dependencies are reused and the user compiles only Airlock's own crates. Elsewhere (a cargo
//! home under `/root`) the user compiles everything, as before.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{Context, bail};

use crate::image::{LOCAL_BASE, default_tag};
use crate::integration::TEST_USER;
use crate::util::{output, run_loud, workspace_root};

/// Where the user's copy of this toolchain lives: a user cannot enter `/root`, where rustup keeps
/// CI's toolchain; a newcomer has their own.
const USER_TOOLCHAIN: &str = "/opt/airlock-ci/rust";

/// Both proofs: the user's first (it starts from nothing), then root's.
pub(crate) fn check() -> anyhow::Result<()> {
    if !crate::util::is_root() {
        bail!(
            "the proof removes images and makes a user's clone: run as root (sudo cargo xtask front-door)"
        );
    }
    as_a_user_from_nothing()?;
    as_root_from_no_image()
}

/// A user in the docker group, in their own clone with their own toolchain and cargo home, runs
/// `cargo xtask browse` with neither the browser image nor the base on the daemon.
pub(crate) fn as_a_user_from_nothing() -> anyhow::Result<()> {
    eprintln!("== the front door from nothing: cargo xtask browse, as {TEST_USER} (not root)");
    crate::integration::ensure_test_user()?;
    let subuids = std::fs::read_to_string("/etc/subuid").unwrap_or_default();
    if !subuids
        .lines()
        .any(|line| line.starts_with(&format!("{TEST_USER}:")))
    {
        bail!(
            "{TEST_USER} has no subordinate id range in /etc/subuid, so mmdebstrap cannot build the base as that user: `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {TEST_USER}`"
        );
    }
    remove_image(&default_tag(), Layers::Drop);
    remove_image(LOCAL_BASE, Layers::Drop);
    let toolchain = user_toolchain()?;
    let shared_path = shared_cargo_home()?;
    let home = Home::new()?;
    let clone = home.path.join("airlock");
    // The user's clone of what is committed; no hard links, so the chown below touches only it.
    run_loud(
        Command::new("git")
            .args(["clone", "--quiet", "--no-hardlinks"])
            .arg(workspace_root())
            .arg(&clone),
    )?;
    // The crates root fetched, so the user's build needs no network of its own.
    run_loud(Command::new(env!("CARGO")).args(["fetch", "--quiet"]))?;
    let cargo_home = home.path.join("cargo");
    std::fs::create_dir(&cargo_home)?;
    run_loud(
        Command::new("cp")
            .arg("-a")
            .arg(cargo_registry()?)
            .arg(&cargo_home),
    )?;
    if shared_path.is_some() {
        let built = workspace_root().join("target/debug");
        eprintln!(
            "  the user's clone starts from a copy of {} (the dependencies root built)",
            built.display()
        );
        std::fs::create_dir(clone.join("target"))?;
        run_loud(
            Command::new("cp")
                .arg("-a")
                .arg(&built)
                .arg(clone.join("target")),
        )?;
    }
    run_loud(
        Command::new("chown")
            .args(["-R", &format!("{TEST_USER}:{TEST_USER}")])
            .arg(&home.path),
    )?;
    let (url, allow) = lab_page();
    let mut browse = match &shared_path {
        // A mount namespace of the command's own: the user's copy is seen at root's path, and
        // nothing outside the command sees the mount.
        Some(shared) => {
            let mut command = Command::new("unshare");
            command
                .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(r#"mount --bind "$1" "$2" && shift 2 && exec "$@""#)
                .arg("sh")
                .arg(&cargo_home)
                .arg(shared)
                .arg("runuser");
            command
        }
        None => Command::new("runuser"),
    };
    let seen_cargo_home = shared_path.as_deref().unwrap_or(&cargo_home);
    browse
        .args(["-u", TEST_USER, "--", "env", "-i"])
        .arg(format!("HOME={}", home.path.display()))
        .arg(format!(
            "PATH={}/bin:/usr/local/bin:/usr/bin:/bin",
            toolchain.display()
        ))
        .arg(format!("CARGO_HOME={}", seen_cargo_home.display()))
        .arg("CARGO_NET_OFFLINE=true")
        .args(["cargo", "xtask", "browse", &url, "--allow", &allow])
        .current_dir(&clone);
    let saved = seen_through_the_seal(&shown_as_it_runs(&mut browse)?)?;
    let kept = std::fs::metadata(&saved).with_context(|| saved.display().to_string())?;
    let user_uid: u32 = output(Command::new("id").args(["-u", TEST_USER]))?
        .trim()
        .parse()?;
    if kept.uid() != user_uid || !saved.starts_with(home.path.join(".local/share/airlock/runs")) {
        bail!(
            "the screenshot {} is not the user's own (uid {}, not {user_uid}), in their data directory",
            saved.display(),
            kept.uid()
        );
    }
    eprintln!("== as {TEST_USER}, the front door built the base and the image and showed the page");
    Ok(())
}

/// Root runs `cargo xtask browse` with the browser image removed.
pub(crate) fn as_root_from_no_image() -> anyhow::Result<()> {
    eprintln!("== the front door from no image: cargo xtask browse, as root");
    // The tag goes; its layers, which the user's build just made, stay in Docker's build cache,
    // so this rebuild takes seconds instead of the minutes the user's proof already spent.
    remove_image(&default_tag(), Layers::Keep);
    let (url, allow) = lab_page();
    let browse = shown_as_it_runs(
        Command::new(env!("CARGO")).args(["xtask", "browse", &url, "--allow", &allow]),
    )?;
    let saved = seen_through_the_seal(&browse)?;
    let _ = std::fs::remove_file(&saved);
    if let Some(dir) = saved.parent() {
        let _ = std::fs::remove_dir(dir);
    }
    eprintln!("== as root, the front door showed the page through the seal");
    Ok(())
}

/// A lab page on loopback, and the `--allow` entry that reaches it.
fn lab_page() -> (String, String) {
    let port = airlock_testkit::site::simple_site("Front door", "Seen through the seal");
    (
        format!("http://127.0.0.1:{port}/"),
        format!("127.0.0.1:{port}"),
    )
}

/// Run `command` with its progress (stderr) shown line by line as it comes, and kept.
fn shown_as_it_runs(command: &mut Command) -> anyhow::Result<Output> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", crate::util::display(command)))?;
    let stderr = child.stderr.take().context("no stderr")?;
    let progress = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            eprintln!("{line}");
            kept.extend_from_slice(line.as_bytes());
            kept.push(b'\n');
        }
        kept
    });
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().context("no stdout")?, &mut stdout)?;
    let status = child.wait()?;
    let stderr = progress.join().unwrap_or_default();
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Print what the front door printed on stdout; its kept screenshot, if it showed the page.
fn seen_through_the_seal(browse: &Output) -> anyhow::Result<PathBuf> {
    let stdout = String::from_utf8_lossy(&browse.stdout);
    let stderr = String::from_utf8_lossy(&browse.stderr);
    print!("{stdout}");
    // Its stdout also carries the image build's log; the page's title is a line of its own.
    if !browse.status.success() || !stdout.lines().any(|line| line == "Front door") {
        bail!(
            "the front door did not show the page ({}): {}",
            browse.status,
            stdout.trim()
        );
    }
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("saved "))
        .map(PathBuf::from)
        .context("the front door kept no screenshot")
}

/// How much of an image [`remove_image`] takes away.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layers {
    /// Dropped where nothing else uses them.
    Drop,
    /// Kept as build cache.
    Keep,
}

/// Untag an image, with or without its layers; absent is fine.
fn remove_image(tag: &str, layers: Layers) {
    let _ = Command::new("docker")
        .args(["rmi", "--force"])
        .args((layers == Layers::Keep).then_some("--no-prune"))
        .arg(tag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A copy of the toolchain that runs this xtask, readable by everyone, refreshed when it changes.
fn user_toolchain() -> anyhow::Result<PathBuf> {
    let cargo = Path::new(env!("CARGO"));
    let sysroot = cargo
        .parent()
        .and_then(Path::parent)
        .context("cargo's path has no toolchain directory")?;
    let version = output(Command::new(sysroot.join("bin/rustc")).arg("-vV"))?;
    let copy = PathBuf::from(USER_TOOLCHAIN);
    let stamp = copy.join("version");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(version.as_str()) {
        return Ok(copy);
    }
    eprintln!("  copying the toolchain to {USER_TOOLCHAIN} for the user");
    if copy.exists() {
        std::fs::remove_dir_all(&copy)?;
    }
    std::fs::create_dir_all(&copy)?;
    for part in ["bin", "lib", "libexec", "etc"] {
        if sysroot.join(part).exists() {
            run_loud(
                Command::new("cp")
                    .arg("-a")
                    .arg(sysroot.join(part))
                    .arg(&copy),
            )?;
        }
    }
    run_loud(Command::new("chmod").args(["-R", "a+rX"]).arg(&copy))?;
    std::fs::write(&stamp, version)?;
    Ok(copy)
}

/// Root's cargo home.
fn root_cargo_home() -> anyhow::Result<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")
}

/// Root's cargo registry (crates and index), which `cargo fetch` has filled.
fn cargo_registry() -> anyhow::Result<PathBuf> {
    Ok(root_cargo_home()?.join("registry"))
}

/// Root's cargo home, when the user could be shown their copy of it at the same path: every
/// directory above it is one others may pass through (not `/root`, which is 0700).
fn shared_cargo_home() -> anyhow::Result<Option<PathBuf>> {
    let home = root_cargo_home()?;
    let Ok(home) = home.canonicalize() else {
        return Ok(None);
    };
    let passable = home
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0));
    Ok(passable.then_some(home))
}

/// The user's private home for the proof (0700), removed however the proof ends.
struct Home {
    path: PathBuf,
}

impl Home {
    fn new() -> anyhow::Result<Self> {
        let path =
            std::env::temp_dir().join(format!("airlock-front-door-home-{}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        std::fs::create_dir(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(Self { path })
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
