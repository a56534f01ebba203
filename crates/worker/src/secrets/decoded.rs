//! Finding a secret's value in text however a browser, a server or a page spelled it, by reading
//! the text the way a decoder would rather than listing spellings: at each place a character may
//! be itself or an escape that decodes to it (percent-encoding in any component set, `+` for a
//! space as forms send it, `escape()`'s `%uXXXX` and Latin-1 bytes, HTML character references,
//! JSON and JavaScript escapes), compared without case. A page can also split the value: a run
//! that spells at least half of it, from its start or to its end, is found too, since a half is
//! what two separate reads of a split value show.
//!
//! Base64 cannot be read this way (its characters depend on their neighbours); the exact
//! spellings in the parent module cover it.

use std::collections::HashSet;
use std::ops::Range;

/// A value to find, prepared once.
#[derive(Debug, Clone)]
pub(super) struct Sought {
    /// Its characters, lower-cased.
    chars: Vec<char>,
    /// The fewest characters a prefix or suffix must spell to count (at least half the value).
    min_part: usize,
}

impl Sought {
    /// `value`, found whole or by a prefix or suffix of at least half of it (and of at least
    /// `min_part` characters).
    pub(super) fn new(value: &str, min_part: usize) -> Self {
        let chars: Vec<char> = value.chars().map(fold).collect();
        // The shorter half of an odd length too: a value split in two shows both halves.
        let half = chars.len() / 2;
        Self {
            min_part: half.max(min_part).min(chars.len()),
            chars,
        }
    }

    /// The byte ranges of `text` that spell the value or a part of it, in order, not
    /// overlapping.
    pub(super) fn spans(&self, text: &str) -> Vec<Range<usize>> {
        let mut spans = Vec::new();
        if self.chars.is_empty() {
            return spans;
        }
        let mut at = 0;
        while at < text.len() {
            match self.found_at(text, at) {
                Some(end) => {
                    spans.push(at..end);
                    at = end;
                }
                None => at += text[at..].chars().next().map_or(1, char::len_utf8),
            }
        }
        spans
    }

    /// Where a spelling that starts at `at` ends: the whole value, a long enough prefix (the
    /// longest), or a long enough suffix.
    fn found_at(&self, text: &str, at: usize) -> Option<usize> {
        let starts: Vec<char> = readings(text, at).iter().map(|(c, _)| *c).collect();
        if starts.contains(&self.chars[0]) {
            let (matched, end) = self.longest(text, at, 0);
            if matched == self.chars.len() || matched >= self.min_part {
                return Some(end);
            }
        }
        let last_start = self.chars.len() - self.min_part;
        for from in 1..=last_start {
            if !starts.contains(&self.chars[from]) {
                continue;
            }
            let (matched, end) = self.longest(text, at, from);
            if from + matched == self.chars.len() {
                return Some(end);
            }
        }
        None
    }

    /// The most characters of the value, from `from` on, that the text spells at `at`, and
    /// where that spelling ends. A place may read two ways (`%25` is `%` or the three
    /// characters), so this searches both, remembering what failed.
    fn longest(&self, text: &str, at: usize, from: usize) -> (usize, usize) {
        let mut best = (0, at);
        let mut stack = vec![(at, from)];
        let mut seen = HashSet::new();
        while let Some((position, index)) = stack.pop() {
            let matched = index - from;
            if matched > best.0 {
                best = (matched, position);
            }
            if index == self.chars.len() {
                return best;
            }
            if !seen.insert((position, index)) {
                continue;
            }
            for (decoded, next) in readings(text, position) {
                if decoded == self.chars[index] {
                    stack.push((next, index + 1));
                }
            }
        }
        best
    }
}

/// A character as compared: lower case (the first character of its lower case).
fn fold(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// The characters the text at `at` may stand for, each with where its spelling ends: the
/// character itself, and what an escape starting there decodes to.
fn readings(text: &str, at: usize) -> Vec<(char, usize)> {
    let rest = &text[at..];
    let Some(first) = rest.chars().next() else {
        return Vec::new();
    };
    let mut out = vec![(fold(first), at + first.len_utf8())];
    let escaped = match first {
        '%' => percent(rest),
        '+' => Some((' ', 1)),
        '&' => reference(rest),
        '\\' => backslash(rest),
        _ => None,
    };
    if let Some((decoded, length)) = escaped {
        out.push((fold(decoded), at + length));
    }
    out
}

/// Two hex digits as a byte.
fn hex_byte(text: &str) -> Option<u8> {
    let digits = text.get(..2)?;
    u8::from_str_radix(digits, 16)
        .ok()
        .filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Four hex digits as a UTF-16 unit.
fn hex_unit(text: &str) -> Option<u16> {
    let digits = text.get(..4)?;
    u16::from_str_radix(digits, 16)
        .ok()
        .filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `%XX` (a UTF-8 sequence of them for one character, or a Latin-1 byte as `escape()` writes
/// it), or `%uXXXX` (with a surrogate pair as `%uD83D%uDE00`).
fn percent(text: &str) -> Option<(char, usize)> {
    if let Some(units) = text.strip_prefix("%u") {
        return utf16(units, "%u").map(|(c, length)| (c, length + 2));
    }
    let first = hex_byte(&text[1..])?;
    // ASCII, or a byte that starts no UTF-8 sequence: one character (Latin-1, as `escape()`).
    let needed = match first {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return Some((char::from(first), 3)),
    };
    let mut bytes = vec![first];
    for index in 1..needed {
        let part = text.get(index * 3..)?;
        match part.strip_prefix('%').and_then(hex_byte) {
            Some(byte) => bytes.push(byte),
            None => return Some((char::from(first), 3)),
        }
    }
    match std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.chars().next())
    {
        Some(c) => Some((c, needed * 3)),
        None => Some((char::from(first), 3)),
    }
}

/// Four hex digits (and, for a high surrogate, `prefix` and four more) as one character.
fn utf16(units: &str, prefix: &str) -> Option<(char, usize)> {
    let high = hex_unit(units)?;
    if let Some(c) = char::from_u32(u32::from(high)) {
        return Some((c, 4));
    }
    let low = hex_unit(units.get(4..)?.strip_prefix(prefix)?)?;
    let c = char::decode_utf16([high, low]).next()?.ok()?;
    Some((c, 8 + prefix.len()))
}

/// An HTML character reference: `&amp;` and the other names a serializer writes, `&#34;`,
/// `&#x22;` (the `;` may be missing, as HTML allows for numbers).
fn reference(text: &str) -> Option<(char, usize)> {
    const NAMES: &[(&str, char)] = &[
        ("&amp;", '&'),
        ("&lt;", '<'),
        ("&gt;", '>'),
        ("&quot;", '"'),
        ("&apos;", '\''),
        ("&nbsp;", ' '),
        ("&sol;", '/'),
        ("&equals;", '='),
        ("&plus;", '+'),
        ("&num;", '#'),
        ("&percnt;", '%'),
        ("&quest;", '?'),
        ("&excl;", '!'),
        ("&commat;", '@'),
        ("&dollar;", '$'),
        ("&grave;", '`'),
    ];
    for (name, c) in NAMES {
        if text
            .get(..name.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(name))
        {
            return Some((*c, name.len()));
        }
    }
    let number = text.strip_prefix("&#")?;
    let (radix, digits, skip) = match number.strip_prefix(['x', 'X']) {
        Some(hex) => (16, hex, 3),
        None => (10, number, 2),
    };
    let length = digits
        .bytes()
        .take(8)
        .take_while(|b| char::from(*b).is_digit(radix))
        .count();
    let code = u32::from_str_radix(digits.get(..length)?, radix).ok()?;
    let c = char::from_u32(code)?;
    let semicolon = usize::from(digits[length..].starts_with(';'));
    Some((c, skip + length + semicolon))
}

/// A JSON or JavaScript escape: `\"`, `\\`, `\/`, `\'`, `\xHH`, `\uXXXX` (and pairs),
/// `\u{X…}`.
fn backslash(text: &str) -> Option<(char, usize)> {
    let rest = &text[1..];
    let next = rest.chars().next()?;
    match next {
        '"' | '\\' | '/' | '\'' | '`' => Some((next, 2)),
        'x' => hex_byte(&rest[1..]).map(|byte| (char::from(byte), 4)),
        'u' => {
            let units = &rest[1..];
            if let Some(braced) = units.strip_prefix('{') {
                let close = braced.find('}').filter(|close| (1..=6).contains(close))?;
                let code = u32::from_str_radix(&braced[..close], 16).ok()?;
                return char::from_u32(code).map(|c| (c, 4 + close));
            }
            utf16(units, "\\u").map(|(c, length)| (c, length + 2))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(value: &str, text: &str) -> Vec<String> {
        Sought::new(value, 4)
            .spans(text)
            .into_iter()
            .map(|span| text[span].to_owned())
            .collect()
    }

    #[test]
    fn each_escape_decodes_to_its_character() {
        let value = "Tr0ub4dor&3 ~é\"<";
        for spelling in [
            "Tr0ub4dor&3 ~é\"<",
            "TR0UB4DOR&3 ~É\"<",
            "Tr0ub4dor%263%20~%C3%A9%22%3C",
            "tr0ub4dor%263+%7e%c3%a9%22%3c",
            "Tr0ub4dor%263%20~%E9%22%3C",
            "Tr0ub4dor%263%20%7E%u00E9%22%3C",
            "Tr0ub4dor&amp;3 ~&eacute;&#34;&lt;",
            "Tr0ub4dor&amp;3&#32;&#x7E;é&quot;&LT;",
            "Tr0ub4dor\\u00263 ~\\u00e9\\\"\\x3c",
            "Tr0ub4dor\\u{26}3 ~é\\\"<",
        ] {
            let spans = found(value, &format!("before {spelling} after"));
            // &eacute; is not a name a serializer writes for é: that one stays a half.
            assert!(!spans.is_empty(), "{spelling}");
            if !spelling.contains("&eacute;") {
                assert_eq!(spans, [spelling], "{spelling}");
            }
        }
        assert!(found(value, "nothing like it").is_empty());
    }

    #[test]
    fn a_surrogate_pair_decodes_to_one_character() {
        let value = "ab😀cd-longer";
        assert_eq!(
            found(value, "x%uD83D%uDE00cd-longer"),
            ["%uD83D%uDE00cd-longer"]
        );
        assert_eq!(
            found(value, "ab\\ud83d\\ude00cd-longer"),
            ["ab\\ud83d\\ude00cd-longer"]
        );
    }

    #[test]
    fn a_half_from_either_end_is_found_and_less_is_not() {
        let value = "correct-horse-battery";
        // Split in two, as a page that shows each half in its own element.
        assert_eq!(found(value, "first: correct-hors!"), ["correct-hors"]);
        assert_eq!(found(value, "then se-battery."), ["se-battery"]);
        assert_eq!(found(value, "then CORRECT%2DHORS"), ["CORRECT%2DHORS"]);
        // Less than half, or from the middle, is ordinary text.
        assert!(found(value, "correct horse").is_empty());
        assert!(found(value, "-horse-bat").is_empty());
        assert!(found(value, "e-battery").is_empty());
    }

    #[test]
    fn a_literal_percent_in_the_value_is_read_both_ways() {
        let value = "100%25sure";
        assert_eq!(found(value, "x 100%25sure y"), ["100%25sure"]);
        assert_eq!(found(value, "x 100%2525sure y"), ["100%2525sure"]);
    }

    #[test]
    fn broken_escapes_are_just_characters() {
        for text in [
            "%", "%4", "%G1", "&#", "&#x;", "\\u12", "\\u{}", "&", "%uD83D", "%C3",
        ] {
            assert!(found("abcdef", text).is_empty(), "{text}");
        }
    }
}
