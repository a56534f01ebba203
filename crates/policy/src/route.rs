//! Egress routes: how a request the policy allowed leaves the host. The `direct` route dials the
//! vetted address itself; a route through a *parent* (a company's proxy, an HTTP CONNECT or
//! SOCKS5 server the operator names) asks the parent for a tunnel instead. Routes are the
//! operator's: a task may pick one by name, never add one, and a page never sees one.
//!
//! Vetting stays first whatever the route. A *pinned* route (the default) resolves and vets every
//! answer as the direct route does, then asks the parent for the vetted address (`CONNECT
//! 203.0.113.7:443`), so a rebinding name or a private answer reaches nothing through it; TLS still
//! carries the name (SNI), so virtual hosting works. A route whose *parent resolves* is for
//! networks where the host cannot resolve public names: the name is judged (scope, name rules,
//! numeric spellings, `localhost`) and sent as it is, so the address guarantee becomes the
//! parent's. It is refused unless the operator turns it on for that route.

use std::fmt;

use crate::scope::DomainPattern;

/// The route every destination takes unless a route's sites say otherwise.
pub const DIRECT: &str = "direct";
/// The most routes one operator may name.
pub const MAX_ROUTES: usize = 32;

/// How a parent is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentKind {
    /// An HTTP proxy: `CONNECT host:port` over plain TCP.
    HttpConnect,
    /// An HTTP proxy reached over TLS (`https://` to the proxy itself): the same `CONNECT`, and
    /// its credentials, inside a TLS session whose certificate must check out against the public
    /// roots or the operator's CAs.
    HttpsConnect,
    /// A SOCKS5 server (RFC 1928), with username and password (RFC 1929) when given.
    Socks5,
}

/// Where names are resolved for a route through a parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resolution {
    /// Airlock resolves and vets every answer; the parent is asked for the vetted address.
    #[default]
    Pinned,
    /// The parent resolves the name it is sent; the host never looks it up.
    ParentResolves,
}

/// The proxy a route goes through.
#[derive(Clone, PartialEq, Eq)]
pub struct Parent {
    /// How it is spoken to.
    pub kind: ParentKind,
    /// Its host (a name or an address, as the operator wrote it) and port.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The username and password it asks for, if any.
    pub credentials: Option<Credentials>,
}

impl fmt::Debug for Parent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parent")
            .field("kind", &self.kind)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("credentials", &self.credentials.as_ref().map(|_| "(set)"))
            .finish()
    }
}

/// A parent's username and password. Neither is ever formatted: no `Display`, and `Debug` shows
/// nothing of them.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The username.
    pub user: String,
    /// The password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(..)")
    }
}

/// One named route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Its name (`direct`, `corp`, …).
    pub name: String,
    /// The parent it goes through; `None` is the direct route.
    pub parent: Option<Parent>,
    /// The sites it serves on its own (the scope's pattern syntax); empty: only when chosen.
    pub sites: Vec<DomainPattern>,
    /// Where names are resolved (for a route with a parent).
    pub resolution: Resolution,
}

impl Route {
    /// The direct route.
    #[must_use]
    pub fn direct() -> Self {
        Self {
            name: DIRECT.to_owned(),
            parent: None,
            sites: Vec::new(),
            resolution: Resolution::Pinned,
        }
    }

    /// A route named `name` through the parent at `url` (`http://host:port`,
    /// `https://host:port` or `socks5://host:port`), serving `sites`.
    ///
    /// # Errors
    /// A bad name, a URL that is not a parent's, credentials written into it, or a bad pattern.
    pub fn parse(
        name: &str,
        url: &str,
        sites: &[String],
        resolution: Resolution,
    ) -> Result<Self, RouteError> {
        check_name(name)?;
        let parent = parse_parent(name, url)?;
        let sites = sites
            .iter()
            .map(|site| {
                site.parse::<DomainPattern>()
                    .map_err(|error| RouteError::BadSite {
                        route: name.to_owned(),
                        reason: error.to_string(),
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: name.to_owned(),
            parent: Some(parent),
            sites,
            resolution,
        })
    }

    /// The route with its parent's credentials set.
    #[must_use]
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        if let Some(parent) = &mut self.parent {
            parent.credentials = Some(credentials);
        }
        self
    }

    /// Where this route's parent is, for logs and errors (never its credentials).
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.parent {
            None => format!("route `{}` (direct)", self.name),
            Some(parent) => {
                let scheme = match parent.kind {
                    ParentKind::HttpConnect => "http",
                    ParentKind::HttpsConnect => "https",
                    ParentKind::Socks5 => "socks5",
                };
                format!(
                    "route `{}` (through {scheme}://{}:{})",
                    self.name, parent.host, parent.port
                )
            }
        }
    }
}

/// Every route an operator named, and which one a destination takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    routes: Vec<Route>,
    default: usize,
}

impl Default for Routes {
    fn default() -> Self {
        Self {
            routes: vec![Route::direct()],
            default: 0,
        }
    }
}

impl Routes {
    /// `routes` (the direct route is always there too, named `direct`), with `default` taken by
    /// any destination no route's sites name.
    ///
    /// # Errors
    /// A name given twice, a route named `direct`, too many routes, or an unknown default.
    pub fn new(routes: Vec<Route>, default: &str) -> Result<Self, RouteError> {
        if routes.len() >= MAX_ROUTES {
            return Err(RouteError::TooMany);
        }
        let mut all = vec![Route::direct()];
        for route in routes {
            if all.iter().any(|known| known.name == route.name) {
                return Err(RouteError::Twice { name: route.name });
            }
            all.push(route);
        }
        let default = all
            .iter()
            .position(|route| route.name == default)
            .ok_or_else(|| RouteError::Unknown {
                name: default.to_owned(),
                known: names(&all),
            })?;
        Ok(Self {
            routes: all,
            default,
        })
    }

    /// The route named `name`.
    ///
    /// # Errors
    /// When there is none, listing those there are.
    pub fn named(&self, name: &str) -> Result<&Route, RouteError> {
        self.routes
            .iter()
            .find(|route| route.name == name)
            .ok_or_else(|| RouteError::Unknown {
                name: name.to_owned(),
                known: names(&self.routes),
            })
    }

    /// The same routes with `sites` always reached directly, whatever the default (a host's
    /// `NO_PROXY`).
    #[must_use]
    pub fn with_direct_sites(mut self, sites: Vec<DomainPattern>) -> Self {
        // `direct` is always first (`new`, `default`).
        self.routes[0].sites = sites;
        self
    }

    /// The route a destination takes: the first route whose sites match its (normalised) name,
    /// else the default. An address has no name, so it takes the default.
    #[must_use]
    pub fn for_host(&self, name: Option<&str>) -> &Route {
        name.and_then(|name| {
            self.routes
                .iter()
                .find(|route| route.sites.iter().any(|site| site.matches(name)))
        })
        .unwrap_or(&self.routes[self.default])
    }

    /// These routes with `name` as the default for every destination (a task's choice).
    ///
    /// # Errors
    /// When there is no such route.
    pub fn choosing(&self, name: &str) -> Result<Self, RouteError> {
        let default = self
            .routes
            .iter()
            .position(|route| route.name == name)
            .ok_or_else(|| RouteError::Unknown {
                name: name.to_owned(),
                known: names(&self.routes),
            })?;
        Ok(Self {
            routes: self.routes.clone(),
            default,
        })
    }

    /// The default route's name.
    #[must_use]
    pub fn default_name(&self) -> &str {
        &self.routes[self.default].name
    }

    /// Every route, `direct` first.
    #[must_use]
    pub fn all(&self) -> &[Route] {
        &self.routes
    }
}

fn names(routes: &[Route]) -> String {
    routes
        .iter()
        .map(|route| format!("`{}`", route.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a route could not be made or chosen. Never carries a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A name that is not 1 to 32 letters, digits, `-` or `_`.
    #[error("route name `{0}` is not valid: use 1 to 32 letters, digits, `-` or `_`")]
    BadName(String),
    /// `direct` is always there and cannot be redefined.
    #[error("route `direct` is built in (it dials the vetted address): name yours differently")]
    DirectTaken,
    /// A parent URL that is not `http://host:port`, `https://host:port` or `socks5://host:port`.
    #[error(
        "route `{route}`: `{url}` is not a parent proxy: write http://host:port (HTTP CONNECT), https://host:port (HTTP CONNECT over TLS) or socks5://host:port"
    )]
    BadUrl {
        /// The route.
        route: String,
        /// The URL (only what follows an `@`, if it had one).
        url: String,
    },
    /// Credentials written into the URL, where they would show in process lists and logs.
    #[error(
        "route `{route}`: credentials do not go in the URL, where process lists and logs show them: give them in a file (`{route}` credentials file: one line, user:password) or the environment"
    )]
    CredentialsInUrl {
        /// The route.
        route: String,
    },
    /// A site pattern that does not parse.
    #[error("route `{route}`: {reason}")]
    BadSite {
        /// The route.
        route: String,
        /// Why.
        reason: String,
    },
    /// The same name twice.
    #[error("route `{name}` is given twice: give each route once")]
    Twice {
        /// The name.
        name: String,
    },
    /// More than [`MAX_ROUTES`].
    #[error("more than {MAX_ROUTES} routes: an operator names a few parents, not a list")]
    TooMany,
    /// A name no route has.
    #[error("there is no route `{name}`: the routes are {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: String,
    },
}

fn check_name(name: &str) -> Result<(), RouteError> {
    if name == DIRECT {
        return Err(RouteError::DirectTaken);
    }
    let valid = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(RouteError::BadName(name.to_owned()))
    }
}

fn parse_parent(route: &str, url: &str) -> Result<Parent, RouteError> {
    let bad = || RouteError::BadUrl {
        route: route.to_owned(),
        url: url.split('@').next_back().unwrap_or_default().to_owned(),
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let kind = match scheme.to_ascii_lowercase().as_str() {
        "http" => ParentKind::HttpConnect,
        "https" => ParentKind::HttpsConnect,
        "socks5" | "socks5h" => ParentKind::Socks5,
        _ => return Err(bad()),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('@') {
        return Err(RouteError::CredentialsInUrl {
            route: route.to_owned(),
        });
    }
    if authority.contains(['/', '?', '#']) || authority.is_empty() {
        return Err(bad());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') || host.starts_with('[') => {
            (host, port.parse::<u16>().map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok(Parent {
        kind,
        host: host.to_ascii_lowercase(),
        port,
        credentials: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corp() -> Route {
        Route::parse(
            "corp",
            "http://proxy.corp.test:3128",
            &["*.corp.test".into()],
            Resolution::Pinned,
        )
        .unwrap()
    }

    #[test]
    fn a_parent_is_an_http_https_or_socks5_url_with_a_port() {
        let route = corp();
        let parent = route.parent.as_ref().unwrap();
        assert_eq!(parent.kind, ParentKind::HttpConnect);
        assert_eq!(
            (parent.host.as_str(), parent.port),
            ("proxy.corp.test", 3128)
        );
        let socks = Route::parse("s", "socks5://127.0.0.1:1080/", &[], Resolution::Pinned).unwrap();
        assert_eq!(socks.parent.unwrap().kind, ParentKind::Socks5);
        let v6 = Route::parse("v6", "http://[::1]:3128", &[], Resolution::Pinned).unwrap();
        assert_eq!(v6.parent.unwrap().host, "::1");
        let tls =
            Route::parse("t", "HTTPS://Proxy.Corp.Test:8443", &[], Resolution::Pinned).unwrap();
        assert_eq!(tls.parent.as_ref().unwrap().kind, ParentKind::HttpsConnect);
        assert_eq!(
            tls.describe(),
            "route `t` (through https://proxy.corp.test:8443)"
        );
        for bad in [
            "https://proxy",
            "proxy:3128",
            "ftp://proxy:21",
            "http://proxy",
            "http://proxy:0",
            "http://proxy:99999",
            "http://proxy:3128/path",
            "http://:3128",
        ] {
            let error = Route::parse("r", bad, &[], Resolution::Pinned).unwrap_err();
            assert!(matches!(error, RouteError::BadUrl { .. }), "{bad}: {error}");
            assert!(error.to_string().contains("http://host:port"), "{error}");
        }
    }

    #[test]
    fn credentials_in_the_url_are_refused_and_never_repeated() {
        let error = Route::parse(
            "corp",
            "http://alice:hunter2@proxy:3128",
            &[],
            Resolution::Pinned,
        )
        .unwrap_err();
        assert_eq!(
            error,
            RouteError::CredentialsInUrl {
                route: "corp".into()
            }
        );
        assert!(!error.to_string().contains("hunter2"), "{error}");
        let bad = Route::parse(
            "corp",
            "gopher://alice:hunter2@proxy:70",
            &[],
            Resolution::Pinned,
        )
        .unwrap_err();
        assert!(!bad.to_string().contains("hunter2"), "{bad}");
    }

    #[test]
    fn credentials_never_show_in_debug() {
        let route = corp().with_credentials(Credentials {
            user: "alice".into(),
            password: "hunter2".into(),
        });
        let shown = format!("{route:?} {}", route.describe());
        assert!(
            !shown.contains("hunter2") && !shown.contains("alice"),
            "{shown}"
        );
        assert!(shown.contains("(set)"), "{shown}");
    }

    #[test]
    fn a_destination_takes_the_first_route_whose_sites_match_else_the_default() {
        let routes = Routes::new(vec![corp()], DIRECT).unwrap();
        assert_eq!(routes.for_host(Some("intranet.corp.test")).name, "corp");
        assert_eq!(routes.for_host(Some("corp.test")).name, "direct");
        assert_eq!(routes.for_host(Some("example.com")).name, "direct");
        assert_eq!(routes.for_host(None).name, "direct");
        let through = Routes::new(vec![corp()], "corp").unwrap();
        assert_eq!(through.for_host(Some("example.com")).name, "corp");
        let chosen = routes.choosing("corp").unwrap();
        assert_eq!(chosen.for_host(None).name, "corp");
    }

    #[test]
    fn names_are_checked_and_an_unknown_one_lists_those_there_are() {
        assert_eq!(
            Route::parse("direct", "http://p:1", &[], Resolution::Pinned).unwrap_err(),
            RouteError::DirectTaken
        );
        assert!(matches!(
            Route::parse("no spaces", "http://p:1", &[], Resolution::Pinned),
            Err(RouteError::BadName(_))
        ));
        assert!(matches!(
            Routes::new(vec![corp(), corp()], DIRECT),
            Err(RouteError::Twice { .. })
        ));
        let routes = Routes::new(vec![corp()], DIRECT).unwrap();
        let unknown = routes.named("home").unwrap_err().to_string();
        assert!(unknown.contains("`direct`, `corp`"), "{unknown}");
        assert!(Routes::new(vec![], "corp").is_err());
        assert!(matches!(
            Route::parse("r", "http://p:1", &["*.".into()], Resolution::Pinned),
            Err(RouteError::BadSite { .. })
        ));
    }
}
