//! Named secrets a task may type but the worker never sees: each bound to the sites it belongs
//! to, shown to the worker by name only, and scrubbed (with its common encodings) from everything
//! the worker or the caller reads.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use airlock_policy::{DomainPattern, Scope};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// The most secrets one task may hold.
pub(crate) const MAX_SECRETS: usize = 32;
/// The longest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 4096;
/// The shortest secret value, in bytes: a shorter one would be scrubbed out of ordinary text.
pub(crate) const MIN_SECRET_BYTES: usize = 4;

/// What the worker writes where a secret goes: `{{secret:NAME}}`, as one whole argument.
pub fn placeholder(name: &str) -> String {
    format!("{{{{secret:{name}}}}}")
}

/// The name in `text` if it is exactly one placeholder.
pub fn placeholder_name(text: &str) -> Option<&str> {
    text.strip_prefix("{{secret:")?.strip_suffix("}}")
}

/// Whether `text` holds a placeholder anywhere (so it must be exactly one, where one may go).
pub fn mentions_placeholder(text: &str) -> bool {
    text.contains("{{secret:")
}

/// A secret's value. It has no `Display` and its `Debug` shows nothing: it reaches text only
/// through [`SecretValue::expose`], at the one place that types it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// The value, for the one place that types it into a page.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[secret value]")
    }
}

/// One named secret and the sites it may be typed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    name: String,
    value: SecretValue,
    domains: Vec<DomainPattern>,
}

/// Why a secret, or a task's set of them, is refused. No variant carries a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// A name that is not 1–64 letters, digits, `_` or `-`.
    #[error(
        "secret name `{name}` is not valid: use 1 to 64 letters, digits, `_` or `-` (it is what the worker writes in `{{{{secret:NAME}}}}`)"
    )]
    Name {
        /// The name given.
        name: String,
    },
    /// A value too short or too long.
    #[error(
        "secret `{name}` is {bytes} bytes: a secret value must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"
    )]
    Length {
        /// Its name.
        name: String,
        /// Its length.
        bytes: usize,
    },
    /// A value with a line break or other control character, which no form field takes as typed.
    #[error("secret `{name}` holds a control character (a line break?): remove it")]
    Control {
        /// Its name.
        name: String,
    },
    /// No domain to type it on.
    #[error(
        "secret `{name}` names no domain: bind it to the sites it belongs to (`@login.example.com`)"
    )]
    NoDomains {
        /// Its name.
        name: String,
    },
    /// A domain pattern that does not read.
    #[error("secret `{name}`: {why}")]
    Domain {
        /// Its name.
        name: String,
        /// The pattern's own error.
        why: String,
    },
    /// Two secrets with one name.
    #[error("secret `{name}` is given twice: give each name once")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// More than [`MAX_SECRETS`].
    #[error("{count} secrets were given, more than the {MAX_SECRETS} a task may hold")]
    TooMany {
        /// How many.
        count: usize,
    },
    /// A secret's site outside the task's scope: the scope must cover every secret.
    #[error(
        "secret `{name}` is bound to `{domain}`, which the task's scope ({scope}) does not cover: add it to allowed_domains"
    )]
    OutsideScope {
        /// The secret.
        name: String,
        /// Its pattern outside the scope.
        domain: String,
        /// The scope.
        scope: String,
    },
    /// A name the caller asked for that the operator did not configure (or this token may not use).
    #[error("secret `{name}` is not one this caller may use (known: {known}): ask the operator")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names it may use.
        known: String,
    },
}

impl Secret {
    /// A secret from its parts, checked.
    pub fn new(
        name: &str,
        value: String,
        domains: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<Self, SecretError> {
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(SecretError::Name {
                name: name.chars().take(80).collect(),
            });
        }
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&value.len()) {
            return Err(SecretError::Length {
                name: name.to_owned(),
                bytes: value.len(),
            });
        }
        if value.chars().any(char::is_control) {
            return Err(SecretError::Control {
                name: name.to_owned(),
            });
        }
        let domains = domains
            .into_iter()
            .map(|d| {
                d.as_ref()
                    .trim()
                    .parse::<DomainPattern>()
                    .map_err(|e| SecretError::Domain {
                        name: name.to_owned(),
                        why: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if domains.is_empty() {
            return Err(SecretError::NoDomains {
                name: name.to_owned(),
            });
        }
        Ok(Self {
            name: name.to_owned(),
            value: SecretValue(value),
            domains,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its value, for the one place that types it.
    pub fn value(&self) -> &SecretValue {
        &self.value
    }

    /// The sites it may be typed on.
    pub fn domains(&self) -> &[DomainPattern] {
        &self.domains
    }

    /// Whether it may be typed on a page at `host` (a normalised name).
    pub fn belongs_to(&self, host: &str) -> bool {
        self.domains.iter().any(|d| d.matches(host))
    }
}

/// A task's secrets, with the scrubber made from them. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    inner: Arc<SecretsInner>,
}

#[derive(Default)]
struct SecretsInner {
    secrets: Vec<Secret>,
    /// Every spelling of every value to replace, longest first, with its replacement; values
    /// learned during the task join them.
    needles: RwLock<Needles>,
}

#[derive(Default)]
struct Needles {
    all: Arc<Vec<(String, String)>>,
    /// Each secret's value as the decoding reader looks for it, with its replacement.
    sought: Arc<Vec<(decoded::Sought, String)>>,
    /// How many values were learned during the task (at most [`MAX_LEARNED_VALUES`]).
    learned: usize,
}

// Never the needles: they are the values.
impl fmt::Debug for SecretsInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("secrets", &self.secrets)
            .field("needles", &self.snapshot().len())
            .finish()
    }
}

impl SecretsInner {
    fn snapshot(&self) -> Arc<Vec<(String, String)>> {
        Arc::clone(&self.read().all)
    }

    fn sought(&self) -> Arc<Vec<(decoded::Sought, String)>> {
        Arc::clone(&self.read().sought)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Needles> {
        // A poisoned lock only means a writer panicked; the needles it left stand.
        self.needles.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Values learned during a task (cookies the browser was given) are scrubbed from this length
/// on: session identifiers and tokens, not flags like `1` or `en-US`.
pub(crate) const MIN_LEARNED_BYTES: usize = 8;
/// The most values a task learns; past it, new ones are not added (logged).
pub(crate) const MAX_LEARNED_VALUES: usize = 256;

impl PartialEq for Secrets {
    fn eq(&self, other: &Self) -> bool {
        self.inner.secrets == other.inner.secrets
    }
}

impl Eq for Secrets {}

impl Secrets {
    /// A task's set, checked (distinct names, at most [`MAX_SECRETS`]).
    pub fn new(secrets: Vec<Secret>) -> Result<Self, SecretError> {
        if secrets.len() > MAX_SECRETS {
            return Err(SecretError::TooMany {
                count: secrets.len(),
            });
        }
        for (i, secret) in secrets.iter().enumerate() {
            if secrets[..i].iter().any(|s| s.name == secret.name) {
                return Err(SecretError::Duplicate {
                    name: secret.name.clone(),
                });
            }
        }
        let mut needles: Vec<(String, String)> = secrets
            .iter()
            .flat_map(|secret| {
                let replacement = format!("[secret:{}]", secret.name);
                spellings(secret.value.expose())
                    .into_iter()
                    .map(move |spelling| (spelling, replacement.clone()))
            })
            .collect();
        longest_first(&mut needles);
        let sought = secrets
            .iter()
            .map(|secret| {
                (
                    decoded::Sought::new(secret.value.expose(), MIN_SECRET_BYTES),
                    format!("[secret:{}]", secret.name),
                )
            })
            .collect();
        Ok(Self {
            inner: Arc::new(SecretsInner {
                secrets,
                needles: RwLock::new(Needles {
                    all: Arc::new(needles),
                    sought: Arc::new(sought),
                    learned: 0,
                }),
            }),
        })
    }

    /// The same set, also scrubbing `values` (a loaded session's cookies and storage: never
    /// typed, never shown). Values shorter than [`MIN_SECRET_BYTES`] are left alone.
    #[must_use]
    pub fn hiding(self, values: &[String]) -> Self {
        let mut needles = (*self.inner.snapshot()).clone();
        for value in values.iter().filter(|v| v.len() >= MIN_SECRET_BYTES) {
            needles.extend(
                spellings(value)
                    .into_iter()
                    .map(|spelling| (spelling, "[stored value]".to_owned())),
            );
        }
        longest_first(&mut needles);
        let sought = Arc::clone(&self.inner.sought());
        Self {
            inner: Arc::new(SecretsInner {
                secrets: self.inner.secrets.clone(),
                needles: RwLock::new(Needles {
                    all: Arc::new(needles),
                    sought,
                    learned: 0,
                }),
            }),
        }
    }

    /// Also scrub `values` from now on, in every clone of this set: what the browser was given
    /// during the task (its cookies and storage). Values under [`MIN_LEARNED_BYTES`], over
    /// [`MAX_SECRET_BYTES`] or already known are skipped; at most [`MAX_LEARNED_VALUES`] in all.
    pub fn learn(&self, values: &[String]) {
        let mut needles = self
            .inner
            .needles
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let fresh: Vec<&String> = values
            .iter()
            .filter(|value| (MIN_LEARNED_BYTES..=MAX_SECRET_BYTES).contains(&value.len()))
            .filter(|value| !needles.all.iter().any(|(known, _)| known == *value))
            .collect();
        if fresh.is_empty() {
            return;
        }
        let room = MAX_LEARNED_VALUES.saturating_sub(needles.learned);
        if fresh.len() > room {
            tracing::warn!(
                skipped = fresh.len() - room,
                "a task's browser holds more values than are scrubbed; the rest are not"
            );
        }
        let mut all = (*needles.all).clone();
        for value in fresh.into_iter().take(room) {
            all.extend(
                spellings(value)
                    .into_iter()
                    .map(|spelling| (spelling, "[stored value]".to_owned())),
            );
            needles.learned += 1;
        }
        longest_first(&mut all);
        needles.all = Arc::new(all);
    }

    /// Whether `bytes` (a downloaded file, say) carries a secret's value in any spelling the
    /// scrubber knows. Stored values do not count: they are the caller's own data.
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        let spelled = self
            .inner
            .snapshot()
            .iter()
            .filter(|(_, replacement)| replacement.starts_with("[secret:"))
            .any(|(needle, _)| memchr::memmem::find(bytes, needle.as_bytes()).is_some());
        spelled || {
            let text = String::from_utf8_lossy(bytes);
            self.inner
                .sought()
                .iter()
                .any(|(sought, _)| !sought.spans(&text).is_empty())
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.inner.secrets.is_empty()
    }

    /// The secret called `name`.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.inner.secrets.iter().find(|s| s.name == name)
    }

    /// Every secret.
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.inner.secrets.iter()
    }

    /// The names, comma-separated (for errors and the worker).
    pub fn names(&self) -> String {
        self.inner
            .secrets
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every secret's sites must lie inside `scope`'s allowed list (a scope with none covers
    /// nothing: a task holding secrets must be confined).
    pub fn check_scope(&self, scope: &Scope) -> Result<(), SecretError> {
        for secret in &self.inner.secrets {
            for domain in &secret.domains {
                let covered = scope.allowed().iter().any(|a| a.covers(domain))
                    && !scope.blocked().iter().any(|b| b.covers(domain));
                if !covered {
                    return Err(SecretError::OutsideScope {
                        name: secret.name.clone(),
                        domain: domain.to_string(),
                        scope: scope.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// `text` with every spelling of every value replaced by `[secret:NAME]` (or
    /// `[stored value]`): the exact spellings first, then whatever the decoding reader finds of a
    /// secret (escaped in any way, in any case, or half of it).
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for (needle, replacement) in self.inner.snapshot().iter() {
            if text.contains(needle.as_str()) {
                text = Cow::Owned(text.replace(needle.as_str(), replacement));
            }
        }
        for (sought, replacement) in self.inner.sought().iter() {
            let spans = sought.spans(&text);
            if spans.is_empty() {
                continue;
            }
            let mut clean = String::with_capacity(text.len());
            let mut kept = 0;
            for span in spans {
                clean.push_str(&text[kept..span.start]);
                clean.push_str(replacement);
                kept = span.end;
            }
            clean.push_str(&text[kept..]);
            text = Cow::Owned(clean);
        }
        text
    }
}

/// Longest spelling first (so a value inside a longer one's spelling is not replaced first),
/// each once.
fn longest_first(needles: &mut Vec<(String, String)>) {
    needles.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    needles.dedup_by(|a, b| a.0 == b.0);
}

/// The spellings of a value a page, a URL or a log may carry: as is, percent-encoded (both hex
/// cases, and with `+` for spaces as forms send it), JSON- and HTML-escaped, and base64 (standard
/// and URL-safe, at each of the three alignments it can take inside a longer encoded text).
fn spellings(value: &str) -> Vec<String> {
    let mut out = vec![value.to_owned()];
    let percent = percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
        .to_string();
    out.push(percent.replace("%20", "+"));
    out.push(lower_hex_escapes(&percent));
    out.push(percent);
    let json = serde_json::to_string(value).unwrap_or_default();
    if let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"')) {
        out.push(inner.to_owned());
    }
    let html = value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    out.push(html.replace('\'', "&#39;"));
    out.push(html.replace('\'', "&#x27;"));
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for offset in 0..3usize {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(value.as_bytes());
            let encoded = engine.encode(&bytes);
            // Characters that depend on the value's bytes alone: skip those that mix in the
            // bytes before it, and the last one, which mixes in the bytes after it.
            let start = (offset * 8).div_ceil(6);
            let end = (bytes.len() * 8) / 6;
            if let Some(stable) = encoded.get(start..end)
                && stable.len() >= MIN_SECRET_BYTES
            {
                out.push(stable.to_owned());
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// `%2F` → `%2f`, for encoders that write lower-case hex.
fn lower_hex_escapes(percent: &str) -> String {
    let mut out = String::with_capacity(percent.len());
    let mut chars = percent.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            for _ in 0..2 {
                if let Some(hex) = chars.next() {
                    out.push(hex.to_ascii_lowercase());
                }
            }
        }
    }
    out
}

mod decoded;

#[cfg(test)]
mod tests;
