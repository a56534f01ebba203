//! `cargo xtask image`: build `airlock-browser:<version>` (or, with `--server`,
//! `airlock-server:<version>`: the `airlock` binary on the same base, from docker/server/).
//!
//! The base image is pulled when a registry answers; otherwise (as on a machine with no registry,
//! or with `--offline-base`) it is made from Debian packages with `mmdebstrap` (as root, or as a user through its
//! unprivileged `unshare` mode) and `docker import`,
//! and cached as `airlock-base:bookworm-security`. agent-browser's npm tarball is fetched on the host and
//! checked against the checksum pinned in `docker/Dockerfile`, so the build itself needs no npm.
//! `airlock-relay` and `airlock-runner` are built here from `crates/` as static binaries (they run
//! on any base).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use sha2::{Digest, Sha256};

use crate::util::{display, is_root, output, run_loud, succeeds, workspace_root};

mod freshness;

/// The base the Dockerfile names by default.
const DEFAULT_BASE: &str = "debian:bookworm-slim";
/// Where a base made from Debian packages is cached. Named for its sources: a base cached under
/// the old name `airlock-base:bookworm` listed `bookworm main` alone and got no security updates.
pub(crate) const LOCAL_BASE: &str = "airlock-base:bookworm-security";
/// The apt sources the Debian-built base lists: the release, its updates and its security
/// archive, so the image's `apt-get` sees every security release.
const BASE_SOURCES: [&str; 3] = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
];

/// Arguments of `cargo xtask image`.
// Each bool is one command-line switch; an enum would only rename them.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub(crate) struct ImageArgs {
    /// The tag to build (default: airlock-browser:<version>, or airlock-server:<version> with
    /// --server).
    #[arg(long)]
    tag: Option<String>,
    /// Build the server image (`airlock serve` against the node's Docker daemon) instead of the
    /// browser image.
    #[arg(long)]
    server: bool,
    /// With --server: put the dev-profile `airlock` in the image instead of a release build. The
    /// same code, built in a fraction of the time; `cargo xtask cluster` uses it so CI, which has
    /// built it for the tests already, stays short.
    #[arg(long, requires = "server")]
    dev_binary: bool,
    /// The base image to build on.
    #[arg(long, default_value = DEFAULT_BASE)]
    base: String,
    /// Do not try a registry: build the base from Debian packages (mmdebstrap), or reuse the cached one.
    #[arg(long)]
    offline_base: bool,
    /// Rebuild even if the tag already exists.
    #[arg(long)]
    force: bool,
}

impl ImageArgs {
    /// What the integration task builds when the image is missing.
    pub(crate) fn for_integration() -> Self {
        Self {
            tag: None,
            server: false,
            dev_binary: false,
            base: DEFAULT_BASE.to_owned(),
            offline_base: false,
            force: false,
        }
    }

    /// The server image, as `cargo xtask cluster` builds it.
    pub(crate) fn for_cluster() -> Self {
        Self {
            server: true,
            dev_binary: true,
            ..Self::for_integration()
        }
    }
}

/// `airlock-browser:<workspace version>`, the tag every Airlock binary of this version expects.
pub(crate) fn default_tag() -> String {
    format!("airlock-browser:{}", env!("CARGO_PKG_VERSION"))
}

/// `airlock-server:<workspace version>`.
pub(crate) fn server_tag() -> String {
    format!("airlock-server:{}", env!("CARGO_PKG_VERSION"))
}

/// What the server image holds: the server, and the gate that alone holds the Docker socket.
const SERVER_BINARIES: [&str; 2] = ["airlock", "airlock-gate"];

/// The server image: release builds of `airlock` and `airlock-gate` on the same base, from
/// docker/server/.
fn run_server(args: &ImageArgs, root: &Path) -> anyhow::Result<()> {
    let tag = args.tag.clone().unwrap_or_else(server_tag);
    let (profile, out_dir) = if args.dev_binary {
        (&[][..], root.join("target/debug"))
    } else {
        (&["--release"][..], root.join("target/release"))
    };
    run_loud(
        Command::new(env!("CARGO"))
            .arg("build")
            .args(profile)
            .args(["-p", "airlock", "-p", "airlock-gate"]),
    )?;
    let dockerfile = root.join("docker/server/Dockerfile");
    let binaries = SERVER_BINARIES.map(|name| out_dir.join(name));
    let mut hasher = Sha256::new();
    for path in std::iter::once(&dockerfile).chain(&binaries) {
        hasher.update(fs::read(path).with_context(|| format!("reading {}", path.display()))?);
    }
    let fingerprint = hex(&hasher.finalize());
    if !args.force && built_fingerprint(&tag).as_deref() == Some(fingerprint.as_str()) {
        eprintln!(
            "image {tag} is up to date with docker/server and the binary (use --force to rebuild)"
        );
        return Ok(());
    }
    let base = resolve_base(args)?;
    let context = root.join("target/airlock-server-image");
    fs::create_dir_all(&context).with_context(|| format!("creating {}", context.display()))?;
    fs::copy(&dockerfile, context.join("Dockerfile"))
        .context("copying docker/server/Dockerfile")?;
    for (name, binary) in SERVER_BINARIES.iter().zip(&binaries) {
        fs::copy(binary, context.join(name))
            .with_context(|| format!("copying {}", binary.display()))?;
    }
    let mut build = docker_build(&base, &fingerprint, &tag, &context);
    eprintln!("building {tag} on {base}");
    run_loud(&mut build)?;
    eprintln!(
        "built {tag}\nthe same build as a plain command: {}",
        display(&build)
    );
    Ok(())
}

/// Build the image (or say it is there already).
pub(crate) fn run(args: &ImageArgs) -> anyhow::Result<()> {
    if !succeeds(Command::new("docker").arg("version")) {
        bail!(
            "Docker is not answering: install Debian's docker.io and start dockerd (or fix DOCKER_HOST)"
        );
    }
    let root = workspace_root();
    if args.server {
        return run_server(args, &root);
    }
    let tag = args.tag.clone().unwrap_or_else(default_tag);
    let binaries = build_in_container_binaries(&root)?;
    let fingerprint = context_fingerprint(&root, &binaries)?;
    if !args.force && built_fingerprint(&tag).as_deref() == Some(fingerprint.as_str()) {
        let age = freshness::age_of(&tag)?;
        let now = std::time::SystemTime::now();
        if !age.is_stale(now) {
            eprintln!(
                "image {tag} is up to date with docker/ (use --force to rebuild): {}",
                age.describe(now)
            );
            return Ok(());
        }
        eprintln!("rebuilding: {}", age.describe(now));
    }
    let started = std::time::Instant::now();
    let pins = Pins::read(&root.join("docker/Dockerfile"))?;
    let base = resolve_base(args)?;
    let context = prepare_context(&root, &pins, &binaries)?;

    let mut build = docker_build(&base, &fingerprint, &tag, &context);
    // The day, not the second: rebuilds on one day share the packages' layer, and the first
    // build of a day reads the archives again.
    let today = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    build
        .arg("--build-arg")
        .arg(format!("PACKAGES_AS_OF={}", &today[..10]));
    eprintln!("[3/3] building {tag} on {base}");
    run_loud(&mut build)?;
    freshness::label(&tag)?;
    let size =
        output(Command::new("docker").args(["image", "inspect", "--format", "{{.Size}}", &tag]))?;
    let megabytes = size.trim().parse::<u64>().unwrap_or(0) / 1_000_000;
    eprintln!(
        "built {} ({megabytes} MB) in {:.0} s\nthe same build as a plain command: {}",
        tag,
        started.elapsed().as_secs_f64(),
        display(&build)
    );
    Ok(())
}

/// `docker build` of `context` on `base`, labelled with the fingerprint of what went in.
fn docker_build(base: &str, fingerprint: &str, tag: &str, context: &Path) -> Command {
    let mut build = Command::new("docker");
    build
        .args(["build", "--build-arg"])
        .arg(format!("BASE_IMAGE={base}"))
        .args(["--label", &format!("{FINGERPRINT_LABEL}={fingerprint}")])
        .args(["--tag", tag])
        .arg(context);
    build
}

/// The label that records which docker/ files an image was built from.
const FINGERPRINT_LABEL: &str = "airlock.context";

/// The programs the image runs that are built here: `airlock-relay` (the proxy endpoint) and
/// `airlock-runner` (the command runner).
const IN_CONTAINER_BINARIES: [&str; 2] = ["airlock-relay", "airlock-runner"];

/// The in-container binaries for this machine's architecture, linked statically so they need
/// nothing from the image's libc. Built in their own target directory: the static flag must not
/// touch the workspace's ordinary build.
fn build_in_container_binaries(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let version = output(Command::new("rustc").arg("-vV"))?;
    let triple = version
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .context("`rustc -vV` printed no host triple")?
        .trim()
        .to_owned();
    let target_dir = root.join("target/relay");
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--release"]);
    for name in IN_CONTAINER_BINARIES {
        build.args(["-p", name, "--bin", name]);
    }
    run_loud(
        build
            .args(["--target", &triple])
            .env("CARGO_TARGET_DIR", &target_dir)
            // With an explicit --target these flags reach only these binaries, not build scripts
            // or proc macros. The path remap keeps this checkout's location out of the binaries,
            // so every checkout builds the same bytes (and the same image fingerprint).
            .env(
                "RUSTFLAGS",
                format!(
                    "-C target-feature=+crt-static --remap-path-prefix={}=/airlock",
                    root.display()
                ),
            ),
    )?;
    let release = target_dir.join(triple).join("release");
    Ok(IN_CONTAINER_BINARIES
        .iter()
        .map(|name| release.join(name))
        .collect())
}

/// sha256 over the files in docker/ and the in-container binaries, so a changed Dockerfile,
/// entrypoint, policy, relay or runner rebuilds.
fn context_fingerprint(root: &Path, binaries: &[PathBuf]) -> anyhow::Result<String> {
    let mut names: Vec<PathBuf> = fs::read_dir(root.join("docker"))
        .context("reading docker/")?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        // Files only: docker/server/ is the server image's, fingerprinted on its own.
        .filter(|path| path.is_file())
        .collect();
    names.sort();
    let mut hasher = Sha256::new();
    for path in names {
        hasher.update(
            path.file_name()
                .map(std::ffi::OsStr::as_encoded_bytes)
                .unwrap_or_default(),
        );
        hasher.update(fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    for binary in binaries {
        hasher.update(
            binary
                .file_name()
                .map(std::ffi::OsStr::as_encoded_bytes)
                .unwrap_or_default(),
        );
        hasher.update(fs::read(binary).with_context(|| format!("reading {}", binary.display()))?);
    }
    Ok(hex(&hasher.finalize()))
}

/// The fingerprint label of an existing image, if there is one.
fn built_fingerprint(tag: &str) -> Option<String> {
    let format = format!("{{{{ index .Config.Labels \"{FINGERPRINT_LABEL}\" }}}}");
    output(Command::new("docker").args(["image", "inspect", "--format", &format, tag]))
        .ok()
        .map(|label| label.trim().to_owned())
        .filter(|label| !label.is_empty() && label != "<no value>")
}

/// Bytes as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn image_exists(tag: &str) -> bool {
    succeeds(Command::new("docker").args(["image", "inspect", tag]))
}

/// The agent-browser version and checksum, read from the Dockerfile so they are pinned once.
struct Pins {
    version: String,
    sha256: String,
}

impl Pins {
    fn read(dockerfile: &Path) -> anyhow::Result<Self> {
        let text = fs::read_to_string(dockerfile)
            .with_context(|| format!("reading {}", dockerfile.display()))?;
        let arg = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("ARG {name}=")))
                .map(|value| value.trim().to_owned())
                .with_context(|| format!("{} has no `ARG {name}=` line", dockerfile.display()))
        };
        Ok(Self {
            version: arg("AGENT_BROWSER_VERSION")?,
            sha256: arg("AGENT_BROWSER_SHA256")?,
        })
    }
}

fn resolve_base(args: &ImageArgs) -> anyhow::Result<String> {
    eprintln!("[1/3] base image");
    if !args.offline_base {
        if image_exists(&args.base) {
            return Ok(args.base.clone());
        }
        eprintln!(
            "  pulling {} (falls back to a Debian-built base if no registry answers)",
            args.base
        );
        let mut pull = Command::new("timeout");
        pull.args(["120", "docker", "pull", &args.base]);
        if succeeds(&mut pull) {
            return Ok(args.base.clone());
        }
        eprintln!("  {} could not be pulled", args.base);
    }
    if image_exists(LOCAL_BASE) {
        eprintln!("  using the cached {LOCAL_BASE}");
        return Ok(LOCAL_BASE.to_owned());
    }
    build_local_base()?;
    Ok(LOCAL_BASE.to_owned())
}

/// `mmdebstrap --variant=minbase bookworm`, its tarball streamed straight into `docker import`.
/// As root it builds in a chroot; as a user, in a user namespace of the user's own subordinate ids
/// (`--mode=unshare`), so a user in the docker group needs no root for the base either.
fn build_local_base() -> anyhow::Result<()> {
    if !succeeds(Command::new("mmdebstrap").arg("--version")) {
        bail!(
            "mmdebstrap is missing (it builds the base from Debian packages): `sudo cargo xtask docker` installs it with uidmap"
        );
    }
    let mode = if is_root() { "root" } else { "unshare" };
    eprintln!("  building {LOCAL_BASE} from Debian packages (mmdebstrap, {mode} mode)");
    let mut mmdebstrap = Command::new("mmdebstrap")
        .args([
            "--variant=minbase",
            &format!("--mode={mode}"),
            "bookworm",
            "-",
        ])
        .args(BASE_SOURCES)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting mmdebstrap")?;
    let tarball = mmdebstrap
        .stdout
        .take()
        .context("mmdebstrap has no stdout")?;
    let imported = Command::new("docker")
        .args(["import", "-", LOCAL_BASE])
        .stdin(tarball)
        .stdout(Stdio::null())
        .status()
        .context("starting docker import")?;
    let built = mmdebstrap.wait().context("waiting for mmdebstrap")?;
    if !built.success() {
        let _ = Command::new("docker")
            .args(["rmi", "--force", LOCAL_BASE])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if is_root() {
            bail!("mmdebstrap failed ({built}): its messages are above");
        }
        bail!(
            "mmdebstrap failed ({built}): its messages are above. As a user it needs a subordinate id range in /etc/subuid and /etc/subgid (`sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER`), or build the base once as root: `sudo cargo xtask image --offline-base`"
        );
    }
    if !imported.success() {
        bail!("docker import of the Debian base failed ({imported})");
    }
    Ok(())
}

/// target/airlock-image: the docker/ files, agent-browser's checked tarball and the in-container
/// binaries.
fn prepare_context(root: &Path, pins: &Pins, binaries: &[PathBuf]) -> anyhow::Result<PathBuf> {
    eprintln!("[2/3] build context with agent-browser {}", pins.version);
    let context = root.join("target/airlock-image");
    fs::create_dir_all(&context).with_context(|| format!("creating {}", context.display()))?;
    for file in [
        "Dockerfile",
        "entrypoint.sh",
        "chromium-policy.json",
        "chromium-gaia.json",
        "airlock-chromium",
        "airlock-cdp-browser",
    ] {
        fs::copy(root.join("docker").join(file), context.join(file))
            .with_context(|| format!("copying docker/{file}"))?;
    }
    let cache = root.join("target/airlock-cache");
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let tarball = cache.join(format!("agent-browser-{}.tgz", pins.version));
    if !tarball.exists() || sha256_of(&tarball)? != pins.sha256 {
        run_loud(
            Command::new("npm")
                .args([
                    "pack",
                    &format!("agent-browser@{}", pins.version),
                    "--pack-destination",
                ])
                .arg(&cache),
        )?;
    }
    let actual = sha256_of(&tarball)?;
    if actual != pins.sha256 {
        bail!(
            "{} has sha256 {actual}, but docker/Dockerfile pins {}: refusing to build with an unchecked agent-browser",
            tarball.display(),
            pins.sha256
        );
    }
    fs::copy(&tarball, context.join("agent-browser.tgz"))
        .context("copying the agent-browser tarball")?;
    for binary in binaries {
        let name = binary
            .file_name()
            .context("an in-container binary has no file name")?;
        fs::copy(binary, context.join(name))
            .with_context(|| format!("copying {}", binary.display()))?;
    }
    Ok(context)
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let mut file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0_u8; 64 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hex(&hasher.finalize()))
}
