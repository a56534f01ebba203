//! Why a backend could not produce a turn: one variant per condition, each naming the fix.

/// A model request that failed. Messages say what the API said (scrubbed) and what to do; they
/// never contain the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// 401 or 403: the key is missing, wrong or lacks access.
    #[error(
        "{provider} answered {status}: {message}; check the API key (ANTHROPIC_API_KEY or OPENAI_API_KEY) and its access to this model"
    )]
    Unauthorized {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// The HTTP status, with its reason phrase.
        status: String,
        /// What the API said.
        message: String,
    },
    /// 404: the model or the endpoint does not exist.
    #[error(
        "{provider} answered {status}: {message}; check the model name in --model and, for a compatible server, --base-url"
    )]
    NotFound {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// The HTTP status, with its reason phrase.
        status: String,
        /// What the API said.
        message: String,
    },
    /// 429 on every attempt.
    #[error(
        "{provider} answered {status}: {message}; the rate limit held through every retry: wait, or run fewer tasks at once"
    )]
    RateLimited {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// The HTTP status, with its reason phrase.
        status: String,
        /// What the API said.
        message: String,
    },
    /// 5xx on every attempt.
    #[error("{provider} answered {status}: {message}; the service is failing: try again later")]
    Unavailable {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// The HTTP status, with its reason phrase.
        status: String,
        /// What the API said.
        message: String,
    },
    /// Any other refusal of the request (400, 413, 422, …).
    #[error(
        "{provider} answered {status}: {message}; the request was refused as sent: check --thinking and the model's limits"
    )]
    Refused {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// The HTTP status, with its reason phrase.
        status: String,
        /// What the API said.
        message: String,
    },
    /// No answer at all (connection refused, DNS, time-out) on every attempt.
    #[error(
        "{provider} could not be reached: {message}; check the network, or --base-url for a local server"
    )]
    Unreachable {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// What the HTTP client said, without the URL.
        message: String,
    },
    /// An answer that is not JSON, or not shaped like the API's answers.
    #[error(
        "{provider} sent an answer that {what}; check that --base-url points at the API itself"
    )]
    Malformed {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// What was wrong with it.
        what: String,
    },
}

impl BackendError {
    /// The error for a final non-success answer with this status.
    pub(crate) fn answered(
        provider: &'static str,
        status: reqwest::StatusCode,
        message: String,
    ) -> Self {
        let code = status.as_u16();
        let status = status.to_string();
        match code {
            401 | 403 => Self::Unauthorized {
                provider,
                status,
                message,
            },
            404 => Self::NotFound {
                provider,
                status,
                message,
            },
            429 => Self::RateLimited {
                provider,
                status,
                message,
            },
            500..=599 => Self::Unavailable {
                provider,
                status,
                message,
            },
            _ => Self::Refused {
                provider,
                status,
                message,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_final_status_is_its_own_condition_with_its_fix() {
        let kind = |code: u16| {
            let status = reqwest::StatusCode::from_u16(code).unwrap();
            let error = BackendError::answered("openai", status, "said".into());
            let text = error.to_string();
            assert!(
                text.contains(&code.to_string()) && text.contains("said"),
                "{text}"
            );
            error
        };
        assert!(matches!(kind(401), BackendError::Unauthorized { .. }));
        assert!(matches!(kind(403), BackendError::Unauthorized { .. }));
        assert!(kind(401).to_string().contains("check the API key"));
        assert!(matches!(kind(404), BackendError::NotFound { .. }));
        assert!(matches!(kind(429), BackendError::RateLimited { .. }));
        assert!(matches!(kind(500), BackendError::Unavailable { .. }));
        assert!(matches!(kind(503), BackendError::Unavailable { .. }));
        assert!(matches!(kind(400), BackendError::Refused { .. }));
        assert!(matches!(kind(422), BackendError::Refused { .. }));
    }
}
