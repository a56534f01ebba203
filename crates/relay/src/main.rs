//! `airlock-relay`: the sealed browser's proxy endpoint inside its container.
//!
//! Listens on the container's loopback (where Chromium's proxy setting points) and hands every
//! accepted connection, as a socket, to the egress proxy's hand-off socket (see the library).
//! It copies no bytes: once a connection is handed off, the proxy serves it directly.
//!
//! ```text
//! airlock-relay --listen 127.0.0.1:3128 --handoff /egress/handoff.sock [--ready-file PATH]
//! airlock-relay --listen 127.0.0.1:3128 --copy-to /egress/proxy.sock [--ready-file PATH]
//! airlock-relay --stdio-to 127.0.0.1:PORT
//! ```
//!
//! `--stdio-to` copies stdin and stdout to a port on the container's loopback, for the host's own
//! use through an exec (a task's live view); it listens for nothing.
//!
//! `--copy-to` is for runtimes whose sockets cannot be passed to a host process (gVisor): each
//! connection is copied to a new connection to the proxy's own socket instead.
//!
//! The ready file is created (and a line naming the address printed) once the relay listens and
//! holds its channel to the proxy, so whoever starts the browser knows its one way out exists.
//! The relay exits as soon as the proxy closes the channel: with no proxy there is nothing to hand
//! connections to.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: airlock-relay --listen ADDR:PORT (--handoff HANDOFF_SOCKET | --copy-to PROXY_SOCKET) [--ready-file PATH]";

/// Where connections go.
enum Mode {
    /// Passed as sockets on the proxy's hand-off socket.
    Handoff(PathBuf),
    /// Copied over new connections to the proxy's socket.
    Copy(PathBuf),
}

/// The proxy, reached.
enum WayOut<'a> {
    /// The open hand-off channel.
    Channel(UnixStream),
    /// The proxy's socket, which answered.
    Socket(&'a std::path::Path),
}

struct Options {
    listen: SocketAddr,
    mode: Mode,
    ready_file: Option<PathBuf>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut listen, mut mode, mut ready_file) = (None, None, None);
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
            "--handoff" | "--copy-to" if mode.is_some() => {
                return Err(format!(
                    "give one of --handoff and --copy-to, not both\n{USAGE}"
                ));
            }
            "--handoff" => mode = Some(Mode::Handoff(PathBuf::from(value()?))),
            "--copy-to" => mode = Some(Mode::Copy(PathBuf::from(value()?))),
            "--ready-file" => ready_file = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Options {
        listen: listen.ok_or_else(|| format!("--listen is required\n{USAGE}"))?,
        mode: mode.ok_or_else(|| format!("--handoff or --copy-to is required\n{USAGE}"))?,
        ready_file,
    })
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--stdio-to") {
        return stdio_to(args.nth(1));
    }
    let options = match parse(args) {
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

/// `--stdio-to ADDR`: stdio to a loopback port, until it ends.
fn stdio_to(target: Option<String>) -> ExitCode {
    let Some(target) = target.and_then(|text| text.parse::<SocketAddr>().ok()) else {
        eprintln!(
            "airlock-relay: --stdio-to needs a loopback address and port such as 127.0.0.1:9223"
        );
        return ExitCode::from(2);
    };
    match airlock_relay::copy_stdio(target) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("airlock-relay: --stdio-to {target}: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<(), String> {
    // Reach the proxy first: the ready file must never say a way out exists when it does not.
    let way_out = match &options.mode {
        Mode::Handoff(path) => WayOut::Channel(UnixStream::connect(path).map_err(|error| {
            format!(
                "cannot reach the egress proxy's hand-off socket {}: {error}",
                path.display()
            )
        })?),
        Mode::Copy(path) => {
            UnixStream::connect(path).map_err(|error| {
                format!(
                    "cannot reach the egress proxy's socket {}: {error}",
                    path.display()
                )
            })?;
            WayOut::Socket(path)
        }
    };
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
    let stopped = match way_out {
        WayOut::Channel(channel) => airlock_relay::relay(&listener, &channel),
        WayOut::Socket(path) => airlock_relay::relay_copying(&listener, path),
    };
    Err(stopped.to_string())
}
