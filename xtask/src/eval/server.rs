//! The local model server: llama.cpp's `llama-server` on loopback, with tool calls through the
//! model's own chat template (`--jinja`).

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::util::{curl_status, free_port};

/// How long the server may take to load its weights on a busy machine.
const START_LIMIT: Duration = Duration::from_mins(10);

/// A running `llama-server`, stopped when dropped.
pub(super) struct ModelServer {
    child: Child,
    /// Its OpenAI-compatible base URL.
    pub base_url: String,
}

impl ModelServer {
    /// Start `binary` serving `model`. Two slots, so the two systems' prompts each keep their
    /// cached prefix as the run alternates between them; greedy sampling with a fixed seed, so a
    /// run can be repeated.
    pub(super) fn start(binary: &Path, model: &Path, log: &Path) -> anyhow::Result<Self> {
        let port = free_port()?;
        let log_file = std::fs::File::create(log)?;
        eprintln!(
            "== starting llama-server on 127.0.0.1:{port} with {} (its log: {})",
            model.display(),
            log.display()
        );
        let child = Command::new(binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("-m")
            .arg(model)
            .args(["--jinja", "-c", "32768", "-np", "2", "-t", "2"])
            .args(["--temp", "0", "--seed", "1"])
            .stdout(Stdio::null())
            .stderr(log_file)
            .process_group(0)
            .spawn()
            .with_context(|| format!("could not start {}", binary.display()))?;
        let mut server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let health = format!("http://127.0.0.1:{port}/health");
        let started = Instant::now();
        loop {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "llama-server stopped while loading ({status}); see {}",
                    log.display()
                );
            }
            let answer = curl_status().arg(&health).stderr(Stdio::null()).output();
            if answer.is_ok_and(|a| a.stdout == b"200") {
                return Ok(server);
            }
            if super::stop::asked() {
                bail!("stopped while llama-server was loading");
            }
            if started.elapsed() > START_LIMIT {
                bail!(
                    "llama-server did not answer /health within {START_LIMIT:?}; see {}",
                    log.display()
                );
            }
            // Polling a process that is loading weights: nothing to wait on but its answer.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        super::stop::kill_group(&mut self.child);
    }
}
