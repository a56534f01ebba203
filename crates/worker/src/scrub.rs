//! Keeping secrets, host paths and stack traces away from the worker.
//!
//! Pages are untrusted and may try to get the worker to repeat what it sees, so nothing the host
//! knows should reach it by accident: an error message can carry an API key, a cookie, a URL with
//! credentials or a path on the host. Errors the tool did not expect never reach the worker at all
//! (it gets a neutral message); text it does see passes through [`scrub`].

use std::sync::LazyLock;

use regex::Regex;

/// `(pattern, replacement)`, applied in order.
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Stack traces and panics: drop from the first frame marker to the end.
        (r"(?s)(stack backtrace:|\n\s*at [^\n]+\(|thread '[^']*' panicked at).*", "[trace removed]"),
        (r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", "[private key removed]"),
        (r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/]{8,}=*", "$1 [redacted]"),
        (r"(?im)\b(proxy-authorization|authorization|set-cookie|cookie|x-api-key|api-key)\s*:\s*[^\r\n]*", "$1: [redacted]"),
        (r"(?i)\b(api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)\b(\s*[=:]\s*)[^\s&,;]+", "$1$2[redacted]"),
        (r"\bsk-[A-Za-z0-9_\-]{16,}", "[key redacted]"),
        (r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", "[key redacted]"),
        (r"\bgh[pousr]_[A-Za-z0-9]{30,}", "[key redacted]"),
        (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", "[key redacted]"),
        (r"\bAIza[0-9A-Za-z\-_]{35}", "[key redacted]"),
        (r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+", "[token redacted]"),
        (r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]*@", "$1[redacted]@"),
        (r#"(^|[\s'"=(\[,])/(home|root|Users|tmp|var|etc|opt|srv|run|proc|work|usr|mnt|media|private)\b[^\s'")\],]*"#, "$1[path]"),
        (r"\b[A-Za-z]:\\[^\s'\x22]+", "[path]"),
    ]
    .into_iter()
    .filter_map(|(pattern, replacement)| match Regex::new(pattern) {
        Ok(regex) => Some((regex, replacement)),
        Err(error) => {
            // The patterns are literals covered by tests; a bad one is a bug, logged not fatal.
            tracing::error!(%error, pattern, "a scrub pattern does not compile");
            None
        }
    })
    .collect()
});

/// Remove secrets, host paths and stack traces from text the worker will read.
pub fn scrub(text: &str) -> String {
    let mut clean = text.to_owned();
    for (regex, replacement) in RULES.iter() {
        if regex.is_match(&clean) {
            clean = regex.replace_all(&clean, *replacement).into_owned();
        }
    }
    clean
}

/// What the worker reads when a tool failed in a way nobody planned for.
pub(crate) fn neutral_failure(reference: u64) -> String {
    format!(
        "The tool failed unexpectedly (reference {reference}; the details are in the host's log). \
         Try a different approach, or write your report with what you have."
    )
}
