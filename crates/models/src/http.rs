//! Posting JSON with retries, time-outs and key-free errors.

use std::time::Duration;

use airlock_worker::{ModelError, scrub};
use reqwest::header::HeaderMap;
use serde_json::Value;

/// How often and how long to retry 429 and 5xx answers and failed connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, including the first.
    pub attempts: u32,
    /// Wait before the first retry; doubled each time.
    pub first_backoff: Duration,
    /// The longest wait, also the cap on `Retry-After`.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// POST `body` to `url`; the headers carry the key, which no error message repeats.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &Value,
    retry: RetryPolicy,
    provider: &str,
) -> Result<Value, ModelError> {
    let mut backoff = retry.first_backoff;
    let mut attempt = 1;
    loop {
        let sent = client
            .post(url)
            .headers(headers.clone())
            .json(body)
            .send()
            .await;
        let wait = match sent {
            Ok(response) if response.status().is_success() => {
                return response.json::<Value>().await.map_err(|e| {
                    ModelError::new(format!(
                        "{provider} sent an answer that is not JSON: {}",
                        e.without_url()
                    ))
                });
            }
            Ok(response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let text = response.text().await.unwrap_or_default();
                let retryable = status.as_u16() == 429 || status.is_server_error();
                if !retryable || attempt >= retry.attempts {
                    return Err(ModelError::new(format!(
                        "{provider} answered {status}: {}",
                        scrub(&error_message(&text))
                    )));
                }
                retry_after.unwrap_or(backoff)
            }
            Err(error) => {
                let retryable = error.is_connect() || error.is_timeout() || error.is_request();
                if !retryable || attempt >= retry.attempts {
                    return Err(ModelError::new(format!(
                        "{provider} could not be reached: {}",
                        scrub(&error.without_url().to_string())
                    )));
                }
                backoff
            }
        };
        tracing::info!(
            provider,
            attempt,
            wait_ms = wait.as_millis(),
            "retrying the model request"
        );
        tokio::time::sleep(wait.min(retry.max_backoff)).await;
        backoff = (backoff * 2).min(retry.max_backoff);
        attempt += 1;
    }
}

/// The `error.message` of an API error body, or the body cut short.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(300).collect())
}
