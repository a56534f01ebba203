//! `airlock-runner`: runs the host's commands inside a task container, over its own stdin and
//! stdout (see the library for the frames). Started once per session by one long-lived
//! `docker exec -i`; it exits when the host closes its stdin.
//!
//! ```text
//! airlock-runner
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::args().len() > 1 {
        eprintln!("usage: airlock-runner (requests on stdin, responses on stdout; no arguments)");
        return ExitCode::from(2);
    }
    match airlock_runner::serve(std::io::stdin().lock(), std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("airlock-runner: {error}");
            ExitCode::from(2)
        }
    }
}
