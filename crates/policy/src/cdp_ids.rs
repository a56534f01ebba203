//! The command ids the server sends on a lease's DevTools pipe, beside its client's.
//!
//! Clients count up from 1; the server's own commands take ids from [`SERVER_ID_BASE`] up, which
//! the guard refuses to clients, so an answer's id alone says whose it is. The range is split
//! between the live view's watch and the dialog answers, each wrapping within its part.
//! Chromium reads ids as 32-bit integers, so [`SERVER_ID_LAST`] is `i32::MAX`.

use std::ops::RangeInclusive;

/// The first id of the server's own commands.
pub const SERVER_ID_BASE: i64 = 2_000_000_000;
/// The first id of the server's answers to JavaScript dialogs (the watch's ids end below it).
pub const DIALOG_ID_BASE: i64 = 2_100_000_000;
/// The last id Chromium reads.
pub(crate) const SERVER_ID_LAST: i64 = i32::MAX as i64;

/// The live view's watch's ids.
pub(crate) const WATCH_IDS: RangeInclusive<i64> = SERVER_ID_BASE..=DIALOG_ID_BASE - 1;
/// The dialog answers' ids.
pub(crate) const DIALOG_IDS: RangeInclusive<i64> = DIALOG_ID_BASE..=SERVER_ID_LAST;

/// The id after `id` within `range`, back to its start past its end: an answer to an id that
/// old has long arrived.
pub(crate) fn next_in(id: i64, range: &RangeInclusive<i64>) -> i64 {
    if id >= *range.end() || id < *range.start() {
        *range.start()
    } else {
        id + 1
    }
}

/// An answer's id, read from its first bytes (`{"id":N,`): Chromium writes it first.
pub(crate) fn leading_id(text: &str) -> Option<i64> {
    let rest = text.strip_prefix("{\"id\":")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest.get(..digits)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_wrap_within_their_part_and_are_read_from_the_front() {
        assert_eq!(next_in(SERVER_ID_BASE, &WATCH_IDS), SERVER_ID_BASE + 1);
        assert_eq!(next_in(DIALOG_ID_BASE - 1, &WATCH_IDS), SERVER_ID_BASE);
        assert_eq!(next_in(SERVER_ID_LAST, &DIALOG_IDS), DIALOG_ID_BASE);
        assert_eq!(next_in(5, &DIALOG_IDS), DIALOG_ID_BASE);
        assert_eq!(leading_id(r#"{"id":12,"result":{}}"#), Some(12));
        assert_eq!(leading_id(r#"{"method":"x"}"#), None);
        assert_eq!(leading_id(r#"{"id":"x"}"#), None);
    }
}
