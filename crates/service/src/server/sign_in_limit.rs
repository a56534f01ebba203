//! Failed dashboard sign-ins, counted per client address and for the whole server, so a token
//! cannot be guessed at the speed of the network. Past either limit, every sign-in (the right
//! token's too) is answered `429` with `Retry-After` until the oldest failure in the window has
//! aged out. Behind a balancer every client shares its address; the overall limit still holds.
//! With at most 100 guesses a minute, a token of the 16 characters the guard requires at least
//! (64 bits from `openssl rand -hex 8`) outlasts any guesser.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The window failures are counted in.
const WINDOW: Duration = Duration::from_secs(60);
/// Failed sign-ins one client address may make in the window.
const PER_CLIENT: usize = 10;
/// Failed sign-ins the whole server takes in the window.
const OVERALL: usize = 100;
/// Client addresses remembered at once; past it, expired ones go, and if none has expired the
/// newcomer is judged by the overall limit alone.
const MAX_CLIENTS: usize = 4096;

/// Failed sign-ins within the window.
#[derive(Debug, Default)]
pub(super) struct SignInLimit {
    failures: Mutex<Failures>,
}

#[derive(Debug, Default)]
struct Failures {
    by_client: HashMap<IpAddr, VecDeque<Instant>>,
    overall: VecDeque<Instant>,
}

impl SignInLimit {
    /// `Err(retry_after)` while `client`, or the server as a whole, is past its limit.
    pub(super) fn check(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut failures = self.lock();
        failures.forget_before(now);
        let full = |times: &VecDeque<Instant>, limit: usize| {
            (times.len() >= limit).then(|| {
                times.front().map_or(WINDOW, |oldest| {
                    (*oldest + WINDOW).saturating_duration_since(now)
                })
            })
        };
        let client_wait = failures
            .by_client
            .get(&client)
            .and_then(|times| full(times, PER_CLIENT));
        match client_wait.or_else(|| full(&failures.overall, OVERALL)) {
            Some(wait) => Err(wait.max(Duration::from_secs(1))),
            None => Ok(()),
        }
    }

    /// A sign-in from `client` failed.
    pub(super) fn failed(&self, client: IpAddr, now: Instant) {
        let mut failures = self.lock();
        failures.forget_before(now);
        failures.overall.push_back(now);
        if failures.by_client.len() < MAX_CLIENTS || failures.by_client.contains_key(&client) {
            failures.by_client.entry(client).or_default().push_back(now);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Failures> {
        // The counts stay usable if a holder panicked.
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Failures {
    /// Drop failures older than the window, and clients left with none.
    fn forget_before(&mut self, now: Instant) {
        let expired = |time: &Instant| now.saturating_duration_since(*time) >= WINDOW;
        let trim = |times: &mut VecDeque<Instant>| {
            while times.front().is_some_and(expired) {
                times.pop_front();
            }
        };
        trim(&mut self.overall);
        self.by_client.retain(|_, times| {
            trim(times);
            !times.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn a_client_past_its_failures_waits_until_the_oldest_ages_out() {
        let limit = SignInLimit::default();
        let start = Instant::now();
        for second in 0..PER_CLIENT as u64 {
            let now = start + Duration::from_secs(second);
            assert!(limit.check(client(1), now).is_ok());
            limit.failed(client(1), now);
        }
        let now = start + Duration::from_secs(20);
        assert_eq!(limit.check(client(1), now), Err(Duration::from_secs(40)));
        // Another client is not held back by this one.
        assert!(limit.check(client(2), now).is_ok());
        // Once the first failure is a window old, one more try is allowed.
        assert!(limit.check(client(1), start + WINDOW).is_ok());
    }

    #[test]
    fn many_clients_together_meet_the_overall_limit() {
        let limit = SignInLimit::default();
        let now = Instant::now();
        for index in 0..OVERALL {
            let from = IpAddr::from((0x0a00_0000 + u32::try_from(index).unwrap()).to_be_bytes());
            assert!(limit.check(from, now).is_ok());
            limit.failed(from, now);
        }
        let wait = limit.check(client(9), now).unwrap_err();
        assert_eq!(wait, WINDOW);
        assert!(limit.check(client(9), now + WINDOW).is_ok());
    }

    #[test]
    fn what_it_remembers_is_bounded() {
        let limit = SignInLimit::default();
        let now = Instant::now();
        for index in 0..(MAX_CLIENTS + 50) {
            let bytes = u32::try_from(index).unwrap().to_be_bytes();
            limit.failed(IpAddr::from(bytes), now);
        }
        let failures = limit.lock();
        assert_eq!(failures.by_client.len(), MAX_CLIENTS);
        drop(failures);
        // All of it goes once the window has passed.
        limit.failed(client(1), now + WINDOW);
        assert_eq!(limit.lock().by_client.len(), 1);
        assert_eq!(limit.lock().overall.len(), 1);
    }
}
