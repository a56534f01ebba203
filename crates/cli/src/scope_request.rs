//! The scope a caller asks for (`allowed_domains`, `blocked_domains` in `browser_task` and
//! `POST /v1/tasks`), held to the ceiling of whoever is asking: the server's, or a token's.

use airlock_policy::Scope;

/// The sites a caller's tasks may reach at most, and whose limit that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ceiling {
    /// The widest scope allowed.
    pub(crate) scope: Scope,
    /// Who set it, as errors name it: `the server` or `this token`.
    pub(crate) owner: &'static str,
}

impl Ceiling {
    /// The operator's ceiling for every caller (`--allowed-domain`, `--blocked-domain`).
    pub(crate) fn server(scope: Scope) -> Self {
        Self {
            scope,
            owner: "the server",
        }
    }
}

/// The task's scope: what was asked, inside `ceiling`. The error names the field, the entry and
/// the fix; a request is never silently widened or narrowed.
pub(crate) fn task_scope(
    allowed: &[String],
    blocked: &[String],
    ceiling: &Ceiling,
) -> Result<Scope, String> {
    let asked = Scope::parse(allowed, blocked).map_err(|error| error.to_string())?;
    asked
        .within(&ceiling.scope, ceiling.owner)
        .map_err(|error| error.to_string())
}
