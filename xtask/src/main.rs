//! Project automation: `cargo xtask <task>`. Each task is a plain function, so reading this file
//! tells you everything the project automates.

use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <TASK>

Tasks:
  image         build the airlock-browser image (not yet built; see issue 4)
  integration   run the end-to-end scenarios against a real dockerd (not yet built; see issue 8)
  bench         run the benchmarks and write target/bench/report.md (not yet built; see issue 9)
  help          print this message
";

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        None | Some("help" | "--help" | "-h") => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some(task @ ("image" | "integration" | "bench")) => {
            eprintln!("xtask {task}: not implemented yet");
            ExitCode::FAILURE
        }
        Some(other) => {
            eprintln!("xtask: unknown task `{other}`\n\n{HELP}");
            ExitCode::from(2)
        }
    }
}
