//! The scope, the secrets and the route a caller asks for (`allowed_domains`, `blocked_domains`,
//! `secrets`, `route` in `browser_task` and `POST /v1/tasks`), held to the ceiling of whoever is
//! asking: the server's, or a token's.

use airlock_policy::Scope;
use airlock_worker::{Secret, SecretError, Secrets};

/// The sites a caller's tasks may reach at most, and whose limit that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    /// The widest scope allowed.
    pub scope: Scope,
    /// Who set it, as errors name it: `the server` or `this token`.
    pub owner: &'static str,
    /// The configured secrets it may ask for by name (`None`: every one the server has).
    pub secret_names: Option<Vec<String>>,
    /// Whose named contexts it uses (`local`, or a digest of its token).
    pub context_owner: String,
    /// The routes it may pick by name (`None`: every one the server has). A ceiling that names
    /// routes leaves by the first of them unless the operator's default is among them.
    pub route_names: Option<Vec<String>>,
}

impl Ceiling {
    /// The operator's ceiling for every caller (`--allowed-domain`, `--blocked-domain`).
    pub fn server(scope: Scope) -> Self {
        Self {
            scope,
            owner: "the server",
            secret_names: None,
            context_owner: crate::contexts::LOCAL_OWNER.to_owned(),
            route_names: None,
        }
    }
}

/// What a caller may ask for: its ceiling, and the secrets the server holds.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The caller's token's ceiling (or the server's).
    pub ceiling: &'a Ceiling,
    /// The secrets configured with `--secret`.
    pub configured: &'a Secrets,
    /// The most a request may download (`--max-download-bytes`; `None`: no downloads).
    pub max_download_bytes: Option<u64>,
    /// The routes the operator configured.
    pub routes: &'a RouteNames,
    /// The largest viewport a request may set (`--max-viewport`).
    pub max_viewport: (u32, u32),
}

/// The names of the operator's routes (never where they lead or their credentials): what a
/// caller may pick from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteNames {
    /// Every route's name, `direct` first.
    pub all: Vec<String>,
    /// The one destinations take unless a task picks another.
    pub default: String,
}

impl Default for RouteNames {
    fn default() -> Self {
        Self {
            all: vec![airlock_policy::DIRECT.to_owned()],
            default: airlock_policy::DIRECT.to_owned(),
        }
    }
}

impl RouteNames {
    /// The names of `routes`.
    pub fn of(routes: &airlock_policy::Routes) -> Self {
        Self {
            all: routes
                .all()
                .iter()
                .map(|route| route.name.clone())
                .collect(),
            default: routes.default_name().to_owned(),
        }
    }
}

/// The task's route: the one asked for (which the server must have and `ceiling` allow), else
/// the operator's default, else (for a ceiling without it) the ceiling's first. `None` is the
/// operator's default. The error names the field, the route and those there are.
pub fn task_route(
    asked: Option<&str>,
    ceiling: &Ceiling,
    routes: &RouteNames,
) -> Result<Option<String>, String> {
    let allowed = |name: &str| {
        ceiling
            .route_names
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    };
    let listed = |names: &mut dyn Iterator<Item = &String>| {
        names
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(name) = asked else {
        return Ok(match &ceiling.route_names {
            Some(names) if !allowed(&routes.default) => names.first().cloned(),
            _ => None,
        });
    };
    if !routes.all.iter().any(|known| known == name) {
        let name: String = name.chars().take(40).collect();
        return Err(format!(
            "route: there is no route `{name}`: the routes are {}",
            listed(&mut routes.all.iter().filter(|n| allowed(n)))
        ));
    }
    if !allowed(name) {
        return Err(format!(
            "route `{name}` is beyond what {} allows: pick one of {}",
            ceiling.owner,
            listed(&mut routes.all.iter().filter(|n| allowed(n)))
        ));
    }
    Ok(Some(name.to_owned()))
}

/// The task's scope: what was asked, inside `ceiling`. The error names the field, the entry and
/// the fix; a request is never silently widened or narrowed.
pub fn task_scope(
    allowed: &[String],
    blocked: &[String],
    ceiling: &Ceiling,
) -> Result<Scope, String> {
    let asked = Scope::parse(allowed, blocked).map_err(|error| error.to_string())?;
    asked
        .within(&ceiling.scope, ceiling.owner)
        .map_err(|error| error.to_string())
}

/// The task's secrets: the configured ones it names (each allowed by `ceiling`) and any given
/// inline, checked against the task's `scope`. Errors name the secret, never a value.
pub fn task_secrets(
    names: &[String],
    inline: Vec<Secret>,
    ceiling: &Ceiling,
    configured: &Secrets,
    scope: &Scope,
) -> Result<Secrets, String> {
    let may_use = |name: &str| {
        configured.get(name).is_some()
            && ceiling
                .secret_names
                .as_ref()
                .is_none_or(|allowed| allowed.iter().any(|a| a == name))
    };
    let mut chosen = Vec::with_capacity(names.len() + inline.len());
    for name in names {
        match configured.get(name) {
            Some(secret) if may_use(name) => chosen.push(secret.clone()),
            _ => {
                let known: Vec<&str> = configured
                    .iter()
                    .map(Secret::name)
                    .filter(|n| may_use(n))
                    .collect();
                let known = if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                };
                return Err(SecretError::Unknown {
                    name: name.chars().take(80).collect(),
                    known,
                }
                .to_string());
            }
        }
    }
    chosen.extend(inline);
    let secrets = Secrets::new(chosen).map_err(|e| e.to_string())?;
    secrets.check_scope(scope).map_err(|e| e.to_string())?;
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> RouteNames {
        RouteNames {
            all: vec!["direct".into(), "corp".into(), "home".into()],
            default: "direct".into(),
        }
    }

    #[test]
    fn a_route_is_one_the_server_has_and_the_ceiling_allows() {
        let server = Ceiling::server(Scope::default());
        assert_eq!(task_route(None, &server, &routes()), Ok(None));
        assert_eq!(
            task_route(Some("corp"), &server, &routes()),
            Ok(Some("corp".into()))
        );
        let unknown = task_route(Some("moon"), &server, &routes()).unwrap_err();
        assert_eq!(
            unknown,
            "route: there is no route `moon`: the routes are `direct`, `corp`, `home`"
        );
        let token = Ceiling {
            owner: "this token",
            route_names: Some(vec!["home".into(), "corp".into()]),
            ..server
        };
        // Without the default among its routes, a token's tasks leave by its first.
        assert_eq!(task_route(None, &token, &routes()), Ok(Some("home".into())));
        let beyond = task_route(Some("direct"), &token, &routes()).unwrap_err();
        assert_eq!(
            beyond,
            "route `direct` is beyond what this token allows: pick one of `corp`, `home`"
        );
    }
}
