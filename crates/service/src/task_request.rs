//! A task request from a caller of `browser_task` or `POST /v1/tasks`, made whole: its scope and
//! secrets held to the caller's ceiling, its starting state (given, or its named context's) held
//! to its scope; and, once it ran, its final state saved to its context and handed back only if
//! the caller asked for it.

use airlock_worker::{OutputSchema, Secret, SessionState, TaskRequest, TaskResult};

use crate::contexts::ContextLease;
use crate::request_refusal::RequestRefusal;
use crate::scope_request::{Caller, task_route, task_scope, task_secrets};

/// What a caller asked for besides the task and the URL.
#[derive(Debug, Default)]
pub(crate) struct Asked<'a> {
    pub allowed_domains: &'a [String],
    pub blocked_domains: &'a [String],
    pub secret_names: Vec<String>,
    pub inline_secrets: Vec<Secret>,
    pub state: Option<SessionState>,
    pub context: Option<&'a str>,
    pub return_state: bool,
    pub uploads: airlock_worker::Uploads,
    pub max_download_bytes: Option<u64>,
    pub route: Option<&'a str>,
    pub output_schema: Option<serde_json::Value>,
    pub browser: airlock_policy::BrowserSettings,
}

/// A request ready to run, with what must outlive it.
#[derive(Debug)]
pub(crate) struct Ready {
    pub request: TaskRequest,
    /// The named context, held until the task's state is saved back.
    pub lease: Option<ContextLease>,
    /// Whether the caller gets the final state.
    pub give_state: bool,
}

/// Make the request, or say (naming the field and the fix) why not.
pub(crate) fn prepare(
    task: String,
    url: Option<String>,
    asked: Asked<'_>,
    caller: Caller<'_>,
) -> Result<Ready, RequestRefusal> {
    let scope = task_scope(asked.allowed_domains, asked.blocked_domains, caller.ceiling)?;
    let route = task_route(asked.route, caller.ceiling, caller.routes)?;
    let output_schema = asked
        .output_schema
        .map(OutputSchema::new)
        .transpose()
        .map_err(|e| e.to_string())?;
    let browser = asked
        .browser
        .check(caller.max_viewport)
        .map_err(|e| e.to_string())?;
    let max_download_bytes = download_limit(asked.max_download_bytes, caller.max_download_bytes)?;
    let secrets = task_secrets(
        &asked.secret_names,
        asked.inline_secrets,
        caller.ceiling,
        caller.configured,
        &scope,
    )?;
    let (state, lease) = match (asked.state, asked.context) {
        (Some(_), Some(_)) => {
            return Err(
                "give a state or a context, not both: a context is a state Airlock keeps".into(),
            );
        }
        (Some(state), None) => {
            state.check(&scope).map_err(|e| e.to_string())?;
            (Some(state), None)
        }
        (None, Some(name)) => {
            let root = crate::contexts::root().map_err(|e| format!("context: {e:#}"))?;
            let lease = ContextLease::take(&root, &caller.ceiling.context_owner, name)?;
            let state = lease.load(&scope).map_err(|e| format!("context: {e:#}"))?;
            (state, Some(lease))
        }
        (None, None) => (None, None),
    };
    Ok(Ready {
        request: TaskRequest {
            task,
            url,
            scope,
            secrets,
            state,
            return_state: asked.return_state || lease.is_some(),
            uploads: asked.uploads,
            max_download_bytes,
            route,
            output_schema,
            browser,
        },
        lease,
        give_state: asked.return_state,
    })
}

/// The downloads a request may have: what it asked, within what the operator allows
/// (`--max-download-bytes`); never more, and never silently less.
fn download_limit(asked: Option<u64>, allowed: Option<u64>) -> Result<Option<u64>, String> {
    match (asked, allowed) {
        (None, _) => Ok(None),
        (Some(0), _) => Err(
            "max_download_bytes is 0: leave it out to keep downloads off, or ask for 1 byte or more"
                .into(),
        ),
        (Some(_), None) => Err(
            "max_download_bytes: this server allows no downloads (its operator turns them on with --max-download-bytes); leave it out".into(),
        ),
        (Some(asked), Some(allowed)) if asked > allowed => Err(format!(
            "max_download_bytes {asked} is over the {allowed} bytes this server allows: ask for {allowed} or less"
        )),
        (Some(asked), Some(_)) => Ok(Some(asked)),
    }
}

/// After the run: the final state into the context (if any), and out of the result unless the
/// caller asked for it.
pub(crate) fn finish(lease: Option<ContextLease>, give_state: bool, result: &mut TaskResult) {
    if let (Some(lease), Some(state)) = (&lease, &result.state)
        && let Err(error) = lease.save(state)
    {
        tracing::warn!(error = %format!("{error:#}"), "a task's context could not be saved");
    }
    if !give_state {
        result.state = None;
    }
    // Only now may another task take the context.
    drop(lease);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_downloads_only_within_what_the_operator_allows() {
        assert_eq!(download_limit(None, Some(10)), Ok(None));
        assert_eq!(download_limit(Some(10), Some(10)), Ok(Some(10)));
        for (asked, allowed, says) in [
            (Some(11), Some(10), "over the 10 bytes this server allows"),
            (Some(1), None, "this server allows no downloads"),
            (Some(0), Some(10), "is 0"),
        ] {
            let why = download_limit(asked, allowed).unwrap_err();
            assert!(
                why.starts_with("max_download_bytes") && why.contains(says),
                "{why}"
            );
        }
    }
}
