//! The operator's routes: parents named with `--parent NAME=URL` (and `--parent-site`,
//! `--parent-credentials`, `--parent-resolves`) or `[parents.NAME]` in `airlock.toml`, the
//! host's proxy variables with `--parent-from-environment`, and `--route`, the one tasks leave
//! by unless they pick another. Credentials are read here, from a file or the environment, and
//! never shown: what `doctor` prints says only where they came from.

use std::collections::BTreeMap;

use airlock_policy::{Credentials, Resolution, Route, RouteError, Routes};
use anyhow::bail;

use super::{Resolver, Shown, Source};
use crate::host_proxy::{ENVIRONMENT_ROUTE, HostProxy};
use crate::route_flags::RouteFlags;
use crate::setting_flags::{FileParent, FileSettings, SettingFlags};

const CREDENTIALS_USAGE: &str = "write NAME=file:PATH or NAME=env:VAR, holding user:password";

/// One parent as declared, before its route is made.
struct Declared {
    name: String,
    url: String,
    sites: Vec<String>,
    credentials: Option<String>,
    resolves: bool,
}

impl Resolver<'_> {
    /// Every route, with the default. The host's proxy variables are read only when asked for.
    pub(super) fn routes(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<Routes> {
        let flags = &flags.routes;
        let (file_parents, source) = if flags.parents.is_empty() {
            let file_parents = file.parents.clone().unwrap_or_default();
            let source = if file_parents.is_empty() {
                Source::Default
            } else {
                Source::File(self.file_path.clone().unwrap_or_default())
            };
            (file_parents, source)
        } else {
            (BTreeMap::new(), self.source("parents", "AIRLOCK_PARENTS"))
        };
        let from_environment = self.pick(
            "parent_from_environment",
            "AIRLOCK_PARENT_FROM_ENVIRONMENT",
            flags.parent_from_environment.then_some(true),
            file.parent_from_environment,
            false,
            |on| if *on { "on" } else { "off" }.to_owned(),
        );
        let made = Made::from(flags, file_parents, from_environment)?;
        self.shown.push(Shown {
            name: "parents",
            value: describe(&made.routes),
            source,
        });
        let chosen = self.pick(
            "route",
            "AIRLOCK_ROUTE",
            flags.route.clone(),
            file.route.clone(),
            made.default_route.to_owned(),
            Clone::clone,
        );
        made.choosing(&chosen)
    }
}

/// The routes of the flags alone (`airlock proxy`: no config file).
pub(crate) fn routes_of(flags: &RouteFlags) -> anyhow::Result<Routes> {
    let made = Made::from(flags, BTreeMap::new(), flags.parent_from_environment)?;
    let chosen = flags
        .route
        .clone()
        .unwrap_or_else(|| made.default_route.to_owned());
    made.choosing(&chosen)
}

/// The parents made into routes, before one is chosen as the default.
struct Made {
    routes: Vec<Route>,
    /// `NO_PROXY`'s names, with `--parent-from-environment`.
    direct_sites: Vec<airlock_policy::DomainPattern>,
    /// The default when `--route` names none.
    default_route: &'static str,
}

impl Made {
    /// The flags' parents (or, when they name none, the file's), with the flags' additions and
    /// the host's variables when asked for.
    fn from(
        flags: &RouteFlags,
        file_parents: BTreeMap<String, FileParent>,
        from_environment: bool,
    ) -> anyhow::Result<Self> {
        let mut declared: Vec<Declared> = if flags.parents.is_empty() {
            file_parents
                .into_iter()
                .map(|(name, parent)| Declared {
                    name,
                    url: parent.url,
                    sites: parent.sites,
                    credentials: parent.credentials,
                    resolves: parent.resolves,
                })
                .collect()
        } else {
            flags
                .parents
                .iter()
                .map(|spec| {
                    let (name, url) = split("--parent", spec, "write NAME=http://host:port")?;
                    Ok(Declared {
                        name: name.to_owned(),
                        url: url.to_owned(),
                        sites: Vec::new(),
                        credentials: None,
                        resolves: false,
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?
        };
        for spec in &flags.parent_sites {
            let (name, pattern) = split("--parent-site", spec, "write NAME=PATTERN")?;
            named(&mut declared, "--parent-site", name)?
                .sites
                .push(pattern.to_owned());
        }
        for spec in &flags.parent_credentials {
            let (name, from) = split("--parent-credentials", spec, CREDENTIALS_USAGE)?;
            named(&mut declared, "--parent-credentials", name)?.credentials = Some(from.to_owned());
        }
        for name in &flags.parent_resolves {
            named(&mut declared, "--parent-resolves", name)?.resolves = true;
        }
        let mut routes = declared
            .iter()
            .map(route_of)
            .collect::<anyhow::Result<Vec<_>>>()?;
        if !from_environment {
            return Ok(Self {
                routes,
                direct_sites: Vec::new(),
                default_route: airlock_policy::DIRECT,
            });
        }
        let host = HostProxy::from_env()?;
        let Some((url, variable)) = &host.proxy else {
            bail!(
                "--parent-from-environment: none of HTTPS_PROXY, ALL_PROXY or HTTP_PROXY is set; set one, or name the parent with --parent NAME=URL"
            );
        };
        let mut route = Route::parse(ENVIRONMENT_ROUTE, url, &[], Resolution::Pinned)
            .map_err(|e| anyhow::anyhow!("{variable}: {e}"))?;
        if let Some(credentials) = host.credentials.clone() {
            route = route.with_credentials(credentials);
        }
        routes.push(route);
        Ok(Self {
            routes,
            direct_sites: host.direct_sites,
            default_route: ENVIRONMENT_ROUTE,
        })
    }

    /// The routes with `chosen` as the default.
    fn choosing(self, chosen: &str) -> anyhow::Result<Routes> {
        let routes = Routes::new(self.routes, chosen).map_err(|error| match error {
            RouteError::Unknown { .. } => anyhow::anyhow!("--route: {error}"),
            other => anyhow::anyhow!("--parent: {other}"),
        })?;
        Ok(routes.with_direct_sites(self.direct_sites))
    }
}

/// `NAME=VALUE`, or an error naming the flag (and never a value: it could be a credential).
fn split<'a>(flag: &str, spec: &'a str, usage: &str) -> anyhow::Result<(&'a str, &'a str)> {
    spec.split_once('=').ok_or_else(|| {
        let head: String = spec.chars().take_while(|c| *c != ':').take(32).collect();
        anyhow::anyhow!("{flag} `{head}…` has no `=`: {usage}")
    })
}

fn named<'a>(
    declared: &'a mut [Declared],
    flag: &str,
    name: &str,
) -> anyhow::Result<&'a mut Declared> {
    declared
        .iter_mut()
        .find(|parent| parent.name == name)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{flag} {name}: there is no parent `{name}`: name it with --parent {name}=URL (or [parents.{name}] in airlock.toml)"
            )
        })
}

fn route_of(parent: &Declared) -> anyhow::Result<Route> {
    let resolution = if parent.resolves {
        Resolution::ParentResolves
    } else {
        Resolution::Pinned
    };
    let route = Route::parse(&parent.name, &parent.url, &parent.sites, resolution)
        .map_err(|e| anyhow::anyhow!("--parent: {e}"))?;
    let Some(from) = &parent.credentials else {
        return Ok(route);
    };
    let what = format!("--parent-credentials {}", parent.name);
    let text = crate::secret_flags::read_source(&what, from, CREDENTIALS_USAGE)?;
    let Some((user, password)) = text.split_once(':') else {
        bail!("{what}: the credentials are not user:password on one line");
    };
    if user.is_empty() || text.contains('\n') {
        bail!("{what}: the credentials are not user:password on one line");
    }
    Ok(route.with_credentials(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    }))
}

/// The parents as `doctor` shows them: where each goes, what it carries, how it resolves, and
/// whether it has credentials (never what they are).
fn describe(routes: &[Route]) -> String {
    if routes.is_empty() {
        return "(none: every destination is dialled directly)".to_owned();
    }
    routes
        .iter()
        .map(|route| {
            let mut notes = Vec::new();
            if !route.sites.is_empty() {
                let sites: Vec<String> = route.sites.iter().map(ToString::to_string).collect();
                notes.push(format!("always for {}", sites.join(" ")));
            }
            if route.resolution == Resolution::ParentResolves {
                notes.push("the parent resolves names".to_owned());
            }
            if route
                .parent
                .as_ref()
                .is_some_and(|parent| parent.credentials.is_some())
            {
                notes.push("with credentials".to_owned());
            }
            if notes.is_empty() {
                route.describe()
            } else {
                format!("{} [{}]", route.describe(), notes.join("; "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
