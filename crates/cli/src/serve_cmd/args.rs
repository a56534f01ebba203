//! The flags of `airlock serve` and `airlock cdp`, and where the tokens come from.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::token_scope::{self, TokenEntry};
use crate::settings::SettingFlags;

/// Arguments of `airlock serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen. A non-loopback address needs tokens.
    #[arg(long, env = "AIRLOCK_LISTEN", default_value = "127.0.0.1:8700")]
    pub(super) listen: SocketAddr,
    /// Offer `agent_browser` on /mcp (one sealed browser per MCP session, removed when the session
    /// ends or idles out) instead of `browser_task`.
    #[arg(long)]
    pub(super) direct: bool,
    /// Serve MCP without server-side sessions: every request stands alone, so any replica behind
    /// a plain load balancer can answer any request (progress still streams in the response).
    /// Not with --direct, whose browser lives in one server's session.
    #[arg(long, env = "AIRLOCK_STATELESS")]
    pub(super) stateless: bool,
    /// Finished tasks kept per token, with their answers and flight records, for
    /// `GET /v1/tasks/{id}` (1 to 1000; the oldest go first).
    #[arg(
        long,
        env = "AIRLOCK_KEEP_TASKS",
        value_name = "N",
        default_value_t = 20
    )]
    pub(super) keep_tasks: usize,
    /// Bytes of finished tasks (answers and records) kept per token; past it the oldest go, and
    /// the newest is kept whatever its size (1 MiB to 4 GiB).
    #[arg(
        long,
        env = "AIRLOCK_KEEP_TASK_BYTES",
        value_name = "BYTES",
        default_value_t = 64 * 1024 * 1024
    )]
    pub(super) keep_task_bytes: usize,
    #[command(flatten)]
    pub(super) service: ServiceArgs,
}

/// Arguments of `airlock cdp`: the CDP endpoint alone.
#[derive(Debug, Args)]
pub(crate) struct CdpArgs {
    /// Where to listen (Chromium's usual DevTools port by default). A non-loopback address needs
    /// tokens.
    #[arg(long, env = "AIRLOCK_CDP_LISTEN", default_value = "127.0.0.1:9222")]
    pub(super) listen: SocketAddr,
    #[command(flatten)]
    pub(super) service: ServiceArgs,
}

/// What `serve` and `cdp` share: who may call, how many run, how they end.
#[derive(Debug, Args)]
pub(super) struct ServiceArgs {
    /// A file of bearer tokens, one per line (# comments and blank lines ignored); a token may be
    /// followed by its own ceiling, `allowed_domains=P,P…` and/or `blocked_domains=P,P…`, inside
    /// the server's. Tokens may also come from AIRLOCK_TOKENS, comma-separated; several allow
    /// rotation.
    #[arg(long, env = "AIRLOCK_TOKENS_FILE", value_name = "FILE")]
    pub(super) tokens_file: Option<PathBuf>,
    /// A name clients use for this server in the Host header (`name` or `name:port`;
    /// repeatable). Default: the listen address, and localhost on loopback. `*`: any.
    #[arg(
        long = "allowed-host",
        env = "AIRLOCK_ALLOWED_HOSTS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub(super) allowed_hosts: Vec<String>,
    /// A web origin allowed to call (`scheme://host[:port]`; repeatable). Default: none, so a
    /// request that a web page makes through a browser is refused.
    #[arg(
        long = "allowed-origin",
        env = "AIRLOCK_ALLOWED_ORIGINS",
        value_name = "ORIGIN",
        value_delimiter = ','
    )]
    pub(super) allowed_origins: Vec<String>,
    /// TLS certificate chain (PEM, leaf first); with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(super) tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); with --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(super) tls_key: Option<PathBuf>,
    /// Seconds a task or CDP client may wait for a slot when all are busy (0: refuse at once).
    #[arg(
        long,
        env = "AIRLOCK_QUEUE_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 30
    )]
    pub(super) queue_timeout: u64,
    /// Tasks that may wait for a slot at once (default: twice max_concurrent_tasks).
    #[arg(long, env = "AIRLOCK_MAX_QUEUED_TASKS", value_name = "N")]
    pub(super) max_queued_tasks: Option<usize>,
    /// Seconds running tasks and CDP leases get to finish after SIGTERM before they are ended.
    #[arg(
        long,
        env = "AIRLOCK_DRAIN_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 60
    )]
    pub(super) drain_timeout: u64,
    /// Also serve `/metrics` alone on this address, with no token and no Host check, for a
    /// scraper that reaches pods by address (restrict who reaches it: a NetworkPolicy, a
    /// firewall). The main listener's `/metrics` keeps its checks.
    #[arg(long, env = "AIRLOCK_METRICS_LISTEN", value_name = "ADDR")]
    pub(super) metrics_listen: Option<SocketAddr>,
    /// MCP sessions open at once; a new one past this is refused (503).
    #[arg(
        long,
        env = "AIRLOCK_MAX_SESSIONS",
        value_name = "N",
        default_value_t = 64
    )]
    pub(super) max_sessions: usize,
    /// Seconds a CDP client may keep its sealed browser (10–86400).
    #[arg(
        long,
        env = "AIRLOCK_CDP_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 900
    )]
    pub(super) cdp_timeout: u64,
    /// Seconds a CDP connection may pass no message either way before it ends (5 up to
    /// --cdp-timeout).
    #[arg(
        long,
        env = "AIRLOCK_CDP_IDLE_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 300
    )]
    pub(super) cdp_idle_timeout: u64,
    /// Who answers a page's JavaScript dialogs (alert, confirm, prompt, beforeunload) on a CDP
    /// lease: `client` (default; as any browser), or `accept`/`dismiss`, answered by the server
    /// at once, the client never hearing of them.
    #[arg(
        long,
        env = "AIRLOCK_CDP_DIALOGS",
        value_name = "WHO",
        default_value = "client"
    )]
    pub(super) cdp_dialogs: airlock_policy::DialogSetting,
    /// CDP browsers kept ready before clients connect (0–8; default 0 for `serve`, 1 for `cdp`).
    #[arg(long, env = "AIRLOCK_CDP_POOL_SIZE", value_name = "N")]
    pub(super) cdp_pool_size: Option<usize>,
    #[command(flatten)]
    pub(super) settings: SettingFlags,
}

/// The accepted tokens: `AIRLOCK_TOKENS` (comma-separated) and `--tokens-file` (one a line, each
/// with its line number and perhaps a ceiling of its own).
pub(super) fn tokens(args: &ServiceArgs) -> anyhow::Result<Vec<(TokenEntry, Option<usize>)>> {
    let mut tokens: Vec<(TokenEntry, Option<usize>)> = std::env::var("AIRLOCK_TOKENS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| (TokenEntry::plain(t.to_owned()), None))
        .collect();
    if let Some(path) = &args.tokens_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--tokens-file {}: cannot read it", path.display()))?;
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            tokens.push((token_scope::parse_line(line, index + 1)?, Some(index + 1)));
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use clap::{FromArgMatches, Parser};

    use super::*;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    /// The words of the unit's `ExecStart`, from the program on.
    fn exec_start(unit: &str) -> Vec<String> {
        let start = unit.find("ExecStart=").unwrap() + "ExecStart=".len();
        let mut words = Vec::new();
        for line in unit[start..].lines() {
            let continued = line.trim_end().ends_with('\\');
            words.extend(
                line.split_whitespace()
                    .filter(|word| *word != "\\")
                    .map(str::to_owned),
            );
            if !continued {
                break;
            }
        }
        words
    }

    #[test]
    fn the_shipped_systemd_unit_parses_and_serves_only_https() {
        let words = exec_start(include_str!("../../../../deploy/airlock.service"));
        assert_eq!(words[..2], ["/usr/local/bin/airlock", "serve"]);
        let matches = <Serve as clap::CommandFactory>::command()
            .try_get_matches_from(&words[1..])
            .unwrap();
        let serve = Serve::from_arg_matches(&matches).unwrap();
        assert_eq!(
            serve.args.service.tls_cert.as_deref(),
            Some(std::path::Path::new("/etc/airlock/tls/cert.pem"))
        );
        assert_eq!(
            serve.args.service.tls_key.as_deref(),
            Some(std::path::Path::new("/etc/airlock/tls/key.pem"))
        );
        assert!(
            !serve.args.listen.ip().is_loopback(),
            "a unit that listens beyond loopback must serve TLS (checked above)"
        );
    }

    /// The server reaches Docker only through airlock-gate's socket: no docker group, and the
    /// gate's unit comes first (the gate's own test checks its side of the socket).
    #[test]
    fn the_shipped_systemd_unit_holds_no_docker_socket() {
        let unit = include_str!("../../../../deploy/airlock.service");
        let settings: Vec<&str> = unit.lines().filter(|line| !line.starts_with('#')).collect();
        assert!(settings.contains(&"Environment=DOCKER_HOST=unix:///run/airlock-gate/docker.sock"));
        assert!(settings.contains(&"Requires=airlock-gate.service"));
        assert!(
            !unit.contains("SupplementaryGroups"),
            "no docker group for the server"
        );
        assert!(!unit.contains("/var/run/docker.sock"));
    }
}
