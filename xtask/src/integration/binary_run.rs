//! One test binary's run: its output read as it comes, each test's result and time.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// What one test binary reported, read from libtest's plain output.
#[derive(Debug, Default)]
pub(super) struct BinaryRun {
    /// `(test, "ok" | "FAILED" | "ignored")`, in order.
    pub(super) results: Vec<(String, String)>,
    /// How long each test took, as seen from its result's arrival (tests run one at a time).
    pub(super) took: Vec<(String, Duration)>,
    /// The `N filtered out` count of the summary line.
    pub(super) filtered: usize,
    /// Whether the binary exited 0.
    pub(super) passed: bool,
}

/// Run one test binary and read each test's result (and time) from its output, which is echoed
/// as it comes, or kept in `keep` when given.
pub(super) fn run_binary(
    command: &mut Command,
    mut keep: Option<&mut Vec<String>>,
) -> anyhow::Result<BinaryRun> {
    use std::io::BufRead;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(if keep.is_some() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .spawn()
        .with_context(|| format!("could not start {}", crate::util::display(command)))?;
    // A failing test's panic goes to stderr: kept with the binary's output when that is kept.
    let stderr = child.stderr.take().map(|stderr| {
        std::thread::spawn(move || {
            std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        })
    });
    let mut run = BinaryRun::default();
    let mut reader = ResultReader::default();
    let mut last = Instant::now();
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line?;
            match keep.as_deref_mut() {
                Some(kept) => kept.push(line.clone()),
                None => println!("{line}"),
            }
            let before = run.results.len();
            reader.line(&line, &mut run);
            if let Some((test, _)) = run.results.get(before) {
                run.took.push((test.clone(), last.elapsed()));
                last = Instant::now();
            }
        }
    }
    run.passed = child.wait()?.success();
    if let (Some(kept), Some(stderr)) = (keep, stderr) {
        kept.extend(stderr.join().unwrap_or_default());
    }
    Ok(run)
}

/// Reads libtest's plain output. A test's own child processes (the docker CLI) write past
/// libtest's capture, so a line can read `test NAME ... <their output>` with the result on a
/// later line of its own: the result is one of libtest's words, never whatever ends the line.
#[derive(Debug, Default)]
struct ResultReader {
    /// A test whose result has not been printed yet.
    pending: Option<String>,
}

impl ResultReader {
    fn line(&mut self, line: &str, run: &mut BinaryRun) {
        let is_result = |text: &str| {
            matches!(text, "ok" | "FAILED" | "ignored") || text.starts_with("ignored, ")
        };
        if let Some(rest) = line.strip_prefix("test ")
            && let Some((name, tail)) = rest.split_once(" ... ")
        {
            let tail = tail.trim();
            if is_result(tail) {
                run.results.push((name.to_owned(), tail.to_owned()));
                self.pending = None;
            } else {
                // Someone else's output came first; libtest's word follows on its own line,
                // possibly after more of it.
                self.pending = Some(name.to_owned());
            }
            return;
        }
        if let Some(summary) = line.strip_prefix("test result: ") {
            run.filtered = summary
                .split(';')
                .find_map(|part| part.trim().strip_suffix(" filtered out"))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            return;
        }
        if self.pending.is_some() && is_result(line.trim()) {
            let name = self.pending.take().unwrap_or_default();
            run.results.push((name, line.trim().to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(output: &str) -> BinaryRun {
        let mut run = BinaryRun::default();
        let mut reader = ResultReader::default();
        for line in output.lines() {
            reader.line(line, &mut run);
        }
        run
    }

    #[test]
    fn a_result_is_libtests_word_even_when_a_test_printed_first() {
        let run = read(
            "running 3 tests\n\
             test a_dead_warm_browser_is_replaced ... airlock-task-27ff6b74cf6629e20\n\
             ok\n\
             test plain ... ok\n\
             test noisy_failure ... kill: No such process\n\
             more noise\n\
             FAILED\n\
             test skipped ... ignored, needs a GPU\n\
             \n\
             test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 3 filtered out; finished in 1.00s\n",
        );
        assert_eq!(
            run.results,
            vec![
                (
                    "a_dead_warm_browser_is_replaced".to_owned(),
                    "ok".to_owned()
                ),
                ("plain".to_owned(), "ok".to_owned()),
                ("noisy_failure".to_owned(), "FAILED".to_owned()),
                ("skipped".to_owned(), "ignored, needs a GPU".to_owned()),
            ]
        );
        assert_eq!(run.filtered, 3);
    }
}
