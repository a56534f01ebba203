//! `cargo xtask browse URL [ARGS…]`: the front door in one command. It sets up what is missing,
//! saying so at each long step, then runs Airlock's main job: a sealed browse of the page, which
//! prints what it saw and where the screenshot is.
//!
//! 1. Docker's engine and gVisor (`cargo xtask docker`) when started as root, else a check that
//!    dockerd answers, naming the command that installs it.
//! 2. The browser image (`cargo xtask image`, with its phases and size), built when missing or
//!    outdated.
//! 3. `airlock` itself (compiled by cargo, whose progress shows).
//! 4. `airlock browse URL ARGS…`. Started as root, Airlock runs as an unprivileged user.

use std::process::Command;

use anyhow::bail;

use crate::util::{is_root, run_loud, succeeds, workspace_root};

/// The page to open, and anything more for `airlock browse` (`--allow HOST:PORT`, `--json`, …).
#[derive(Debug, clap::Args)]
pub(crate) struct BrowseArgs {
    /// The page to open (http or https).
    url: String,
    /// More arguments for `airlock browse`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

pub(crate) fn run(args: &BrowseArgs) -> anyhow::Result<()> {
    eprintln!("== [1/4] Docker");
    if is_root() {
        crate::docker::run()?;
    } else if !succeeds(Command::new("docker").arg("version")) {
        bail!(
            "Docker does not answer: `sudo cargo xtask docker` installs and starts it (then add yourself to the docker group, or run this with sudo)"
        );
    }
    eprintln!("== [2/4] the browser image");
    crate::image::run(&crate::image::ImageArgs::for_integration())?;
    eprintln!("== [3/4] compiling airlock");
    run_loud(Command::new(env!("CARGO")).args(["build", "-p", "airlock"]))?;
    eprintln!("== [4/4] airlock browse {}", args.url);
    let airlock = workspace_root().join("target/debug/airlock");
    run_loud(
        Command::new(airlock)
            .arg("browse")
            .arg(&args.url)
            .args(&args.rest),
    )
}
