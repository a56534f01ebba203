//! The egress flags of `airlock egress check` and `airlock proxy`, read from the command line
//! only: a check or a stand-alone proxy does exactly what was typed. Commands that run browser
//! tasks take the same flags through `settings.rs`, where they may also come from the
//! environment or the config file.

use airlock_policy::{AllowEntry, EgressPolicy, Profile, Scope};
use clap::Args;

/// `--profile`, `--allow`, `--port`: how wide the egress proxy opens; `--allowed-domain`,
/// `--blocked-domain`: the sites it is confined to.
#[derive(Debug, Clone, Args)]
pub(crate) struct EgressFlags {
    /// `public` (default): public unicast only. `local`: also loopback and private space.
    #[arg(long, value_name = "PROFILE", default_value = "public", value_parser = parse_profile)]
    pub profile: Profile,

    /// Open one exact destination, whatever its address class: `host:port`, `ip:port`,
    /// `[ipv6]:port` or `cidr:port`. Repeatable. Cloud metadata addresses never open.
    #[arg(long = "allow", value_name = "ENTRY", value_parser = parse_allow)]
    pub allow: Vec<AllowEntry>,

    /// Ports open to every allowed destination (default 80 and 443). Repeatable; giving any
    /// replaces the default.
    #[arg(long = "port", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub ports: Vec<u16>,

    /// Confine to these sites: a name (`shop.example`, not its subdomains) or `*.` before one
    /// (`*.shop.example`, not the bare name). Repeatable. Address literals are then out of scope.
    #[arg(long = "allowed-domain", value_name = "PATTERN")]
    pub allowed_domains: Vec<String>,

    /// Refuse these sites even where allowed (same patterns). Repeatable.
    #[arg(long = "blocked-domain", value_name = "PATTERN")]
    pub blocked_domains: Vec<String>,
}

impl EgressFlags {
    /// The policy these flags describe.
    pub(crate) fn policy(&self) -> anyhow::Result<EgressPolicy> {
        let ports = (!self.ports.is_empty()).then(|| self.ports.clone());
        let scope = Scope::parse(&self.allowed_domains, &self.blocked_domains)
            .map_err(|e| anyhow::anyhow!("--allowed-domain / --blocked-domain: {e}"))?;
        Ok(EgressPolicy::new(self.profile, ports, self.allow.iter().cloned())?.with_scope(scope))
    }
}

fn parse_profile(text: &str) -> Result<Profile, String> {
    text.parse()
        .map_err(|e: airlock_policy::PolicyError| e.to_string())
}

fn parse_allow(text: &str) -> Result<AllowEntry, String> {
    text.parse()
        .map_err(|e: airlock_policy::PolicyError| e.to_string())
}
