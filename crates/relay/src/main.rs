//! `airlock-relay`: the sealed browser's proxy endpoint inside its container.
//!
//! Listens on the container's loopback (where Chromium's proxy setting points) and hands every
//! accepted connection, as a socket, to the egress proxy's hand-off socket (see the library).
//! It copies no bytes: once a connection is handed off, the proxy serves it directly.
//!
//! ```text
//! airlock-relay --listen 127.0.0.1:3128 --handoff /egress/handoff.sock [--ready-file PATH]
//! ```
//!
//! The ready file is created (and a line naming the address printed) once the relay listens and
//! holds its channel to the proxy, so whoever starts the browser knows its one way out exists.
//! The relay exits as soon as the proxy closes the channel: with no proxy there is nothing to hand
//! connections to.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: airlock-relay --listen ADDR:PORT --handoff SOCKET_PATH [--ready-file PATH]";

struct Options {
    listen: SocketAddr,
    handoff: PathBuf,
    ready_file: Option<PathBuf>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut listen, mut handoff, mut ready_file) = (None, None, None);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--listen" => {
                let text = value()?;
                listen = Some(text.parse::<SocketAddr>().map_err(|_| {
                    format!("--listen must be an IP address and port such as 127.0.0.1:3128, got {text:?}\n{USAGE}")
                })?);
            }
            "--handoff" => handoff = Some(PathBuf::from(value()?)),
            "--ready-file" => ready_file = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Options {
        listen: listen.ok_or_else(|| format!("--listen is required\n{USAGE}"))?,
        handoff: handoff.ok_or_else(|| format!("--handoff is required\n{USAGE}"))?,
        ready_file,
    })
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("airlock-relay: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("airlock-relay: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<(), String> {
    let channel = UnixStream::connect(&options.handoff).map_err(|error| {
        format!(
            "cannot reach the egress proxy's hand-off socket {}: {error}",
            options.handoff.display()
        )
    })?;
    let listener = TcpListener::bind(options.listen)
        .map_err(|error| format!("cannot listen on {}: {error}", options.listen))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("cannot read the listening address: {error}"))?;
    if let Some(path) = &options.ready_file {
        std::fs::write(path, b"")
            .map_err(|error| format!("cannot write the ready file {}: {error}", path.display()))?;
    }
    // One line on stdout, so a parent that asked for port 0 learns the port.
    println!("airlock-relay: listening on {bound}");
    Err(airlock_relay::relay(&listener, &channel).to_string())
}
