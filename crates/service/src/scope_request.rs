//! The scope and the secrets a caller asks for (`allowed_domains`, `blocked_domains`, `secrets`
//! in `browser_task` and `POST /v1/tasks`), held to the ceiling of whoever is asking: the
//! server's, or a token's.

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
}

impl Ceiling {
    /// The operator's ceiling for every caller (`--allowed-domain`, `--blocked-domain`).
    pub fn server(scope: Scope) -> Self {
        Self {
            scope,
            owner: "the server",
            secret_names: None,
            context_owner: crate::contexts::LOCAL_OWNER.to_owned(),
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
