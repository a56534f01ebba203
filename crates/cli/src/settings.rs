//! Settings for commands that run browser tasks: from flags, then `AIRLOCK_*` environment
//! variables, then `airlock.toml` in the XDG config directory, then defaults. Every value keeps
//! where it came from, so `airlock doctor` can show it, and every bad value names itself.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_driver_docker::{DriverConfig, default_image};
use airlock_policy::{AllowEntry, EgressPolicy, Profile, Scope};
use airlock_worker::{DEFAULT_MAX_IMAGE_SIDE, MAX_DOWNLOAD_BYTES_CEILING, Secrets, TaskLimits};
use anyhow::{Context, bail};
use clap::ArgMatches;

use crate::setting_flags::FileSettings;
pub(crate) use crate::setting_flags::SettingFlags;

mod browser;
pub(crate) mod ca;
mod model;
mod routes;

pub(crate) use model::ModelLimits;
pub(crate) use routes::routes_of;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A command-line flag.
    Flag,
    /// An `AIRLOCK_*` variable.
    Env(&'static str),
    /// The config file.
    File(PathBuf),
    /// Built in.
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Flag => f.write_str("flag"),
            Self::Env(name) => write!(f, "env {name}"),
            Self::File(path) => write!(f, "file {}", path.display()),
            Self::Default => f.write_str("default"),
        }
    }
}

/// One effective setting, for display.
#[derive(Debug, Clone)]
pub(crate) struct Shown {
    /// The setting's name.
    pub name: &'static str,
    /// Its value, as text.
    pub value: String,
    /// Where it came from.
    pub source: Source,
}

/// The effective settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The model spec, if any.
    pub model: Option<String>,
    /// The thinking level, if any.
    pub thinking: Option<String>,
    /// A base URL for OpenAI-compatible endpoints.
    pub base_url: Option<String>,
    /// How long each answer may be, and take.
    pub model_limits: ModelLimits,
    /// The driver's configuration (image, egress, nameservers).
    pub driver: DriverConfig,
    /// The task limits.
    pub limits: TaskLimits,
    /// The sites tasks may reach: a task's own for `task` and `browse`, the ceiling a request may
    /// narrow for `mcp` and `serve`.
    pub scope: Scope,
    /// The named secrets (values loaded, never shown): a task's own for `task`, what callers may
    /// ask for by name for `mcp` and `serve`.
    pub secrets: Secrets,
    /// Downloads up to this many bytes (`None`: off): a task's own for `task`, the most a
    /// request may ask for with `mcp` and `serve`.
    pub max_download_bytes: Option<u64>,
    /// How long a `--direct` session's browser lasts.
    pub direct: airlock_worker::DirectLimits,
    /// The largest viewport (width, height) a task may ask for.
    pub max_viewport: (u32, u32),
    /// Every value with its source.
    pub shown: Vec<Shown>,
}

/// The config file's path: `AIRLOCK_CONFIG`, else `$XDG_CONFIG_HOME/airlock/airlock.toml`, else
/// `~/.config/airlock/airlock.toml`.
pub(crate) fn config_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AIRLOCK_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("airlock").join("airlock.toml"))
}

fn read_file(path: Option<&Path>) -> anyhow::Result<FileSettings> {
    let Some(path) = path else {
        return Ok(FileSettings::default());
    };
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text)
            .with_context(|| format!("{} is not a valid airlock.toml", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(FileSettings::default()),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Resolves one value from its three places, recording where it came from.
struct Resolver<'a> {
    matches: Option<&'a ArgMatches>,
    file_path: Option<PathBuf>,
    shown: Vec<Shown>,
}

impl Resolver<'_> {
    fn source(&self, name: &str, env: &'static str) -> Source {
        // Settings are named for what they are; the one negative flag is named for what it does.
        let id = if name == "browser_sandbox" {
            "no_browser_sandbox"
        } else {
            name
        };
        match self.matches.and_then(|m| m.value_source(id)) {
            Some(clap::parser::ValueSource::EnvVariable) => Source::Env(env),
            _ => Source::Flag,
        }
    }

    fn pick<T: Clone + std::fmt::Debug>(
        &mut self,
        name: &'static str,
        env: &'static str,
        flag: Option<T>,
        file: Option<T>,
        default: T,
        show: impl Fn(&T) -> String,
    ) -> T {
        let (value, source) = match (flag, file) {
            (Some(value), _) => (value, self.source(name, env)),
            (None, Some(value)) => (
                value,
                Source::File(self.file_path.clone().unwrap_or_default()),
            ),
            (None, None) => (default, Source::Default),
        };
        self.shown.push(Shown {
            name,
            value: show(&value),
            source,
        });
        value
    }
}

impl Settings {
    /// Resolve the effective settings. `matches` are the parsed command line, used to tell flags
    /// from environment variables.
    pub(crate) fn resolve(
        flags: &SettingFlags,
        matches: Option<&ArgMatches>,
    ) -> anyhow::Result<Self> {
        let file_path = config_path();
        let file = read_file(file_path.as_deref())?;
        let mut r = Resolver {
            matches,
            file_path,
            shown: Vec::new(),
        };
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        let model = r.pick(
            "model",
            "AIRLOCK_MODEL",
            flags.model.clone().map(Some),
            file.model.clone().map(Some),
            None,
            text,
        );
        let thinking = r.pick(
            "thinking",
            "AIRLOCK_THINKING",
            flags.thinking.clone().map(Some),
            file.thinking.clone().map(Some),
            None,
            text,
        );
        let base_url = r.pick(
            "base_url",
            "AIRLOCK_BASE_URL",
            flags.base_url.clone().map(Some),
            file.base_url.clone().map(Some),
            None,
            text,
        );
        if let Some(url) = &base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("--base-url `{url}` must start with http:// or https://");
        }
        let image = r.pick(
            "image",
            "AIRLOCK_IMAGE",
            flags.image.clone(),
            file.image.clone(),
            default_image(),
            Clone::clone,
        );
        let browser_sandbox = r.pick(
            "browser_sandbox",
            "AIRLOCK_NO_BROWSER_SANDBOX",
            flags.no_browser_sandbox.then_some(false),
            file.browser_sandbox,
            true,
            |on| if *on { "on" } else { "off" }.to_owned(),
        );
        if !browser_sandbox {
            tracing::warn!(
                "Chromium's own sandbox is off (--no-browser-sandbox): a renderer exploit would run as the task's user in the container, held only by the container and the egress proxy"
            );
        }
        let model_limits = r.model_limits(flags, &file)?;
        let (runtime, guide) = r.runtime_and_guide(flags, &file)?;
        let command_timeout = r.command_timeout(flags, &file)?;
        let direct = r.direct(flags, &file)?;
        let max_viewport = r.max_viewport(flags, &file)?;
        let limits = r.limits(flags, &file, model.as_deref())?;
        let max_download_bytes = r.download_budget(flags, &file)?;
        let pool = r.pool(flags, &file, limits.timeout + limits.human_timeout)?;
        let (scope, secrets) = r.scope_and_secrets(flags, &file)?;
        let routes = r.routes(flags, &file)?;
        let ca_certs = r.ca_certs(flags, &file)?;
        let (egress, nameservers) = r.egress(flags, file)?;
        let driver = DriverConfig {
            image,
            egress,
            nameservers,
            routes,
            ca_certs,
            browser_sandbox,
            runtime,
            pool,
            guide,
            command_timeout,
            ..DriverConfig::default()
        };
        Ok(Self {
            model,
            thinking,
            base_url,
            model_limits,
            driver,
            limits,
            scope,
            secrets,
            max_download_bytes,
            direct,
            max_viewport,
            shown: r.shown,
        })
    }
}

impl Settings {
    /// A command whose tasks come one after another (`mcp`, `serve`) keeps `size` browsers
    /// warm unless the user chose otherwise.
    pub(crate) fn with_default_pool(mut self, size: usize) -> Self {
        if let Some(shown) = self
            .shown
            .iter_mut()
            .find(|shown| shown.name == "pool_size" && shown.source == Source::Default)
        {
            shown.value = size.to_string();
            self.driver.pool.size = size;
        }
        self
    }

    /// What a server's tasks are held to.
    pub(crate) fn for_tasks(&self) -> airlock_service::TaskSettings {
        airlock_service::TaskSettings {
            limits: self.limits,
            scope: self.scope.clone(),
            secrets: self.secrets.clone(),
            max_download_bytes: self.max_download_bytes,
            routes: airlock_service::scope_request::RouteNames::of(&self.driver.routes),
            direct: self.direct,
            max_viewport: self.max_viewport,
        }
    }

    /// For `--direct`: warm browsers whose containers last a direct session's lifetime, so a
    /// session can take one.
    pub(crate) fn for_direct(mut self) -> Self {
        let pool = &mut self.driver.pool;
        pool.task_timeout = pool.task_timeout.max(self.direct.lifetime);
        self
    }
}

/// How a count where 0 has a meaning of its own is shown: `0 (off)`, or the number.
pub(super) fn zero_means<T: std::fmt::Display + PartialEq + From<u8>>(
    meaning: &'static str,
) -> impl Fn(&T) -> String {
    move |v| {
        if *v == T::from(0) {
            format!("0 ({meaning})")
        } else {
            v.to_string()
        }
    }
}

impl Resolver<'_> {
    /// `max_download_bytes`: `None` (off) unless set to 1 byte or more.
    fn download_budget(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<Option<u64>> {
        let bytes = self.pick(
            "max_download_bytes",
            "AIRLOCK_MAX_DOWNLOAD_BYTES",
            flags.max_download_bytes,
            file.max_download_bytes,
            0,
            zero_means("off"),
        );
        if bytes > MAX_DOWNLOAD_BYTES_CEILING {
            bail!(
                "max_download_bytes {bytes} is over {MAX_DOWNLOAD_BYTES_CEILING}: give 1 to {MAX_DOWNLOAD_BYTES_CEILING} bytes, or 0 for no downloads (set it with --max-download-bytes or AIRLOCK_MAX_DOWNLOAD_BYTES)"
            );
        }
        Ok((bytes > 0).then_some(bytes))
    }

    fn limits(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
        model: Option<&str>,
    ) -> anyhow::Result<TaskLimits> {
        let defaults = TaskLimits::default();
        // Each vendor's advice: Anthropic scales images past 1568 px, OpenAI's high detail fits 2048.
        let image_side = if model.is_some_and(|m| m.starts_with("openai/")) {
            2048
        } else {
            DEFAULT_MAX_IMAGE_SIDE
        };
        let number = |v: &usize| v.to_string();
        let limits = TaskLimits {
            timeout: self.seconds(
                ("timeout", "AIRLOCK_TIMEOUT"),
                flags.timeout,
                file.timeout,
                defaults.timeout,
            ),
            human_timeout: self.seconds(
                ("human_timeout", "AIRLOCK_HUMAN_TIMEOUT"),
                flags.human_timeout,
                file.human_timeout,
                defaults.human_timeout,
            ),
            max_steps: self.pick(
                "max_steps",
                "AIRLOCK_MAX_STEPS",
                flags.max_steps,
                file.max_steps,
                defaults.max_steps,
                number,
            ),
            max_screenshots: self.pick(
                "max_screenshots",
                "AIRLOCK_MAX_SCREENSHOTS",
                flags.max_screenshots,
                file.max_screenshots,
                defaults.max_screenshots,
                number,
            ),
            max_screenshot_bytes: self.pick(
                "max_screenshot_bytes",
                "AIRLOCK_MAX_SCREENSHOT_BYTES",
                flags.max_screenshot_bytes,
                file.max_screenshot_bytes,
                defaults.max_screenshot_bytes,
                number,
            ),
            max_output_chars: self.pick(
                "max_output_chars",
                "AIRLOCK_MAX_OUTPUT_CHARS",
                flags.max_output_chars,
                file.max_output_chars,
                defaults.max_output_chars,
                number,
            ),
            max_kept_output_bytes: self.pick(
                "max_kept_output_bytes",
                "AIRLOCK_MAX_KEPT_OUTPUT_BYTES",
                flags.max_kept_output_bytes,
                file.max_kept_output_bytes,
                defaults.max_kept_output_bytes,
                number,
            ),
            max_task_tokens: self.pick(
                "max_task_tokens",
                "AIRLOCK_MAX_TASK_TOKENS",
                flags.max_task_tokens,
                file.max_task_tokens,
                defaults.max_task_tokens,
                zero_means("no budget"),
            ),
            max_image_side: self.pick(
                "max_image_side",
                "AIRLOCK_MAX_IMAGE_SIDE",
                flags.max_image_side,
                file.max_image_side,
                image_side,
                |v| format!("{v} px"),
            ),
            max_concurrent_tasks: self.pick(
                "max_concurrent_tasks",
                "AIRLOCK_MAX_CONCURRENT_TASKS",
                flags.max_concurrent_tasks,
                file.max_concurrent_tasks,
                defaults.max_concurrent_tasks,
                number,
            ),
        };
        limits.validate().map_err(|e| {
            anyhow::anyhow!(
                "{e} (set it with --{} or AIRLOCK_{})",
                e.option.replace('_', "-"),
                e.option.to_ascii_uppercase()
            )
        })?;
        Ok(limits)
    }

    pub(super) fn seconds(
        &mut self,
        (name, env): (&'static str, &'static str),
        flag: Option<u64>,
        file: Option<u64>,
        default: Duration,
    ) -> Duration {
        Duration::from_secs(self.pick(name, env, flag, file, default.as_secs(), |v| {
            format!("{v} s")
        }))
    }

    /// [`Self::seconds`], refused with the range and where to set it when outside `range`.
    pub(super) fn seconds_within(
        &mut self,
        (name, env): (&'static str, &'static str),
        flag: Option<u64>,
        file: Option<u64>,
        default: Duration,
        range: std::ops::RangeInclusive<u64>,
    ) -> anyhow::Result<Duration> {
        let value = self.seconds((name, env), flag, file, default);
        if !range.contains(&value.as_secs()) {
            bail!(
                "--{} {} is out of range: use a value from {} to {} seconds ({env})",
                name.replace('_', "-"),
                value.as_secs(),
                range.start(),
                range.end()
            );
        }
        Ok(value)
    }

    /// The scope, and the secrets (which it must cover).
    fn scope_and_secrets(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<(Scope, Secrets)> {
        let scope = self.scope(flags, file)?;
        let secrets = crate::secret_flags::load(&flags.secrets)?;
        secrets
            .check_scope(&scope)
            .map_err(|e| anyhow::anyhow!("--secret: {e}"))?;
        Ok((scope, secrets))
    }

    fn scope(&mut self, flags: &SettingFlags, file: &FileSettings) -> anyhow::Result<Scope> {
        let non_empty = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        let joined = |v: &Vec<String>| {
            if v.is_empty() {
                "(any)".to_owned()
            } else {
                v.join(", ")
            }
        };
        let allowed = self.pick(
            "allowed_domains",
            "AIRLOCK_ALLOWED_DOMAINS",
            non_empty(&flags.allowed_domains),
            file.allowed_domains.clone(),
            Vec::new(),
            joined,
        );
        let blocked = self.pick(
            "blocked_domains",
            "AIRLOCK_BLOCKED_DOMAINS",
            non_empty(&flags.blocked_domains),
            file.blocked_domains.clone(),
            Vec::new(),
            |v| {
                if v.is_empty() {
                    "(none)".to_owned()
                } else {
                    v.join(", ")
                }
            },
        );
        Scope::parse(&allowed, &blocked)
            .map_err(|e| anyhow::anyhow!("--allowed-domain / --blocked-domain: {e}"))
    }

    fn egress(
        &mut self,
        flags: &SettingFlags,
        file: FileSettings,
    ) -> anyhow::Result<(EgressPolicy, Vec<SocketAddr>)> {
        let profile_text = self.pick(
            "profile",
            "AIRLOCK_PROFILE",
            flags.profile.clone(),
            file.profile,
            "public".into(),
            Clone::clone,
        );
        let profile: Profile = profile_text
            .parse()
            .map_err(|e| anyhow::anyhow!("--profile: {e}"))?;
        let non_empty = |v: Vec<String>| (!v.is_empty()).then_some(v);
        let allow_text = self.pick(
            "allow",
            "AIRLOCK_ALLOW",
            non_empty(flags.allow.clone()),
            file.allow,
            Vec::new(),
            |v| v.join(", "),
        );
        let allow = allow_text
            .iter()
            .map(|entry| {
                entry
                    .parse::<AllowEntry>()
                    .map_err(|e| anyhow::anyhow!("--allow: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let ports = self.pick(
            "ports",
            "AIRLOCK_PORTS",
            (!flags.ports.is_empty()).then(|| flags.ports.clone()),
            file.ports,
            Vec::new(),
            |v| {
                if v.is_empty() {
                    "80, 443".into()
                } else {
                    v.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
                }
            },
        );
        let egress = EgressPolicy::new(profile, (!ports.is_empty()).then_some(ports), allow)
            .map_err(|e| anyhow::anyhow!("--port: {e}"))?;
        let nameservers = self.pick(
            "nameservers",
            "AIRLOCK_NAMESERVERS",
            (!flags.nameservers.is_empty()).then(|| flags.nameservers.clone()),
            file.nameservers,
            Vec::new(),
            |v| {
                if v.is_empty() {
                    "(system)".into()
                } else {
                    v.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            },
        );
        Ok((egress, nameservers))
    }
}
