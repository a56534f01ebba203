//! A task's egress scope: the named sites it may reach, judged on the name the browser asked for.
//!
//! Names are compared after the browser's own normalisation (case, trailing dot, IDNA to
//! punycode: [`airlock_address::parse_host`]), label by label, so `example.com.evil.net`,
//! `evil-example.com` and a Cyrillic `exampl\u{435}.com` never match `example.com`. A scope is a
//! further limit on top of the address rule, never instead of it.

use std::fmt;
use std::str::FromStr;

use airlock_address::{Host, parse_host};

use crate::Refusal;

/// The most patterns one list may hold: a scope is a handful of sites, not a blocklist feed.
pub const MAX_PATTERNS: usize = 256;

/// One entry of `allowed_domains` or `blocked_domains`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DomainPattern {
    /// `example.com`: that name only, not its subdomains.
    Exact(String),
    /// `*.example.com`: every name under it (any depth), not `example.com` itself.
    Subdomains(String),
}

impl DomainPattern {
    /// Whether a normalised name matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::Exact(exact) => name == exact,
            Self::Subdomains(parent) => name
                .strip_suffix(parent.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|label| !label.is_empty()),
        }
    }

    /// Whether every name `other` matches is matched by `self` too.
    pub fn covers(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Exact(a), Self::Exact(b)) => a == b,
            (Self::Exact(_), Self::Subdomains(_)) => false,
            (Self::Subdomains(_), Self::Exact(name)) => self.matches(name),
            (Self::Subdomains(a), Self::Subdomains(b)) => a == b || self.matches(b),
        }
    }
}

impl fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(name) => f.write_str(name),
            Self::Subdomains(parent) => write!(f, "*.{parent}"),
        }
    }
}

impl FromStr for DomainPattern {
    type Err = ScopeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| ScopeError::Pattern {
            pattern: text.to_owned(),
            why: why.to_owned(),
        };
        if text.chars().any(char::is_whitespace) {
            return Err(bad(
                "it contains white space (a space, tab or line break); write the name alone, with nothing around it",
            ));
        }
        let (wildcard, name) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if name.contains('*') {
            return Err(bad(
                "`*` may only open a pattern, as `*.` before a name (`*.example.com`)",
            ));
        }
        let name = match parse_host(name) {
            Ok(Host::Domain(name)) => name,
            Ok(Host::Ip(_)) => {
                return Err(bad(
                    "an address is not a domain; a scope names sites, and address literals are outside any domain scope",
                ));
            }
            Err(error) => return Err(bad(&error.to_string())),
        };
        if wildcard && !name.contains('.') {
            return Err(bad(
                "a wildcard over a top-level domain opens too much; name the site (`*.example.com`)",
            ));
        }
        // A wildcard over a public suffix (`*.co.uk`, `*.github.io`) admits every registrant's
        // site under it; the Public Suffix List (its ICANN and private sections) says which
        // names are suffixes.
        if wildcard && is_public_suffix(&name) {
            return Err(bad(
                "a wildcard over a public suffix (a name anyone can register under) opens too much; name the site (`*.example.co.uk`)",
            ));
        }
        Ok(if wildcard {
            Self::Subdomains(name)
        } else {
            Self::Exact(name)
        })
    }
}

/// Whether `name` (normalised, lower case) is itself a public suffix on the Public Suffix List.
/// The list's default rule makes any unknown top-level name a suffix; only names the list knows
/// count here, so `*.corp.test` stays a private domain's wildcard.
fn is_public_suffix(name: &str) -> bool {
    psl::suffix(name.as_bytes())
        .is_some_and(|suffix| suffix.is_known() && suffix.as_bytes() == name.as_bytes())
}

/// Why a scope could not be built, or asks for more than its ceiling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A pattern that is not a domain name or `*.` before one.
    #[error(
        "domain pattern `{pattern}` is not valid: {why}; write a name (`example.com`) or `*.` before one (`*.example.com`)"
    )]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        why: String,
    },
    /// More patterns than [`MAX_PATTERNS`] in one list.
    #[error("`{field}` has {count} patterns, more than the {MAX_PATTERNS} allowed: use wildcards")]
    TooMany {
        /// `allowed_domains` or `blocked_domains`.
        field: &'static str,
        /// How many were given.
        count: usize,
    },
    /// A requested allowed pattern no ceiling pattern covers.
    #[error(
        "allowed_domains entry `{pattern}` is beyond what {ceiling_owner} allows ({ceiling}): ask for names inside it"
    )]
    BeyondCeiling {
        /// The requested pattern.
        pattern: String,
        /// Whose ceiling (`the server`, `this token`).
        ceiling_owner: String,
        /// The ceiling's allowed patterns.
        ceiling: String,
    },
    /// A requested allowed pattern the ceiling blocks outright.
    #[error(
        "allowed_domains entry `{pattern}` is blocked by {ceiling_owner} (`{blocked}`): remove it"
    )]
    BlockedByCeiling {
        /// The requested pattern.
        pattern: String,
        /// Whose ceiling.
        ceiling_owner: String,
        /// The ceiling's blocking pattern.
        blocked: String,
    },
}

/// The named sites a task may reach. Empty lists mean no limit of that kind; a scope with an
/// allowed list refuses address literals outright (a site is named, never numbered).
///
/// ```
/// use airlock_policy::Scope;
///
/// let scope = Scope::parse(["shop.example", "*.cdn.example"], ["ads.cdn.example"]).unwrap();
/// assert!(scope.admits_name("shop.example"));
/// assert!(scope.admits_name("img.cdn.example"));
/// assert!(!scope.admits_name("cdn.example")); // the wildcard is not the bare name
/// assert!(!scope.admits_name("ads.cdn.example"));
/// assert!(!scope.admits_name("shop.example.evil.net"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    allowed: Vec<DomainPattern>,
    blocked: Vec<DomainPattern>,
    /// Narrowed because a secret was typed ([`Scope::after_secret`]): refusals name that rule.
    after_secret: bool,
}

impl Scope {
    /// A scope from parsed patterns (sorted, without duplicates).
    pub fn new(
        allowed: impl IntoIterator<Item = DomainPattern>,
        blocked: impl IntoIterator<Item = DomainPattern>,
    ) -> Result<Self, ScopeError> {
        let tidy = |field: &'static str, patterns: Vec<DomainPattern>| {
            let mut patterns = patterns;
            patterns.sort();
            patterns.dedup();
            if patterns.len() > MAX_PATTERNS {
                return Err(ScopeError::TooMany {
                    field,
                    count: patterns.len(),
                });
            }
            Ok(patterns)
        };
        Ok(Self {
            allowed: tidy("allowed_domains", allowed.into_iter().collect())?,
            blocked: tidy("blocked_domains", blocked.into_iter().collect())?,
            after_secret: false,
        })
    }

    /// This scope once a secret was typed: only `sites` (the task's secrets' sites, which lie
    /// inside it), with its blocked list. A page that received the secret can then send it only
    /// where the secret may go anyway.
    #[must_use]
    pub fn after_secret(&self, sites: impl IntoIterator<Item = DomainPattern>) -> Self {
        let mut allowed: Vec<DomainPattern> = sites.into_iter().collect();
        allowed.sort();
        allowed.dedup();
        Self {
            allowed,
            blocked: self.blocked.clone(),
            after_secret: true,
        }
    }

    /// A scope from pattern text, as the CLI and the APIs take it.
    pub fn parse<A, B>(
        allowed: impl IntoIterator<Item = A>,
        blocked: impl IntoIterator<Item = B>,
    ) -> Result<Self, ScopeError>
    where
        A: AsRef<str>,
        B: AsRef<str>,
    {
        let read = |text: &str| text.parse::<DomainPattern>();
        let allowed = allowed
            .into_iter()
            .map(|p| read(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let blocked = blocked
            .into_iter()
            .map(|p| read(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(allowed, blocked)
    }

    /// Whether this scope limits nothing.
    pub fn is_unlimited(&self) -> bool {
        self.allowed.is_empty() && self.blocked.is_empty()
    }

    /// The allowed patterns (empty: any name not blocked).
    pub fn allowed(&self) -> &[DomainPattern] {
        &self.allowed
    }

    /// The blocked patterns.
    pub fn blocked(&self) -> &[DomainPattern] {
        &self.blocked
    }

    /// Whether a normalised name is inside the scope.
    pub fn admits_name(&self, name: &str) -> bool {
        self.judge_name(name).is_ok()
    }

    /// Judge a parsed host: `Ok` inside the scope, else the out-of-scope refusal.
    pub fn judge(&self, host: &Host) -> Result<(), Refusal> {
        match host {
            Host::Domain(name) => self.judge_name(name),
            Host::Ip(ip) if !self.allowed.is_empty() => Err(Refusal::OutOfScope {
                host: ip.to_string(),
                why: "an address literal is outside a domain scope; reach the site by its name"
                    .to_owned(),
            }),
            Host::Ip(_) => Ok(()),
        }
    }

    fn judge_name(&self, name: &str) -> Result<(), Refusal> {
        if let Some(blocked) = self.blocked.iter().find(|p| p.matches(name)) {
            return Err(Refusal::OutOfScope {
                host: name.to_owned(),
                why: format!("blocked by `{blocked}`"),
            });
        }
        if !self.allowed.is_empty() && !self.allowed.iter().any(|p| p.matches(name)) {
            let why = if self.after_secret {
                format!(
                    "a secret was typed in this task, and from then on it reaches only its secrets' sites ({}); a site a task must reach after signing in goes among the secret's sites",
                    list(&self.allowed)
                )
            } else {
                format!(
                    "not in the task's allowed domains ({})",
                    list(&self.allowed)
                )
            };
            return Err(Refusal::OutOfScope {
                host: name.to_owned(),
                why,
            });
        }
        Ok(())
    }

    /// This scope held to a ceiling: every allowed pattern must lie inside the ceiling's, none may
    /// name what the ceiling blocks, and the ceiling's blocked list always applies. Asking for no
    /// allowed list takes the ceiling's. Asking for more is an error naming the entry: a request
    /// is never silently widened.
    pub fn within(&self, ceiling: &Scope, ceiling_owner: &str) -> Result<Scope, ScopeError> {
        for pattern in &self.allowed {
            if let Some(blocked) = ceiling.blocked.iter().find(|b| b.covers(pattern)) {
                return Err(ScopeError::BlockedByCeiling {
                    pattern: pattern.to_string(),
                    ceiling_owner: ceiling_owner.to_owned(),
                    blocked: blocked.to_string(),
                });
            }
            if !ceiling.allowed.is_empty() && !ceiling.allowed.iter().any(|c| c.covers(pattern)) {
                return Err(ScopeError::BeyondCeiling {
                    pattern: pattern.to_string(),
                    ceiling_owner: ceiling_owner.to_owned(),
                    ceiling: list(&ceiling.allowed),
                });
            }
        }
        let allowed = if self.allowed.is_empty() {
            ceiling.allowed.clone()
        } else {
            self.allowed.clone()
        };
        let blocked = self.blocked.iter().chain(&ceiling.blocked).cloned();
        Scope::new(allowed, blocked)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.allowed.is_empty(), self.blocked.is_empty()) {
            (true, true) => f.write_str("any public site"),
            (false, true) => write!(f, "only {}", list(&self.allowed)),
            (true, false) => write!(f, "any public site except {}", list(&self.blocked)),
            (false, false) => write!(
                f,
                "only {}, except {}",
                list(&self.allowed),
                list(&self.blocked)
            ),
        }
    }
}

fn list(patterns: &[DomainPattern]) -> String {
    patterns
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
