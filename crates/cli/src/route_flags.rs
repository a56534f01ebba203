//! The route flags: `--parent` and its companions, and `--route`. Commands that run browser tasks
//! take them through `settings.rs` (where `airlock.toml` may name parents too); `airlock proxy`
//! takes them as they are.

use clap::Args;

/// Parents (company proxies) and the route destinations take.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct RouteFlags {
    /// A route through a company's proxy: `NAME=http://host:port` (HTTP CONNECT),
    /// `NAME=https://host:port` (HTTP CONNECT over TLS to the proxy) or
    /// `NAME=socks5://host:port`. Repeatable. Airlock still resolves and vets every destination
    /// and asks the parent for the vetted address. Credentials never go in the URL: see
    /// --parent-credentials.
    #[arg(
        long = "parent",
        env = "AIRLOCK_PARENTS",
        value_name = "NAME=URL",
        value_delimiter = ','
    )]
    pub parents: Vec<String>,
    /// Sites a parent's route always carries, whatever route a task takes: `NAME=PATTERN` (the
    /// allowed-domain patterns). Repeatable.
    #[arg(
        long = "parent-site",
        env = "AIRLOCK_PARENT_SITES",
        value_name = "NAME=PATTERN",
        value_delimiter = ','
    )]
    pub parent_sites: Vec<String>,
    /// A parent's username and password, `user:password` on one line, from
    /// `NAME=file:PATH` or `NAME=env:VAR` (never the command line). Repeatable. Never logged,
    /// recorded or shown to the worker.
    #[arg(
        long = "parent-credentials",
        env = "AIRLOCK_PARENT_CREDENTIALS",
        value_name = "NAME=SOURCE",
        value_delimiter = ','
    )]
    pub parent_credentials: Vec<String>,
    /// Let this parent resolve names itself (for hosts that cannot resolve public names):
    /// Airlock then judges the name but not its addresses, which become the parent's to check.
    /// Repeatable; `airlock doctor` says what it gives up.
    #[arg(
        long = "parent-resolves",
        env = "AIRLOCK_PARENT_RESOLVES",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub parent_resolves: Vec<String>,
    /// Make the host's HTTPS_PROXY (else ALL_PROXY, else HTTP_PROXY) a route named
    /// `environment`, the default unless --route says otherwise; NO_PROXY's names go direct.
    #[arg(long, env = "AIRLOCK_PARENT_FROM_ENVIRONMENT")]
    pub parent_from_environment: bool,
    /// The route tasks leave by unless they pick another: `direct` (the default) or a parent's
    /// name. For `task` and `browse`, the task's own.
    #[arg(long, env = "AIRLOCK_ROUTE", value_name = "NAME")]
    pub route: Option<String>,
}
