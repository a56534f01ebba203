//! `airlock egress check`: ask the egress policy about destinations, one line per target.

use std::io::{BufRead, Write};
use std::net::{IpAddr, SocketAddr};

use airlock_address::{Host, parse_host};
use airlock_policy::{Decision, EgressPolicy, Refusal};
use airlock_proxy::{HickoryResolver, ProxyLimits, Resolver};
use clap::Args;
use serde::Serialize;

use crate::egress_flags::EgressFlags;

/// Arguments of `airlock egress check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    egress: EgressFlags,

    /// Print one JSON object per target instead of a line of text.
    #[arg(long)]
    json: bool,

    /// Resolve names and judge every answer, exactly as the proxy would: its own resolver (no
    /// `/etc/hosts`, no search domains), the system's nameservers unless --nameserver is given.
    #[arg(long)]
    resolve: bool,

    /// With --resolve: ask this nameserver (`ip:port`) instead of the system's. Repeatable.
    #[arg(long = "nameserver", value_name = "ADDR", requires = "resolve")]
    nameservers: Vec<SocketAddr>,

    /// URLs (`https://host/path`), authorities (`host:port`, `[ipv6]:port`) or IP literals.
    /// A bare name is read as `https://name`. Read from stdin, one per line, when none are given.
    #[arg(value_name = "TARGET")]
    targets: Vec<String>,
}

/// One target's verdict, as printed.
#[derive(Debug, Serialize)]
struct Judgement {
    target: String,
    verdict: &'static str,
    /// Which rule decided: `scope`, `address`, `port`, `url` or `resolution`; for an allowed
    /// target, `scope+address` when a scope is set (both passed), else `address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    addresses: Vec<IpAddr>,
}

impl Judgement {
    fn refuse(target: &str, refusal: &Refusal) -> Self {
        Self {
            target: target.to_owned(),
            verdict: "refuse",
            rule: Some(rule_of(refusal)),
            reason: Some(refusal.to_string()),
            class: Some(refusal.class()),
            addresses: Vec::new(),
        }
    }

    fn allow(policy: &EgressPolicy, target: &str, reason: String, addresses: Vec<IpAddr>) -> Self {
        let rule = if policy.scope().is_unlimited() {
            "address"
        } else {
            "scope+address"
        };
        Self {
            target: target.to_owned(),
            verdict: "allow",
            rule: Some(rule),
            reason: Some(reason),
            class: None,
            addresses,
        }
    }

    fn line(&self) -> String {
        match (self.verdict, &self.reason) {
            ("refuse", Some(reason)) => format!("refuse {}: {reason}", self.target),
            (verdict, _) => format!("{verdict} {}", self.target),
        }
    }
}

/// Run the command; refused targets are output, not errors.
pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<()> {
    let policy = args.egress.policy().map_err(crate::bad_input)?;
    let lookup = if args.resolve {
        Some(Lookup::new(&args.nameservers)?)
    } else {
        None
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut emit = |target: &str| -> anyhow::Result<()> {
        let verdict = judge(&policy, target.trim(), lookup.as_ref());
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&verdict)?)?;
        } else {
            writeln!(out, "{}", verdict.line())?;
        }
        Ok(())
    };
    if args.targets.is_empty() {
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            let target = line.trim();
            if !target.is_empty() && !target.starts_with('#') {
                emit(target)?;
            }
        }
    } else {
        for target in &args.targets {
            emit(target)?;
        }
    }
    Ok(())
}

fn judge(policy: &EgressPolicy, target: &str, lookup: Option<&Lookup>) -> Judgement {
    if let Ok(ip) = target.parse::<IpAddr>() {
        let judged = policy
            .decide_address(ip, None)
            .and_then(|allowance| policy.scope().judge(&Host::Ip(ip)).map(|()| allowance));
        return match judged {
            Ok(allowance) => Judgement::allow(policy, target, allowance.to_string(), Vec::new()),
            Err(refusal) => Judgement::refuse(target, &refusal),
        };
    }
    let decision = if target.contains("://") {
        policy.decide_url(target)
    } else if target.starts_with('[') || target.contains(':') {
        policy.decide_authority(target)
    } else {
        match parse_host(target) {
            Ok(Host::Domain(_)) => policy.decide_url(&format!("https://{target}")),
            Ok(host @ Host::Ip(_)) => policy.decide_host(&host, 443),
            Err(why) => Decision::Refuse(Refusal::Host(why)),
        }
    };
    match decision {
        Decision::Allow { allowance, .. } => {
            Judgement::allow(policy, target, allowance.to_string(), Vec::new())
        }
        Decision::Refuse(refusal) => Judgement::refuse(target, &refusal),
        Decision::Resolve { name, port } => match lookup.map(|lookup| lookup.resolve(&name)) {
            Some(Ok(addresses)) => match policy.decide_resolved(&name, port, &addresses) {
                Ok(vetted) => {
                    Judgement::allow(policy, target, "every answer passed".into(), vetted)
                }
                Err(refusal) => Judgement::refuse(target, &refusal),
            },
            Some(Err(why)) => Judgement {
                target: target.to_owned(),
                verdict: "refuse",
                rule: Some("resolution"),
                reason: Some(why),
                class: Some("no-address"),
                addresses: Vec::new(),
            },
            None => Judgement {
                target: target.to_owned(),
                verdict: "resolve",
                rule: None,
                reason: Some(
                    "the verdict depends on what the name resolves to; add --resolve to look it up"
                        .into(),
                ),
                class: None,
                addresses: Vec::new(),
            },
        },
    }
}

/// Which rule a refusal comes from, for `--json`.
fn rule_of(refusal: &Refusal) -> &'static str {
    match refusal {
        Refusal::OutOfScope { .. } => "scope",
        Refusal::Scheme { .. }
        | Refusal::Userinfo
        | Refusal::Unreadable { .. }
        | Refusal::Ambiguous { .. }
        | Refusal::Host(_) => "url",
        Refusal::BadPort { .. } | Refusal::PortNotAllowed { .. } => "port",
        Refusal::NoAddresses { .. } => "resolution",
        Refusal::Never { .. } | Refusal::Address { .. } | Refusal::Resolved { .. } => "address",
    }
}

/// The proxy's own resolver, on a small runtime of its own: what `--resolve` sees is what the
/// proxy would connect to.
struct Lookup {
    runtime: tokio::runtime::Runtime,
    resolver: HickoryResolver,
    timeout: std::time::Duration,
}

impl Lookup {
    fn new(nameservers: &[SocketAddr]) -> anyhow::Result<Self> {
        let resolver = if nameservers.is_empty() {
            HickoryResolver::system()?
        } else {
            HickoryResolver::with_nameservers(nameservers).map_err(crate::bad_input)?
        };
        Ok(Self {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            resolver,
            timeout: ProxyLimits::default().resolve_timeout,
        })
    }

    /// Every address of `name`, or why there is none, in the proxy's words.
    fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        self.runtime.block_on(async {
            match tokio::time::timeout(self.timeout, self.resolver.resolve(name)).await {
                Ok(Ok(addresses)) => Ok(addresses),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!("looking up `{name}` timed out")),
            }
        })
    }
}
