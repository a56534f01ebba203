//! The egress policy: which destinations the browser may reach, decided from data alone.
//!
//! The policy never resolves names. It decides in two steps: on the authority (scheme, credentials,
//! host spelling, port) before any lookup, and then on every address a resolver returned. Whoever
//! resolves (the proxy) must connect only to the addresses [`EgressPolicy::decide_resolved`] vetted.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use airlock_address::{Host, RangeKind, classify, embedded_ipv4, parse_host};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::Refusal;
use crate::scope::Scope;
use crate::url::{parse_http_url, parse_port, split_host_port};

/// Addresses that no profile and no allow entry opens: cloud metadata services, and the
/// "this host" addresses that reach the local machine on Linux.
pub(crate) static NEVER_OPENED: &[(IpNet, &str)] = &[
    (
        v4(169, 254, 169, 254, 32),
        "the cloud metadata service (AWS, GCP, Azure, OpenStack)",
    ),
    (
        v4(169, 254, 170, 2, 32),
        "the AWS ECS task metadata service",
    ),
    (
        IpNet::V6(Ipv6Net::new_assert(
            Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
            128,
        )),
        "the AWS IPv6 metadata service",
    ),
    (
        v4(100, 100, 100, 200, 32),
        "the Alibaba Cloud metadata service",
    ),
    (v4(192, 0, 0, 192, 32), "the Oracle Cloud metadata service"),
    (
        v4(0, 0, 0, 0, 8),
        "this-network space (it reaches this machine)",
    ),
    (
        IpNet::V6(Ipv6Net::new_assert(Ipv6Addr::UNSPECIFIED, 128)),
        "the unspecified address (it reaches this machine)",
    ),
];

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len))
}

/// The ports opened by default.
pub(crate) const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// How wide the policy opens before any allow entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Public unicast only.
    #[default]
    Public,
    /// Public, plus loopback, private and unique-local space (for a trusted lab network).
    Local,
}

impl Profile {
    /// The name used on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Local => "local",
        }
    }

    fn opens(self, kind: RangeKind) -> bool {
        match self {
            Self::Public => false,
            Self::Local => matches!(
                kind,
                RangeKind::Loopback | RangeKind::Private | RangeKind::UniqueLocal
            ),
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = PolicyError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "public" => Ok(Self::Public),
            "local" => Ok(Self::Local),
            _ => Err(PolicyError::Profile {
                given: text.to_owned(),
            }),
        }
    }
}

/// One deliberate opening: a name, an address or a block, always with one exact port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AllowEntry {
    /// `name:port`: the name on that port, whatever it resolves to (except never-opened addresses).
    Name {
        /// Normalised host name.
        name: String,
        /// The one port it opens.
        port: u16,
    },
    /// `ip:port`, `[ipv6]:port`, `cidr:port` or `[ipv6-cidr]:port`.
    Block {
        /// The address (as a /32 or /128) or block.
        net: IpNet,
        /// The one port it opens.
        port: u16,
    },
}

impl AllowEntry {
    fn port(&self) -> u16 {
        match self {
            Self::Name { port, .. } | Self::Block { port, .. } => *port,
        }
    }

    fn matches(&self, name: Option<&str>, ip: Option<IpAddr>, port: u16) -> bool {
        if self.port() != port {
            return false;
        }
        match self {
            Self::Name { name: allowed, .. } => name == Some(allowed.as_str()),
            Self::Block { net, .. } => ip.is_some_and(|ip| net.contains(&ip)),
        }
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name { name, port } => write!(f, "{name}:{port}"),
            Self::Block { net, port } => {
                let single = net.prefix_len() == net.max_prefix_len();
                match (net, single) {
                    (IpNet::V4(net), true) => write!(f, "{}:{port}", net.addr()),
                    (IpNet::V4(net), false) => write!(f, "{net}:{port}"),
                    (IpNet::V6(net), true) => write!(f, "[{}]:{port}", net.addr()),
                    (IpNet::V6(net), false) => write!(f, "[{net}]:{port}"),
                }
            }
        }
    }
}

impl FromStr for AllowEntry {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: String| PolicyError::AllowEntry {
            entry: text.to_owned(),
            why,
        };
        let (host, port) = if let Some(inner) = text.strip_prefix('[') {
            let (host, rest) = inner
                .split_once(']')
                .ok_or_else(|| bad("an opening `[` has no closing `]`".into()))?;
            let port = rest
                .strip_prefix(':')
                .ok_or_else(|| bad("the port is missing after `]`".into()))?;
            (host, port)
        } else {
            text.rsplit_once(':')
                .ok_or_else(|| bad("the port is missing".into()))?
        };
        let port = parse_port(port).map_err(|e| bad(e.to_string()))?;
        let net = if host.contains('/') {
            let net: IpNet = host
                .parse()
                .map_err(|_| bad(format!("`{host}` is not an address block")))?;
            net.trunc()
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            IpNet::from(ip)
        } else {
            return match parse_host(host).map_err(|e| bad(e.to_string()))? {
                Host::Domain(name) => Ok(Self::Name { name, port }),
                Host::Ip(ip) => Ok(Self::Block {
                    net: IpNet::from(ip),
                    port,
                }),
            };
        };
        if net.prefix_len() == net.max_prefix_len()
            && let Some(what) = never_opened(net.addr())
        {
            return Err(bad(format!(
                "{} is {what}, which nothing may open",
                net.addr()
            )));
        }
        Ok(Self::Block { net, port })
    }
}

/// Why a policy could not be built from the given settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// An unknown profile name.
    #[error("profile `{given}` is not known: use `public` (the default) or `local`")]
    Profile {
        /// What was given.
        given: String,
    },
    /// A port outside 1–65535.
    #[error("port `{given}` is not valid: use a number from 1 to 65535")]
    Port {
        /// What was given.
        given: String,
    },
    /// The port list ended up empty.
    #[error(
        "no ports are allowed: give at least one port, or leave the ports unset for 80 and 443"
    )]
    NoPorts,
    /// An allow entry that cannot be read or would open something never opened.
    #[error(
        "allow entry `{entry}` is not valid: {why}; write name:port, ip:port, [ipv6]:port or cidr:port"
    )]
    AllowEntry {
        /// The entry as given.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
}

/// Why a destination was let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowance {
    /// A public unicast address.
    Public,
    /// A non-public address the profile opens.
    Profile(Profile, RangeKind),
    /// An explicit allow entry.
    Entry(AllowEntry),
}

impl fmt::Display for Allowance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Public => f.write_str("public address"),
            Self::Profile(profile, kind) => {
                write!(
                    f,
                    "{} address opened by the {profile} profile",
                    kind.label()
                )
            }
            Self::Entry(entry) => write!(f, "opened by allow entry {entry}"),
        }
    }
}

/// The verdict on a URL or authority before any name is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// An address literal that may be reached.
    Allow {
        /// The address to connect to.
        ip: IpAddr,
        /// The port to connect to.
        port: u16,
        /// Why it may be reached.
        allowance: Allowance,
    },
    /// A name that passed every check that does not need its addresses: resolve it, then call
    /// [`EgressPolicy::decide_resolved`] with every answer.
    Resolve {
        /// The normalised name.
        name: String,
        /// The port to connect to.
        port: u16,
    },
    /// Refused before any lookup.
    Refuse(Refusal),
}

/// Which destinations the browser may reach.
///
/// ```
/// use airlock_policy::{Decision, EgressPolicy};
///
/// let policy = EgressPolicy::default();
/// assert!(matches!(policy.decide_url("https://example.com/"), Decision::Resolve { .. }));
/// let Decision::Refuse(why) = policy.decide_url("http://10.0.0.5/") else { panic!() };
/// assert_eq!(why.to_string(), "private address 10.0.0.5 (10.0.0.0/8)");
///
/// let lab = EgressPolicy::new(Default::default(), None, ["127.0.0.1:8080".parse().unwrap()]).unwrap();
/// assert!(matches!(lab.decide_url("http://127.0.0.1:8080/"), Decision::Allow { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    profile: Profile,
    ports: BTreeSet<u16>,
    allow: Vec<AllowEntry>,
    scope: Scope,
}

impl Default for EgressPolicy {
    /// The public profile on ports 80 and 443, with no allow entries.
    fn default() -> Self {
        Self {
            profile: Profile::Public,
            ports: DEFAULT_PORTS.into_iter().collect(),
            allow: Vec::new(),
            scope: Scope::default(),
        }
    }
}

impl EgressPolicy {
    /// A policy from its three settings; `ports: None` means 80 and 443.
    pub fn new(
        profile: Profile,
        ports: Option<Vec<u16>>,
        allow: impl IntoIterator<Item = AllowEntry>,
    ) -> Result<Self, PolicyError> {
        let ports: BTreeSet<u16> = match ports {
            None => DEFAULT_PORTS.into_iter().collect(),
            Some(ports) => {
                if let Some(zero) = ports.iter().find(|&&p| p == 0) {
                    return Err(PolicyError::Port {
                        given: zero.to_string(),
                    });
                }
                ports.into_iter().collect()
            }
        };
        if ports.is_empty() {
            return Err(PolicyError::NoPorts);
        }
        Ok(Self {
            profile,
            ports,
            allow: allow.into_iter().collect(),
            scope: Scope::default(),
        })
    }

    /// The same policy confined to `scope` (judged before the address rule for names, after it
    /// for address literals; both always apply).
    #[must_use]
    pub fn with_scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// The task's scope (unlimited unless [`Self::with_scope`] set one).
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The ports open to every allowed destination.
    pub fn ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.ports.iter().copied()
    }

    /// The explicit allow entries.
    pub fn allow_entries(&self) -> &[AllowEntry] {
        &self.allow
    }

    /// Decide on a URL as a browser would read it.
    pub fn decide_url(&self, url: &str) -> Decision {
        match parse_http_url(url) {
            Ok(target) => self.decide_host(&target.host, target.port),
            Err(refusal) => Decision::Refuse(refusal),
        }
    }

    /// Decide on a `host:port` authority, as in `CONNECT host:port`. The port is required.
    pub fn decide_authority(&self, authority: &str) -> Decision {
        let (host, port) = match split_host_port(authority) {
            Ok((host, Some(port))) => (host, port),
            Ok((_, None)) => {
                return Decision::Refuse(Refusal::Unreadable {
                    input: authority.to_owned(),
                    why: "the port is missing; write host:port",
                });
            }
            Err(refusal) => return Decision::Refuse(refusal),
        };
        match parse_host(host) {
            Ok(host) => self.decide_host(&host, port),
            Err(why) => Decision::Refuse(Refusal::Host(why)),
        }
    }

    /// Decide on a parsed host and port.
    pub fn decide_host(&self, host: &Host, port: u16) -> Decision {
        match host {
            Host::Ip(ip) => match self.judge_address(None, *ip, Some(port)) {
                Ok(allowance) => match self.scope.judge(host) {
                    Ok(()) => Decision::Allow {
                        ip: *ip,
                        port,
                        allowance,
                    },
                    Err(refusal) => Decision::Refuse(refusal),
                },
                Err(refusal) => Decision::Refuse(refusal),
            },
            Host::Domain(name) => {
                // Out of scope is decided on the name alone: it is never looked up.
                if let Err(refusal) = self.scope.judge(host) {
                    return Decision::Refuse(refusal);
                }
                // Before resolution a name may use a port that the policy opens or that some
                // allow entry names; every answer is then held to the exact rules.
                let port_in_entry = self.allow.iter().any(|entry| entry.port() == port);
                if !port_in_entry && !self.ports.contains(&port) {
                    return Decision::Refuse(self.port_refusal(port));
                }
                Decision::Resolve {
                    name: name.clone(),
                    port,
                }
            }
        }
    }

    /// Judge one address, with the port when there is one (`None` judges the address alone).
    pub fn decide_address(&self, ip: IpAddr, port: Option<u16>) -> Result<Allowance, Refusal> {
        self.judge_address(None, ip, port)
    }

    /// Judge every address a name resolved to. All must pass, or the name is refused: a name
    /// that resolves to a mix of allowed and refused addresses is refused as a whole. Returns the
    /// vetted addresses exactly as judged (a caller connects to nothing else), in resolver order,
    /// without duplicates.
    pub fn decide_resolved(
        &self,
        name: &str,
        port: u16,
        addresses: &[IpAddr],
    ) -> Result<Vec<IpAddr>, Refusal> {
        if addresses.is_empty() {
            return Err(Refusal::NoAddresses {
                name: name.to_owned(),
            });
        }
        let mut vetted = Vec::with_capacity(addresses.len());
        let mut first_refusal = None;
        for &ip in addresses {
            match self.judge_address(Some(name), ip, Some(port)) {
                Ok(_) => {
                    if !vetted.contains(&ip) {
                        vetted.push(ip);
                    }
                }
                Err(refusal) => {
                    first_refusal.get_or_insert(refusal);
                }
            }
        }
        match first_refusal {
            None => Ok(vetted),
            Some(refusal) => Err(Refusal::Resolved {
                name: name.to_owned(),
                allowed_answers: vetted.len(),
                refusal: Box::new(refusal),
            }),
        }
    }

    fn judge_address(
        &self,
        name: Option<&str>,
        ip: IpAddr,
        port: Option<u16>,
    ) -> Result<Allowance, Refusal> {
        // The never list also sees an IPv4 address carried inside an IPv6 one, so its reason
        // names the service rather than the spelling.
        let carried = match ip {
            IpAddr::V6(v6) => embedded_ipv4(v6).map(|e| IpAddr::V4(e.ipv4)),
            IpAddr::V4(_) => None,
        };
        for candidate in std::iter::once(ip).chain(carried) {
            if let Some(what) = never_opened(candidate) {
                return Err(Refusal::Never { ip, what });
            }
        }
        // An entry opens exactly the address it names: not a mapped, compatible or NAT64
        // spelling of it, which would reach another address (or the same one another way).
        if let Some(port) = port
            && let Some(entry) = self
                .allow
                .iter()
                .find(|entry| entry.matches(name, Some(ip), port))
        {
            return Ok(Allowance::Entry(entry.clone()));
        }
        let allowance = match classify(ip) {
            Ok(()) => Allowance::Public,
            Err(why) if self.profile.opens(why.kind()) => {
                Allowance::Profile(self.profile, why.kind())
            }
            Err(why) => return Err(Refusal::Address { ip, why }),
        };
        match port {
            Some(port) if !self.ports.contains(&port) => Err(self.port_refusal(port)),
            _ => Ok(allowance),
        }
    }

    fn port_refusal(&self, port: u16) -> Refusal {
        let allowed: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        Refusal::PortNotAllowed {
            port,
            allowed: allowed.join(", "),
        }
    }
}

/// What a never-opened address is, if `ip` is one.
pub(crate) fn never_opened(ip: IpAddr) -> Option<&'static str> {
    NEVER_OPENED
        .iter()
        .find_map(|(block, what)| block.contains(&ip).then_some(*what))
}
