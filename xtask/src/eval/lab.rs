//! The lab on loopback (`lab.py`): MiniWoB++'s pages with the adapter, the lab's own pages, and
//! the log of what the pages reported.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};
use serde::Deserialize;

use super::setup;
use super::tasks::{EvalTask, Source};
use crate::util::workspace_root;

/// The lab's server, stopped when dropped.
pub(super) struct Lab {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    log: PathBuf,
}

/// What the pages reported for one episode.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Episode {
    /// The instruction the page showed when it first started (MiniWoB++ pages).
    pub query: Option<String>,
    /// Every instruction its pages showed: another one means the agent loaded the page without
    /// the task's seed, so its problem was not the task's.
    pub queries: Vec<String>,
    /// The first reward the page gave, and why.
    pub reward: Option<(f64, String)>,
    /// A planted instruction was followed.
    pub planted: bool,
}

#[derive(Debug, Deserialize)]
#[allow(clippy::struct_field_names)] // the log's own field names
struct Event {
    episode: String,
    event: String,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    reward: Option<f64>,
    #[serde(default)]
    reason: Option<String>,
}

impl Lab {
    /// Start the lab, its event log in `dir`.
    pub(super) fn start(dir: &Path) -> anyhow::Result<Self> {
        let here = workspace_root().join("xtask/src/eval");
        let log = dir.join("lab-events.jsonl");
        let mut child = Command::new(setup::python())
            .arg(here.join("lab.py"))
            .arg(setup::miniwob_html())
            .arg(here.join("lab"))
            .arg(here.join("adapter.js"))
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("could not start the lab (lab.py)")?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        let Ok(port) = line.trim().parse() else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the lab did not say its port (it printed {line:?})");
        };
        Ok(Self { child, port, log })
    }

    /// The page a task starts at, for one episode.
    pub(super) fn url(&self, task: &EvalTask, episode: &str, seed: &str) -> String {
        let page = match task.source {
            Source::MiniWob => format!("miniwob/{}.html?seed={seed}", task.name),
            Source::Lab { page, .. } => format!("lab/{page}"),
        };
        format!("http://127.0.0.1:{}/e/{episode}/{page}", self.port)
    }

    /// What the pages reported, by episode.
    pub(super) fn episodes(&self) -> anyhow::Result<BTreeMap<String, Episode>> {
        let text = match fs::read_to_string(&self.log) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(error.into()),
        };
        Ok(read_events(&text))
    }

    /// The instruction a MiniWoB++ page shows for `seed`, read by loading it in the host's
    /// Chromium (the page makes its problem in the browser, from the seed).
    pub(super) fn instruction(&self, task: &EvalTask, seed: &str) -> anyhow::Result<String> {
        let episode = format!("preview-{}-{seed}", task.name);
        let url = self.url(task, &episode, seed);
        let profile = tempfile::tempdir()?;
        let status = Command::new(setup::HOST_CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args([
                "--virtual-time-budget=5000",
                "--timeout=30000",
                "--dump-dom",
            ])
            .arg(&url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("could not start the host's Chromium")?;
        if !status.success() {
            bail!("the host's Chromium could not load {url} ({status})");
        }
        // The adapter posts synchronously before the page goes on, so the event is logged by now.
        let query = self.episodes()?.remove(&episode).and_then(|e| e.query);
        match query {
            Some(query) if !query.trim().is_empty() => Ok(query),
            _ => bail!("{}: the page showed no instruction at {url}", task.name),
        }
    }
}

/// The lab's log read as episodes; lines that do not parse are skipped (a page may post junk).
pub(super) fn read_events(text: &str) -> BTreeMap<String, Episode> {
    let mut episodes: BTreeMap<String, Episode> = BTreeMap::new();
    for event in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Event>(l).ok())
    {
        let episode = episodes.entry(event.episode).or_default();
        match event.event.as_str() {
            "start" => {
                if let Some(query) = event.query {
                    if episode.query.is_none() {
                        episode.query = Some(query.clone());
                    }
                    episode.queries.push(query);
                }
            }
            "reward" if episode.reward.is_none() => {
                episode.reward = event
                    .reward
                    .map(|reward| (reward, event.reason.unwrap_or_default()));
            }
            "planted" => episode.planted = true,
            _ => {}
        }
    }
    episodes
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reward_of_an_episode_is_its_reward() {
        let log = r#"{"episode":"a","event":"start","query":"Click on the \"No\" button."}
{"episode":"a","event":"reward","reward":1.0,"reason":null}
{"episode":"a","event":"reward","reward":-1.0,"reason":"again"}
not json
{"episode":"b","event":"planted"}
{"episode":"b","event":"reward","reward":-1.0,"reason":"added aurora-deluxe"}
"#;
        let episodes = read_events(log);
        assert_eq!(
            episodes["a"].query.as_deref(),
            Some("Click on the \"No\" button.")
        );
        assert_eq!(episodes["a"].reward, Some((1.0, String::new())));
        assert!(episodes["b"].planted);
        assert_eq!(episodes["b"].reward.as_ref().map(|r| r.0), Some(-1.0));
    }
}
