//! Posting JSON with retries, time-outs and key-free errors.

use std::time::Duration;

use airlock_worker::{ModelError, scrub};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

use crate::{BackendError, BackendOptions, ModelSetupError};

/// Where and how a backend posts: a client with the request time-out, the headers (the key
/// among them, marked sensitive) and the URL. Its `Debug` shows the URL only.
pub(crate) struct Endpoint {
    client: reqwest::Client,
    headers: HeaderMap,
    url: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `options.base_url` (or `default_base`) joined with `path`.
    pub(crate) fn new(
        options: &BackendOptions,
        default_base: &str,
        path: &str,
        headers: HeaderMap,
    ) -> Result<Self, ModelSetupError> {
        let client = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .build()
            .map_err(|e| ModelSetupError::Client(e.to_string()))?;
        let base = options.base_url.as_deref().unwrap_or(default_base);
        Ok(Self {
            client,
            headers,
            url: format!("{}{path}", base.trim_end_matches('/')),
        })
    }

    /// POST `body` with retries.
    pub(crate) async fn post(
        &self,
        body: &Value,
        retry: RetryPolicy,
        provider: &'static str,
    ) -> Result<Value, ModelError> {
        post_json(
            &self.client,
            &self.url,
            self.headers.clone(),
            body,
            retry,
            provider,
        )
        .await
    }
}

/// A header value holding a secret: marked sensitive, and an error that names the variable, not the value.
pub(crate) fn secret_header(value: &str, variable: &str) -> Result<HeaderValue, ModelSetupError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        ModelSetupError::Client(format!("{variable} holds characters a header cannot"))
    })?;
    header.set_sensitive(true);
    Ok(header)
}

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
async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &Value,
    retry: RetryPolicy,
    provider: &'static str,
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
                    ModelError::new(BackendError::Malformed {
                        provider,
                        what: format!("is not JSON ({})", e.without_url()),
                    })
                });
            }
            Ok(response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, std::time::SystemTime::now()));
                let text = response.text().await.unwrap_or_default();
                let retryable = status.as_u16() == 429 || status.is_server_error();
                if !retryable || attempt >= retry.attempts {
                    return Err(ModelError::new(BackendError::answered(
                        provider,
                        status,
                        scrub(&error_message(&text)),
                    )));
                }
                retry_after.unwrap_or(backoff)
            }
            Err(error) => {
                let retryable = error.is_connect() || error.is_timeout() || error.is_request();
                if !retryable || attempt >= retry.attempts {
                    return Err(ModelError::new(BackendError::Unreachable {
                        provider,
                        message: scrub(&error.without_url().to_string()),
                    }));
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

/// A `Retry-After` value: delay-seconds, or an HTTP date (RFC 9110 §10.2.3) measured from `now`.
fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The `error.message` of an API error body, or the body cut short.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(42));
        assert_eq!(retry_after(&later, now), Some(Duration::from_secs(42)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(42));
        assert_eq!(retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-3", now), None);
    }
}
