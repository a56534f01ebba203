//! Keeping secrets, host paths and stack traces away from the worker.
//!
//! Pages are untrusted and may try to get the worker to repeat what it sees, so nothing the host
//! knows should reach it by accident: an error message can carry an API key, a cookie, a URL with
//! credentials or a path on the host. Errors the tool did not expect never reach the worker at all
//! (it gets a neutral message); text it does see passes through [`scrub`].

use std::sync::LazyLock;

use regex::Regex;

/// One kind of secret: what it is (for tests and reviews), its pattern, and what replaces it.
struct Rule {
    kind: &'static str,
    pattern: &'static str,
    replacement: &'static str,
}

/// Every rule, applied in order.
const RULES: &[Rule] = &[
    // Stack traces and panics: drop from the first frame marker to the end.
    Rule {
        kind: "stack trace",
        pattern: r"(?s)(stack backtrace:|\n\s*at [^\n]+\(|thread '[^']*' panicked at).*",
        replacement: "[trace removed]",
    },
    Rule {
        kind: "private key",
        pattern: r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
        replacement: "[private key removed]",
    },
    Rule {
        kind: "bearer or basic credentials",
        pattern: r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/]{8,}=*",
        replacement: "$1 [redacted]",
    },
    Rule {
        kind: "credential header",
        pattern: r"(?im)\b(proxy-authorization|authorization|set-cookie|cookie|x-api-key|api-key)\s*:\s*[^\r\n]*",
        replacement: "$1: [redacted]",
    },
    Rule {
        kind: "key, token or password assignment",
        pattern: r"(?i)\b(api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)\b(\s*[=:]\s*)[^\s&,;]+",
        replacement: "$1$2[redacted]",
    },
    Rule {
        kind: "OpenAI or Anthropic key",
        pattern: r"\bsk-[A-Za-z0-9_\-]{16,}",
        replacement: "[key redacted]",
    },
    Rule {
        kind: "AWS access key id",
        pattern: r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
        replacement: "[key redacted]",
    },
    Rule {
        kind: "GitHub token",
        pattern: r"\bgh[pousr]_[A-Za-z0-9]{30,}",
        replacement: "[key redacted]",
    },
    Rule {
        kind: "Slack token",
        pattern: r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
        replacement: "[key redacted]",
    },
    Rule {
        kind: "Google API key",
        pattern: r"\bAIza[0-9A-Za-z\-_]{35}",
        replacement: "[key redacted]",
    },
    Rule {
        kind: "JSON web token",
        pattern: r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+",
        replacement: "[token redacted]",
    },
    Rule {
        kind: "URL credentials",
        pattern: r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]*@",
        replacement: "$1[redacted]@",
    },
    Rule {
        kind: "host path",
        pattern: r#"(^|[\s'"=(\[,])/(home|root|Users|tmp|var|etc|opt|srv|run|proc|work|usr|mnt|media|private)\b[^\s'")\],]*"#,
        replacement: "$1[path]",
    },
    Rule {
        kind: "Windows path",
        pattern: r"\b[A-Za-z]:\\[^\s'\x22]+",
        replacement: "[path]",
    },
];

/// The rules, compiled once. If any fails to compile, the scrubber fails closed: see [`scrub`].
static COMPILED: LazyLock<Result<Vec<(Regex, &'static str)>, String>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| {
            Regex::new(rule.pattern)
                .map(|regex| (regex, rule.replacement))
                .map_err(|error| format!("the `{}` rule: {error}", rule.kind))
        })
        .collect()
});

/// What the worker reads instead of the text when the scrubber itself is broken.
const WITHHELD: &str = "[text withheld: Airlock could not check it for secrets]";

/// Remove secrets, host paths and stack traces from text the worker will read. Fails closed: if a
/// rule could not be compiled (a bug the tests catch), the text is withheld, never passed on.
pub fn scrub(text: &str) -> String {
    let rules = match &*COMPILED {
        Ok(rules) => rules,
        Err(error) => {
            tracing::error!(%error, "a scrub rule does not compile; withholding text from the worker");
            return WITHHELD.to_owned();
        }
    };
    let mut clean = text.to_owned();
    for (regex, replacement) in rules {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `(kind, text holding a secret, the secret, what must be left)`: one row per rule at least.
    const SAMPLES: &[(&str, &str, &str, &str)] = &[
        (
            "stack trace",
            "failed\nstack backtrace:\n   0: std::rt::lang_start at /rustc/x",
            "lang_start",
            "failed",
        ),
        (
            "stack trace",
            "boom\n    at Object.fn (file.js:1:2)\n    at next",
            "file.js",
            "boom",
        ),
        (
            "stack trace",
            "thread 'main' panicked at src/main.rs:3:5",
            "src/main.rs",
            "",
        ),
        (
            "private key",
            "key: -----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJB\n-----END RSA PRIVATE KEY----- end",
            "MIIBOgIBAAJB",
            "end",
        ),
        (
            "bearer or basic credentials",
            "sent Bearer abcdefgh12345678 upstream",
            "abcdefgh12345678",
            "upstream",
        ),
        (
            "bearer or basic credentials",
            "Basic dXNlcjpwYXNzd29yZA==",
            "dXNlcjpwYXNzd29yZA",
            "",
        ),
        (
            "credential header",
            "Cookie: session=s3cr3t\nok",
            "s3cr3t",
            "ok",
        ),
        ("credential header", "x-api-key: k-123456", "k-123456", ""),
        (
            "key, token or password assignment",
            "password=hunter22&user=al",
            "hunter22",
            "user=al",
        ),
        (
            "key, token or password assignment",
            "access_token: abc.def",
            "abc.def",
            "",
        ),
        (
            "OpenAI or Anthropic key",
            "key sk-ant-api03-abcdefghijklmnopqrst",
            "abcdefghijklmnopqrst",
            "key",
        ),
        (
            "AWS access key id",
            "id AKIAIOSFODNN7EXAMPLE here",
            "AKIAIOSFODNN7EXAMPLE",
            "here",
        ),
        (
            "GitHub token",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "abcdefghijklmnopqrstuvwxyz0123456789",
            "",
        ),
        (
            "Slack token",
            "xoxb-1234567890-abcdefghij",
            "1234567890-abcdefghij",
            "",
        ),
        (
            "Google API key",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "SyA1234567890abcdefghijklmnopqrstuv",
            "",
        ),
        (
            "JSON web token",
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sflKxwRJSMeKKF2QT4fw",
            "sflKxwRJSMeKKF2QT4fw",
            "jwt",
        ),
        (
            "URL credentials",
            "fetch https://alice:pw123@example.com/x",
            "alice:pw123",
            "example.com/x",
        ),
        (
            "host path",
            "could not open /home/alice/.ssh/id_rsa",
            "alice",
            "could not open",
        ),
        ("host path", "see (/etc/shadow)", "shadow", "see"),
        (
            "Windows path",
            "open C:\\Users\\alice\\secret.txt failed",
            "alice",
            "failed",
        ),
    ];

    #[test]
    fn every_rule_compiles() {
        if let Err(error) = &*COMPILED {
            panic!("{error}");
        }
        assert_eq!(COMPILED.as_ref().map(Vec::len).ok(), Some(RULES.len()));
    }

    #[test]
    fn every_kind_of_secret_is_removed() {
        for rule in RULES {
            assert!(
                SAMPLES.iter().any(|(kind, ..)| *kind == rule.kind),
                "no sample for the rule `{}`: add one to SAMPLES",
                rule.kind
            );
        }
        for (kind, text, secret, kept) in SAMPLES {
            let clean = scrub(text);
            assert!(
                !clean.contains(secret),
                "{kind}: `{secret}` survived in {clean:?}"
            );
            assert!(
                clean.contains(kept),
                "{kind}: `{kept}` was lost from {clean:?}"
            );
        }
    }

    #[test]
    fn ordinary_text_passes_unchanged() {
        for text in [
            "The answer is 42. See https://example.com/docs?page=2 for more.",
            "Tokens are counted per task.",
            "a/b/c and 3/4",
        ] {
            assert_eq!(scrub(text), text);
        }
    }
}
