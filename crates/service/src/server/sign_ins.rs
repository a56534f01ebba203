//! The dashboard's sign-in sessions: a person signs in once with a token (in a form's body, never
//! a URL) and their browser then holds only an unguessable session id in an `HttpOnly`,
//! `SameSite=Strict` cookie (`Secure`, and `__Host-` named, over TLS). A session carries the
//! token's ceiling, so a person sees exactly what the token would. Sessions expire a fixed time
//! after sign-in, end at sign-out, and are bounded in number (the oldest goes first). They are
//! kept by the SHA-256 of their id, so a lookup's timing says nothing about a live id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::scope_request::Ceiling;

/// How long a sign-in lasts.
pub(super) const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);

/// The most sessions held at once; a sign-in past it ends the oldest.
pub(super) const MAX_SESSIONS: usize = 1024;

struct Session {
    ceiling: Arc<Ceiling>,
    expires: Instant,
}

/// The signed-in sessions of one server.
pub(super) struct SignIns {
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    /// Served over TLS: the cookie is `Secure` and `__Host-` named.
    tls: bool,
    /// Failed sign-ins, which hold back the next ones.
    pub failures: super::sign_in_limit::SignInLimit,
}

impl std::fmt::Debug for SignIns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the ids.
        f.debug_struct("SignIns")
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl SignIns {
    pub(super) fn new(tls: bool) -> Self {
        Self {
            sessions: Mutex::default(),
            tls,
            failures: super::sign_in_limit::SignInLimit::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        // A poisoned map only means a thread panicked mid-update; its sessions stay usable.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cookie's name: `__Host-` over TLS, which browsers accept only `Secure`, for `/`, from
    /// this very host.
    pub(super) fn cookie_name(&self) -> &'static str {
        if self.tls {
            "__Host-airlock_ui"
        } else {
            "airlock_ui"
        }
    }

    /// A new session for `ceiling`, as of `now`: the `Set-Cookie` value that gives it to the
    /// browser.
    pub(super) fn open(&self, ceiling: Arc<Ceiling>, now: Instant) -> Option<String> {
        let id = new_session_id()?;
        let mut sessions = self.lock();
        sessions.retain(|_, session| session.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.expires)
                .map(|(key, _)| *key)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            key_of(&id),
            Session {
                ceiling,
                expires: now + SESSION_TTL,
            },
        );
        Some(self.set_cookie(&id, SESSION_TTL.as_secs()))
    }

    /// The ceiling of the session the request's cookie names, if it is one and has not expired.
    pub(super) fn find(&self, headers: &HeaderMap, now: Instant) -> Option<Arc<Ceiling>> {
        let id = self.cookie_in(headers)?;
        let mut sessions = self.lock();
        let key = key_of(id);
        match sessions.get(&key) {
            Some(session) if session.expires > now => Some(Arc::clone(&session.ceiling)),
            Some(_) => {
                sessions.remove(&key);
                None
            }
            None => None,
        }
    }

    /// End the session the request's cookie names; the `Set-Cookie` value that clears it.
    pub(super) fn close(&self, headers: &HeaderMap) -> String {
        if let Some(id) = self.cookie_in(headers) {
            self.lock().remove(&key_of(id));
        }
        self.set_cookie("", 0)
    }

    fn set_cookie(&self, id: &str, max_age: u64) -> String {
        let secure = if self.tls { "; Secure" } else { "" };
        format!(
            "{}={id}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}",
            self.cookie_name()
        )
    }

    /// The session id in the request's `Cookie` headers, if there is one.
    fn cookie_in<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        let wanted = self.cookie_name();
        headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == wanted)
            .map(|(_, id)| id)
            .filter(|id| !id.is_empty())
    }
}

fn key_of(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 256 random bits from the OS, as hex; `None` if the OS has none to give (no sign-in then,
/// rather than a guessable session).
fn new_session_id() -> Option<String> {
    random_hex::<32>()
}

/// `N` random bytes from the OS, as hex; `None` if the OS has none to give.
pub(super) fn random_hex<const N: usize>() -> Option<String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(owner: &str) -> Arc<Ceiling> {
        Arc::new(Ceiling {
            scope: airlock_policy::Scope::default(),
            owner: "this token",
            secret_names: None,
            context_owner: owner.to_owned(),
            route_names: None,
        })
    }

    fn sending(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::COOKIE,
            format!("other=1; {pair}; last=2").parse().unwrap(),
        );
        headers
    }

    #[test]
    fn a_session_carries_its_tokens_ceiling_until_it_expires() {
        let sessions = SignIns::new(false);
        let now = Instant::now();
        let cookie = sessions.open(ceiling("alice"), now).unwrap();
        assert!(cookie.starts_with("airlock_ui="), "{cookie}");
        for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=28800"] {
            assert!(cookie.contains(attribute), "{cookie}");
        }
        assert!(!cookie.contains("Secure"), "not over plain HTTP: {cookie}");
        let headers = sending(&cookie);
        let found = sessions.find(&headers, now + Duration::from_secs(60));
        assert_eq!(found.unwrap().context_owner, "alice");
        assert!(
            sessions
                .find(&headers, now + SESSION_TTL + Duration::from_secs(1))
                .is_none()
        );
        assert!(
            sessions.find(&headers, now).is_none(),
            "an expired one is gone"
        );
    }

    #[test]
    fn over_tls_the_cookie_is_secure_and_host_bound() {
        let sessions = SignIns::new(true);
        let cookie = sessions.open(ceiling("alice"), Instant::now()).unwrap();
        assert!(cookie.starts_with("__Host-airlock_ui="), "{cookie}");
        assert!(cookie.ends_with("; Secure"), "{cookie}");
    }

    #[test]
    fn signing_out_ends_the_session_and_clears_the_cookie() {
        let sessions = SignIns::new(false);
        let now = Instant::now();
        let cookie = sessions.open(ceiling("alice"), now).unwrap();
        let headers = sending(&cookie);
        let cleared = sessions.close(&headers);
        assert!(cleared.starts_with("airlock_ui=;"), "{cleared}");
        assert!(cleared.contains("Max-Age=0"), "{cleared}");
        assert!(sessions.find(&headers, now).is_none());
    }

    #[test]
    fn unknown_empty_or_forged_ids_find_nothing() {
        let sessions = SignIns::new(false);
        let now = Instant::now();
        let _ = sessions.open(ceiling("alice"), now).unwrap();
        for forged in ["airlock_ui=", "airlock_ui=00", "airlock_ui", "other=abc"] {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::COOKIE, forged.parse().unwrap());
            assert!(sessions.find(&headers, now).is_none(), "{forged}");
        }
        assert!(sessions.find(&HeaderMap::new(), now).is_none());
    }

    #[test]
    fn sessions_are_bounded_and_the_oldest_goes_first() {
        let sessions = SignIns::new(false);
        let start = Instant::now();
        let first = sessions.open(ceiling("first"), start).unwrap();
        let mut last = String::new();
        for i in 1..=MAX_SESSIONS {
            let at = start + Duration::from_millis(u64::try_from(i).unwrap());
            last = sessions.open(ceiling("later"), at).unwrap();
        }
        assert_eq!(sessions.lock().len(), MAX_SESSIONS);
        let at = start + Duration::from_secs(1);
        assert!(sessions.find(&sending(&first), at).is_none());
        assert!(sessions.find(&sending(&last), at).is_some());
    }

    #[test]
    fn debug_shows_no_session() {
        let sessions = SignIns::new(false);
        let cookie = sessions.open(ceiling("alice"), Instant::now()).unwrap();
        let id = cookie.split(';').next().unwrap().split('=').nth(1).unwrap();
        assert!(!format!("{sessions:?}").contains(id));
    }
}
