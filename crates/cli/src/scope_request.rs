//! The scope a caller asks for (`allowed_domains`, `blocked_domains` in `browser_task` and
//! `POST /v1/tasks`), held to the operator's ceiling.

use airlock_policy::Scope;

/// The task's scope: what was asked, inside `ceiling` (the server's). The error names the field,
/// the entry and the fix.
pub(crate) fn task_scope(
    allowed: &[String],
    blocked: &[String],
    ceiling: &Scope,
) -> Result<Scope, String> {
    let asked = Scope::parse(allowed, blocked).map_err(|error| error.to_string())?;
    asked
        .within(ceiling, "the server")
        .map_err(|error| error.to_string())
}
