//! Why a task request is not run: one type for every way in (`POST /v1/tasks`, MCP's
//! `browser_task`), and one answer status for each reason, so a busy runner or a context held by
//! another task is never told as a bad request.

use airlock_worker::RunError;
use http::StatusCode;

use crate::contexts::TakeError;

/// Why a task request is not run. Each variant's words name the field and the fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestRefusal {
    /// A field asks for what cannot be given (a domain outside the ceiling, an unknown secret, a
    /// state that does not fit the scope, a download limit over the operator's).
    #[error("{0}")]
    Invalid(String),
    /// The named context could not be taken.
    #[error("context: {0}")]
    Context(#[from] TakeError),
    /// The runner would not run it.
    #[error(transparent)]
    NotRun(#[from] RunError),
}

impl From<String> for RequestRefusal {
    fn from(words: String) -> Self {
        Self::Invalid(words)
    }
}

impl From<&str> for RequestRefusal {
    fn from(words: &str) -> Self {
        Self::Invalid(words.to_owned())
    }
}

impl RequestRefusal {
    /// The HTTP status that tells it: the caller's mistake (400), a context another task holds
    /// (409: free again when that task ends), or no room now (503: try again soon).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Invalid(_) | Self::Context(TakeError::BadName(_)) => StatusCode::BAD_REQUEST,
            Self::Context(TakeError::InUse(_)) => StatusCode::CONFLICT,
            Self::Context(TakeError::Io { .. }) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotRun(error) => match error {
                RunError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
                RunError::Limits(_)
                | RunError::EmptyTask
                | RunError::Secrets(_)
                | RunError::State(_)
                | RunError::DownloadLimit { .. } => StatusCode::BAD_REQUEST,
            },
        }
    }

    /// Whether trying the same request again soon can succeed (the answer then carries
    /// `Retry-After`).
    pub(crate) fn is_busy(&self) -> bool {
        self.status() == StatusCode::SERVICE_UNAVAILABLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_the_status_that_tells_it() {
        let cases = [
            (RequestRefusal::from("allowed_domains: no"), 400),
            (RequestRefusal::from(TakeError::BadName("a b".into())), 400),
            (RequestRefusal::from(TakeError::InUse("shop".into())), 409),
            (RequestRefusal::from(RunError::Busy { running: 4 }), 503),
            (RequestRefusal::from(RunError::EmptyTask), 400),
        ];
        for (refusal, status) in cases {
            assert_eq!(refusal.status().as_u16(), status, "{refusal}");
            assert_eq!(refusal.is_busy(), status == 503, "{refusal}");
        }
        let held = RequestRefusal::from(TakeError::InUse("shop".into())).to_string();
        assert!(
            held.starts_with("context: context `shop` is in use"),
            "{held}"
        );
    }
}
