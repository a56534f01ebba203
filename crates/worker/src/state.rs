//! A browser session's state in Playwright's `storageState` shape (cookies, and `localStorage`
//! per origin): read, bounded and held to a task's scope going in; restricted to it coming out.

use airlock_address::Host;
use airlock_policy::{Scope, parse_http_url};
use serde::{Deserialize, Serialize};

/// The largest state taken or returned, as JSON.
pub const MAX_STATE_BYTES: usize = 1024 * 1024;
/// The most cookies in one state.
pub(crate) const MAX_STATE_COOKIES: usize = 1000;
/// The most origins (each with its `localStorage`) in one state.
pub(crate) const MAX_STATE_ORIGINS: usize = 100;

/// One cookie, as Playwright writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateCookie {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// `shop.example`, or `.shop.example` for it and its subdomains.
    pub domain: String,
    /// Its path.
    #[serde(default = "root_path")]
    pub path: String,
    /// When it expires, in seconds since 1970 (`-1`: when the session ends).
    #[serde(default = "session_cookie")]
    pub expires: f64,
    /// `HttpOnly`.
    #[serde(default)]
    pub http_only: bool,
    /// `Secure`.
    #[serde(default)]
    pub secure: bool,
    /// `Strict`, `Lax` or `None`.
    #[serde(default = "lax")]
    pub same_site: String,
}

fn root_path() -> String {
    "/".to_owned()
}

fn session_cookie() -> f64 {
    -1.0
}

fn lax() -> String {
    "Lax".to_owned()
}

/// One `localStorage` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StorageEntry {
    /// The key.
    pub name: String,
    /// The value.
    pub value: String,
}

/// An origin's `localStorage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OriginState {
    /// `https://shop.example`.
    pub origin: String,
    /// Its entries.
    #[serde(default)]
    pub local_storage: Vec<StorageEntry>,
}

/// Cookies and per-origin `localStorage`: Playwright's `storageState`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionState {
    /// The cookies.
    #[serde(default)]
    pub cookies: Vec<StateCookie>,
    /// The origins' `localStorage`.
    #[serde(default)]
    pub origins: Vec<OriginState>,
}

/// Why a state is refused. Errors name the entry, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Over [`MAX_STATE_BYTES`].
    #[error("the session state is {bytes} bytes, over the {MAX_STATE_BYTES}-byte limit")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// Not Playwright's `storageState` JSON.
    #[error(
        "the session state is not Playwright's storageState JSON ({why}): give {{\"cookies\": […], \"origins\": […]}}"
    )]
    Unreadable {
        /// The parser's words (which never quote a value).
        why: String,
    },
    /// Too many cookies or origins.
    #[error("the session state has {count} {what}, more than the {limit} allowed")]
    TooMany {
        /// `cookies` or `origins`.
        what: &'static str,
        /// How many.
        count: usize,
        /// The most allowed.
        limit: usize,
    },
    /// An entry outside the task's scope.
    #[error(
        "the session state's {what} is outside the task's scope ({scope}): remove it, or widen allowed_domains"
    )]
    OutsideScope {
        /// Which entry (`cookie `sid` for shop.example`, `origin https://x.example`).
        what: String,
        /// The scope.
        scope: String,
    },
}

impl SessionState {
    /// Read a state, bounded, with every cookie and origin inside `scope`.
    pub fn parse(json: &[u8], scope: &Scope) -> Result<Self, StateError> {
        if json.len() > MAX_STATE_BYTES {
            return Err(StateError::TooLarge { bytes: json.len() });
        }
        // serde's own message may quote a value, so only its kind and place are said.
        let state: Self = serde_json::from_slice(json).map_err(|e| {
            let kind = match e.classify() {
                serde_json::error::Category::Syntax => "it is not JSON",
                serde_json::error::Category::Eof => "it ends early",
                serde_json::error::Category::Data => "a field is missing or of the wrong type",
                serde_json::error::Category::Io => "it could not be read",
            };
            StateError::Unreadable {
                why: format!("{kind}, at line {} column {}", e.line(), e.column()),
            }
        })?;
        state.check(scope)?;
        Ok(state)
    }

    /// Every cookie and origin inside `scope`, and within the counts.
    pub fn check(&self, scope: &Scope) -> Result<(), StateError> {
        for (what, count, limit) in [
            ("cookies", self.cookies.len(), MAX_STATE_COOKIES),
            ("origins", self.origins.len(), MAX_STATE_ORIGINS),
        ] {
            if count > limit {
                return Err(StateError::TooMany { what, count, limit });
            }
        }
        let outside = |what: String| StateError::OutsideScope {
            what,
            scope: scope.to_string(),
        };
        for cookie in &self.cookies {
            if !cookie_in_scope(&cookie.domain, scope) {
                return Err(outside(format!(
                    "cookie `{}` for {}",
                    short(&cookie.name),
                    short(&cookie.domain)
                )));
            }
        }
        for origin in &self.origins {
            if !origin_in_scope(&origin.origin, scope) {
                return Err(outside(format!("origin {}", short(&origin.origin))));
            }
        }
        Ok(())
    }

    /// Only what lies inside `scope` (for a state handed back to the caller).
    #[must_use]
    pub fn restricted_to(mut self, scope: &Scope) -> Self {
        self.cookies.retain(|c| cookie_in_scope(&c.domain, scope));
        self.origins.retain(|o| origin_in_scope(&o.origin, scope));
        self
    }

    /// The values it holds (cookies and storage), to scrub from what the worker reads.
    pub fn values(&self) -> Vec<String> {
        self.cookies
            .iter()
            .map(|c| c.value.clone())
            .chain(
                self.origins
                    .iter()
                    .flat_map(|o| o.local_storage.iter().map(|e| e.value.clone())),
            )
            .collect()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty() && self.origins.is_empty()
    }
}

/// A cookie's domain inside the scope: the name itself, or (for `.name`) any name under it that
/// a `*.name` pattern of the scope covers.
fn cookie_in_scope(domain: &str, scope: &Scope) -> bool {
    let (subdomains, bare) = match domain.strip_prefix('.') {
        Some(bare) => (true, bare),
        None => (false, domain),
    };
    let Ok(Host::Domain(name)) = airlock_address::parse_host(bare) else {
        // An address literal is inside only a scope that names no sites.
        return scope.allowed().is_empty() && airlock_address::parse_host(bare).is_ok();
    };
    if scope.admits_name(&name) {
        return true;
    }
    subdomains
        && format!("*.{name}")
            .parse::<airlock_policy::DomainPattern>()
            .is_ok_and(|wild| {
                scope.allowed().iter().any(|a| a.covers(&wild))
                    && !scope.blocked().iter().any(|b| b.covers(&wild))
            })
}

fn origin_in_scope(origin: &str, scope: &Scope) -> bool {
    parse_http_url(origin).is_ok_and(|target| scope.judge(&target.host).is_ok())
}

fn short(text: &str) -> String {
    text.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope::parse(["shop.example", "*.shop.example"], ["ads.shop.example"]).unwrap()
    }

    fn state(cookie_domain: &str, origin: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "cookies": [{"name": "sid", "value": "cookie-value-123", "domain": cookie_domain,
                         "path": "/", "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}],
            "origins": [{"origin": origin, "localStorage": [{"name": "k", "value": "stored-value"}]}]
        }))
        .unwrap()
    }

    #[test]
    fn a_state_inside_the_scope_is_read_and_one_outside_is_refused_naming_the_entry() {
        let read =
            SessionState::parse(&state(".shop.example", "https://shop.example"), &scope()).unwrap();
        assert_eq!(read.cookies[0].name, "sid");
        assert_eq!(read.values(), ["cookie-value-123", "stored-value"]);
        for (domain, origin, says) in [
            (
                "evil.example",
                "https://shop.example",
                "cookie `sid` for evil.example",
            ),
            (
                "ads.shop.example",
                "https://shop.example",
                "cookie `sid` for ads.shop.example",
            ),
            (
                "shop.example",
                "https://evil.example",
                "origin https://evil.example",
            ),
            ("shop.example", "http://10.0.0.1", "origin http://10.0.0.1"),
        ] {
            let error = SessionState::parse(&state(domain, origin), &scope())
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{error}");
            assert!(!error.contains("cookie-value-123") && !error.contains("stored-value"));
        }
        let big = vec![b' '; MAX_STATE_BYTES + 1];
        assert!(matches!(
            SessionState::parse(&big, &scope()),
            Err(StateError::TooLarge { .. })
        ));
        let error = SessionState::parse(
            br#"{"cookies": [{"name": "a", "value": "secret-ish"}]}"#,
            &scope(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("storageState") && !error.contains("secret-ish"),
            "{error}"
        );
    }

    #[test]
    fn a_returned_state_keeps_only_what_lies_inside_the_scope() {
        let mut state =
            SessionState::parse(&state("shop.example", "https://shop.example"), &scope()).unwrap();
        state.cookies.push(StateCookie {
            domain: "tracker.example".into(),
            ..state.cookies[0].clone()
        });
        let kept = state.restricted_to(&scope());
        assert_eq!(kept.cookies.len(), 1);
        assert_eq!(kept.cookies[0].domain, "shop.example");
    }
}
