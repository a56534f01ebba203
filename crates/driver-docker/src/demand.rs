//! How many warm browsers the pool should hold now, between its minimum and its maximum: enough
//! for the tasks expected to arrive while one more browser is made, judged from the arrivals of
//! the last window and the tasks that found the pool empty in it, and the minimum again once a
//! whole window passes with no arrival. Pure: the pool brings the clock.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Arrivals remembered at most (a window's worth at any rate the host can serve).
const MAX_ARRIVALS: usize = 256;

/// What the pool has seen of its tasks.
#[derive(Debug)]
pub(crate) struct Demand {
    min: usize,
    max: usize,
    window: Duration,
    /// When tasks asked, oldest first, and whether each found a warm browser.
    arrivals: VecDeque<(Instant, bool)>,
    /// How long making one browser takes (a moving average of the last few).
    making: Duration,
}

impl Demand {
    /// A pool of `min` to `max` browsers that looks back over `window`.
    pub(crate) fn new(min: usize, max: usize, window: Duration) -> Self {
        Self {
            min,
            max: max.max(min),
            window,
            arrivals: VecDeque::new(),
            // Until one is measured: a cold start on this kind of host.
            making: Duration::from_secs(2),
        }
    }

    /// A task asked at `now`; `warm` when it found a browser ready.
    pub(crate) fn arrived(&mut self, now: Instant, warm: bool) {
        if self.arrivals.len() == MAX_ARRIVALS {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back((now, warm));
    }

    /// Making one browser took `took`.
    pub(crate) fn made(&mut self, took: Duration) {
        self.making = (self.making * 3 + took) / 4;
    }

    /// The browsers to hold at `now`.
    pub(crate) fn target(&self, now: Instant) -> usize {
        if self.min == self.max {
            return self.min;
        }
        let recent = self
            .arrivals
            .iter()
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.window);
        let (mut count, mut missed) = (0_u32, 0_usize);
        for (_, warm) in recent {
            count += 1;
            missed += usize::from(!*warm);
        }
        if count == 0 {
            return self.min;
        }
        // The arrivals expected while one browser is made, at least one; and one more for each
        // task that found the pool empty (the pool was that much too small).
        let expected = self.making.as_secs_f64() * f64::from(count) / self.window.as_secs_f64();
        // Bounded before the cast (which is then exact); the maximum bounds it further below.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let expected = expected.ceil().clamp(0.0, 1024.0) as usize;
        (expected.max(1) + missed).clamp(self.min, self.max)
    }

    /// When the target next falls without a new arrival (the newest leaves the window), while it
    /// is above the minimum.
    pub(crate) fn next_fall(&self, now: Instant) -> Option<Instant> {
        if self.target(now) <= self.min {
            return None;
        }
        self.arrivals
            .iter()
            .map(|(at, _)| *at + self.window)
            .find(|leaves| *leaves > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    #[test]
    fn a_fixed_pool_keeps_its_size_whatever_arrives() {
        let mut demand = Demand::new(2, 2, WINDOW);
        let now = Instant::now();
        for _ in 0..50 {
            demand.arrived(now, false);
        }
        assert_eq!(demand.target(now), 2);
        assert_eq!(demand.next_fall(now), None);
    }

    #[test]
    fn the_pool_grows_with_arrivals_and_misses_and_stays_within_its_bounds() {
        let mut demand = Demand::new(0, 4, WINDOW);
        let now = Instant::now();
        assert_eq!(demand.target(now), 0, "nobody asked yet");
        demand.arrived(now, true);
        assert_eq!(demand.target(now), 1, "one arrival keeps one ready");
        demand.arrived(now, false);
        assert_eq!(demand.target(now), 2, "a task found the pool empty");
        for _ in 0..10 {
            demand.arrived(now, false);
        }
        assert_eq!(demand.target(now), 4, "never past the maximum");
    }

    #[test]
    fn a_fast_arrival_rate_asks_for_what_arrives_while_one_browser_is_made() {
        let mut demand = Demand::new(1, 8, WINDOW);
        let start = Instant::now();
        demand.made(Duration::from_secs(2));
        // 90 warm arrivals in the last minute: 1.5 a second, 3 while one browser is made.
        for n in 0..90 {
            demand.arrived(start + Duration::from_millis(n * 600), true);
        }
        assert_eq!(demand.target(start + WINDOW), 3);
    }

    #[test]
    fn a_window_with_no_arrival_falls_back_to_the_minimum_at_the_time_it_names() {
        let mut demand = Demand::new(1, 4, WINDOW);
        let start = Instant::now();
        demand.arrived(start, false);
        demand.arrived(start + Duration::from_secs(10), false);
        let now = start + Duration::from_secs(30);
        assert_eq!(demand.target(now), 3);
        assert_eq!(demand.next_fall(now), Some(start + WINDOW));
        assert_eq!(demand.target(start + WINDOW), 2);
        let quiet = start + Duration::from_secs(10) + WINDOW;
        assert_eq!(demand.target(quiet), 1);
        assert_eq!(demand.next_fall(quiet), None);
    }

    #[test]
    fn memory_of_arrivals_is_bounded() {
        let mut demand = Demand::new(0, 2, WINDOW);
        let now = Instant::now();
        for _ in 0..(MAX_ARRIVALS * 3) {
            demand.arrived(now, true);
        }
        assert_eq!(demand.arrivals.len(), MAX_ARRIVALS);
    }
}
