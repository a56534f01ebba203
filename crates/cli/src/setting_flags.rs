//! The settings' sources as declared: the shared flags (each with its environment variable) and
//! the keys of `airlock.toml`. `settings.rs` resolves them.

use std::net::SocketAddr;

use clap::Args;
use serde::Deserialize;

/// Flags shared by `task`, `browse`, `mcp` and `doctor`. Each may also come from the environment
/// (named after the flag) or from the config file.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct SettingFlags {
    /// The worker's model: `anthropic/<model>`, `openai/<model>`, or `script:<file.json>`.
    #[arg(long, env = "AIRLOCK_MODEL", value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
    /// Thinking budget for models that think: off, low, medium, high, or a token count.
    #[arg(long, env = "AIRLOCK_THINKING", value_name = "LEVEL")]
    pub thinking: Option<String>,
    /// Base URL of an OpenAI-compatible API (Ollama, vLLM, llama.cpp, OpenRouter).
    #[arg(long, env = "AIRLOCK_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// The largest answer the model may write, in tokens (64–65536; default 4096). A small local
    /// model can run on writing calls until this stops it.
    #[arg(long, env = "AIRLOCK_MAX_ANSWER_TOKENS", value_name = "TOKENS")]
    pub max_answer_tokens: Option<u32>,
    /// Seconds one request to the model may take (10–3600; default 120). A local server on a
    /// small machine may need minutes for a long prompt.
    #[arg(long, env = "AIRLOCK_MODEL_TIMEOUT", value_name = "SECONDS")]
    pub model_timeout: Option<u64>,
    /// The browser image.
    #[arg(long, env = "AIRLOCK_IMAGE", value_name = "TAG")]
    pub image: Option<String>,
    /// Time limit of a task, in seconds (5–3600; default 300).
    #[arg(long, env = "AIRLOCK_TIMEOUT", value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// How long a task that asked a person for help waits for them, in seconds (10–3600;
    /// default 600). The task's own time limit stands still meanwhile. `serve` only: elsewhere
    /// no person can be reached and the worker is not offered `ask_human`.
    #[arg(long, env = "AIRLOCK_HUMAN_TIMEOUT", value_name = "SECONDS")]
    pub human_timeout: Option<u64>,
    /// Seconds one browser command may take before it is stopped (5–600; default 60, the
    /// seed's). A `wait` or a slow page needs less than this; the task's own limit still holds.
    #[arg(long, env = "AIRLOCK_COMMAND_TIMEOUT", value_name = "SECONDS")]
    pub command_timeout: Option<u64>,
    /// `--direct` only: seconds a session's browser may sit with no command before it is removed
    /// (10–86400; default 300). On `serve` its MCP session is kept at least this long too.
    #[arg(long, env = "AIRLOCK_DIRECT_IDLE_TIMEOUT", value_name = "SECONDS")]
    pub direct_idle_timeout: Option<u64>,
    /// `--direct` only: seconds a session's browser lasts at most, used or not (60–86400;
    /// default 14400, four hours).
    #[arg(long, env = "AIRLOCK_DIRECT_LIFETIME", value_name = "SECONDS")]
    pub direct_lifetime: Option<u64>,
    /// `--direct` only: commands a session may run (1–1000000; default 0, no limit).
    #[arg(long, env = "AIRLOCK_DIRECT_MAX_STEPS", value_name = "N")]
    pub direct_max_steps: Option<usize>,
    /// The largest viewport a task may ask for, as WIDTHxHEIGHT (up to 3840x2160; default
    /// 1920x1080). Each pixel is the browser's memory.
    #[arg(long, env = "AIRLOCK_MAX_VIEWPORT", value_name = "WxH")]
    pub max_viewport: Option<String>,
    /// Tool calls a worker may make (1–500; default 40).
    #[arg(long, env = "AIRLOCK_MAX_STEPS", value_name = "N")]
    pub max_steps: Option<usize>,
    /// Screenshots a worker may keep (0–20; default 4).
    #[arg(long, env = "AIRLOCK_MAX_SCREENSHOTS", value_name = "N")]
    pub max_screenshots: Option<usize>,
    /// Largest screenshot kept or shown, in bytes (1024–10485760; default 4 MiB).
    #[arg(long, env = "AIRLOCK_MAX_SCREENSHOT_BYTES", value_name = "BYTES")]
    pub max_screenshot_bytes: Option<usize>,
    /// Longest tool output shown to the worker at once, in characters (1000–200000; default
    /// 10000). Longer outputs are shown as a preview the worker pages with `read_output`.
    #[arg(long, env = "AIRLOCK_MAX_OUTPUT_CHARS", value_name = "N")]
    pub max_output_chars: Option<usize>,
    /// Bytes of long outputs a task keeps for paging, oldest dropped first (0–268435456;
    /// default 8 MiB; 0 cuts long outputs instead).
    #[arg(long, env = "AIRLOCK_MAX_KEPT_OUTPUT_BYTES", value_name = "BYTES")]
    pub max_kept_output_bytes: Option<usize>,
    /// Tokens a task may spend, report included (0–1000000000; default 0, no budget). Each request
    /// is estimated before it is sent and held to what is left.
    #[arg(long, env = "AIRLOCK_MAX_TASK_TOKENS", value_name = "N")]
    pub max_task_tokens: Option<u64>,
    /// Longest side of an image shown to the worker, in pixels (256–8192; default 1568, or 2048
    /// for openai/ models). Kept screenshots stay full size.
    #[arg(long, env = "AIRLOCK_MAX_IMAGE_SIDE", value_name = "PIXELS")]
    pub max_image_side: Option<u32>,
    /// Let tasks download files, up to this many bytes each (1–268435456; default 0, off). A
    /// task's files come back to you (`task`: beside its screenshots) and the worker may read a
    /// downloaded PDF as text. For `mcp` and `serve`, the most a request may ask for.
    #[arg(long, env = "AIRLOCK_MAX_DOWNLOAD_BYTES", value_name = "BYTES")]
    pub max_download_bytes: Option<u64>,
    /// Tasks run at once by `airlock mcp` (1–16; default 2).
    #[arg(long, env = "AIRLOCK_MAX_CONCURRENT_TASKS", value_name = "N")]
    pub max_concurrent_tasks: Option<usize>,
    /// `public` (default): public unicast only. `local`: also loopback and private space.
    #[arg(long, env = "AIRLOCK_PROFILE", value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Open one exact destination: `host:port`, `ip:port`, `[ipv6]:port` or `cidr:port`.
    /// Repeatable (comma-separated in AIRLOCK_ALLOW). Cloud metadata addresses never open.
    #[arg(
        long = "allow",
        env = "AIRLOCK_ALLOW",
        value_name = "ENTRY",
        value_delimiter = ','
    )]
    pub allow: Vec<String>,
    /// Ports open to every allowed destination (default 80, 443). Repeatable.
    #[arg(
        long = "port",
        env = "AIRLOCK_PORTS",
        value_name = "N",
        value_delimiter = ','
    )]
    pub ports: Vec<u16>,
    /// Confine tasks to these sites: a name (`shop.example`, not its subdomains) or `*.` before
    /// one (`*.shop.example`, not the bare name). Repeatable (comma-separated in
    /// AIRLOCK_ALLOWED_DOMAINS). For `mcp` and `serve` it is the ceiling a request may narrow.
    #[arg(
        long = "allowed-domain",
        env = "AIRLOCK_ALLOWED_DOMAINS",
        value_name = "PATTERN",
        value_delimiter = ','
    )]
    pub allowed_domains: Vec<String>,
    /// Refuse these sites even where allowed (same patterns). Repeatable.
    #[arg(
        long = "blocked-domain",
        env = "AIRLOCK_BLOCKED_DOMAINS",
        value_name = "PATTERN",
        value_delimiter = ','
    )]
    pub blocked_domains: Vec<String>,
    /// A named secret the worker may have typed on its sites without seeing it:
    /// `NAME@DOMAIN[,DOMAIN…]=env:VAR` or `=file:PATH`. Repeatable. The sites must lie inside
    /// the allowed domains. For `mcp` and `serve`, the secrets callers may ask for by name.
    #[arg(long = "secret", value_name = "NAME@DOMAINS=SOURCE")]
    pub secrets: Vec<String>,
    /// Resolve names with this nameserver (`ip:port`) instead of the system's. Repeatable.
    #[arg(
        long = "nameserver",
        env = "AIRLOCK_NAMESERVERS",
        value_name = "ADDR",
        value_delimiter = ','
    )]
    pub nameservers: Vec<SocketAddr>,
    /// The routes: parents and the route tasks take.
    #[command(flatten)]
    pub routes: crate::route_flags::RouteFlags,
    /// Trust this CA (a PEM file: certificates only) in the sealed browser as well as the public
    /// roots, for a parent that inspects TLS with the company's CA. Repeatable. agent-browser's
    /// own fetches (`read`) trust it too, and so does the proxy's TLS to an `https://` parent;
    /// nothing on the host changes.
    #[arg(
        long = "ca-cert",
        env = "AIRLOCK_CA_CERTS",
        value_name = "FILE",
        value_delimiter = ','
    )]
    pub ca_certs: Vec<std::path::PathBuf>,
    /// Run Chromium without its own sandbox (renderers then share the container's user and
    /// seccomp filter). Only for hosts without unprivileged user namespaces; it is logged.
    #[arg(long, env = "AIRLOCK_NO_BROWSER_SANDBOX")]
    pub no_browser_sandbox: bool,
    /// Sealed browsers kept ready before tasks ask for them, each used by one task (0–8; default
    /// 0 for `task` and `browse`, 1 for `mcp` and `serve`); with --pool-max, the fewest kept.
    #[arg(
        long,
        visible_alias = "pool-min",
        env = "AIRLOCK_POOL_SIZE",
        value_name = "N"
    )]
    pub pool_size: Option<usize>,
    /// The most sealed browsers kept ready while tasks arrive (up to 8): the pool grows from
    /// --pool-size with the last minute's arrivals and the tasks that found it empty, and falls
    /// back after a minute with none. Default: the pool size (a fixed pool).
    #[arg(long, env = "AIRLOCK_POOL_MAX", value_name = "N")]
    pub pool_max: Option<usize>,
    /// Seconds a warm browser may wait before it is replaced (10–86400; default 600).
    #[arg(long, env = "AIRLOCK_POOL_MAX_AGE", value_name = "SECONDS")]
    pub pool_max_age: Option<u64>,
    /// The container runtime: `runc` (default), or `runsc` to run the browser's container under
    /// gVisor's user-space kernel (it must be registered with dockerd; `airlock doctor` says how).
    #[arg(long, env = "AIRLOCK_RUNTIME", value_name = "RUNTIME")]
    pub runtime: Option<String>,
    /// What the worker is told about its browser: `compact` (default), Airlock's short guide in
    /// the tool's call form, or `agent-browser`, agent-browser's own guide with every command
    /// and flag it documents, at about four times the tokens.
    #[arg(long, env = "AIRLOCK_GUIDE", value_name = "GUIDE")]
    pub guide: Option<String>,
}

/// `airlock.toml`: the same settings, all optional.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSettings {
    pub(crate) model: Option<String>,
    pub(crate) thinking: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) max_answer_tokens: Option<u32>,
    pub(crate) model_timeout: Option<u64>,
    pub(crate) image: Option<String>,
    pub(crate) timeout: Option<u64>,
    pub(crate) human_timeout: Option<u64>,
    pub(crate) command_timeout: Option<u64>,
    pub(crate) direct_idle_timeout: Option<u64>,
    pub(crate) direct_lifetime: Option<u64>,
    pub(crate) direct_max_steps: Option<usize>,
    pub(crate) max_viewport: Option<String>,
    pub(crate) max_steps: Option<usize>,
    pub(crate) max_screenshots: Option<usize>,
    pub(crate) max_screenshot_bytes: Option<usize>,
    pub(crate) max_output_chars: Option<usize>,
    pub(crate) max_kept_output_bytes: Option<usize>,
    pub(crate) max_task_tokens: Option<u64>,
    pub(crate) max_image_side: Option<u32>,
    pub(crate) max_concurrent_tasks: Option<usize>,
    pub(crate) max_download_bytes: Option<u64>,
    pub(crate) profile: Option<String>,
    pub(crate) allow: Option<Vec<String>>,
    pub(crate) ports: Option<Vec<u16>>,
    pub(crate) nameservers: Option<Vec<SocketAddr>>,
    pub(crate) allowed_domains: Option<Vec<String>>,
    pub(crate) blocked_domains: Option<Vec<String>>,
    pub(crate) browser_sandbox: Option<bool>,
    pub(crate) runtime: Option<String>,
    pub(crate) guide: Option<String>,
    pub(crate) pool_size: Option<usize>,
    pub(crate) pool_max: Option<usize>,
    pub(crate) pool_max_age: Option<u64>,
    pub(crate) parents: Option<std::collections::BTreeMap<String, FileParent>>,
    pub(crate) parent_from_environment: Option<bool>,
    pub(crate) route: Option<String>,
    pub(crate) ca_certs: Option<Vec<std::path::PathBuf>>,
}

/// One `[parents.NAME]` table of `airlock.toml`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileParent {
    /// `http://host:port`, `https://host:port` (the proxy spoken to over TLS) or
    /// `socks5://host:port`.
    pub(crate) url: String,
    /// Sites this route always carries.
    #[serde(default)]
    pub(crate) sites: Vec<String>,
    /// `file:PATH` or `env:VAR` holding `user:password`.
    pub(crate) credentials: Option<String>,
    /// Let the parent resolve names itself.
    #[serde(default)]
    pub(crate) resolves: bool,
}
