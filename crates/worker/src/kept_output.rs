//! Long tool outputs, paged instead of cut.
//!
//! An output longer than `max_output_chars` is kept whole in the task's memory and the worker is
//! shown a preview (its start and its end) with an id; the `read_output` tool then reads any
//! slice of it, or finds text in it. Kept outputs are bounded per task
//! (`max_kept_output_bytes`, oldest dropped first) and vanish with the task. Offsets and lengths
//! count characters, so a slice never splits one.

use std::collections::VecDeque;

use regex::RegexBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::limits::TaskLimits;
use crate::ports::ToolDefinition;

/// The paging tool's name.
pub const READ_OUTPUT: &str = "read_output";

/// What the model (or an agent driving a browser directly) is told of the paging tool.
pub const READ_OUTPUT_DESCRIPTION: &str = "Read more of a long tool output that was shown to you as a \
preview with an id (`out-1`). Give `offset` (a character position, from 0) and optionally `length` \
to read a slice, or `find` to list where a text occurs (case does not matter) with the line around \
each place. Each call counts as a step.";

/// Places `find` lists at most, so a search cannot flood the context either.
const MAX_FOUND: usize = 20;
/// Characters shown on each side of a place `find` found.
const FOUND_CONTEXT: usize = 80;

/// The input of `read_output`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadOutputInput {
    /// The id the preview gave, such as `out-1`.
    pub id: String,
    /// The first character to read, counting from 0. Default 0.
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many characters to read. Default and most: the output cap.
    #[serde(default)]
    pub length: Option<usize>,
    /// Instead of a slice: where this text occurs, with each place's offset and surroundings.
    #[serde(default)]
    pub find: Option<String>,
}

/// Why `read_output` could not answer; each says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadOutputError {
    /// The input is not `{id, offset?, length?, find?}`.
    #[error(
        "the input is not valid ({0}); pass {{\"id\": \"out-1\", \"offset\": 0}} or {{\"id\": \"out-1\", \"find\": \"text\"}}"
    )]
    Input(String),
    /// No output ever had this id.
    #[error(
        "there is no output `{id}`: ids look like out-1 and come with the preview of a long output"
    )]
    Unknown {
        /// The id asked for.
        id: String,
    },
    /// The output was kept once and dropped to stay within the task's bound.
    #[error(
        "output `{id}` was dropped to keep this task's kept outputs under {limit} bytes (oldest go first); run its command again"
    )]
    Dropped {
        /// The id asked for.
        id: String,
        /// `max_kept_output_bytes`.
        limit: usize,
    },
    /// The offset is at or past the end.
    #[error(
        "offset {offset} is past the end of `{id}`, which has {total} characters: use an offset from 0 to {last}"
    )]
    Offset {
        /// The id asked for.
        id: String,
        /// The offset given.
        offset: usize,
        /// The output's length in characters.
        total: usize,
        /// The last valid offset.
        last: usize,
    },
    /// A length of zero reads nothing.
    #[error("length 0 reads nothing: give a length of at least 1, or leave it out")]
    ZeroLength,
    /// `find` was empty.
    #[error("find is empty: give the text to look for")]
    EmptyFind,
}

/// One kept output.
#[derive(Debug)]
struct Kept {
    number: u64,
    text: String,
    chars: usize,
}

/// The outputs one task keeps, bounded in bytes, oldest dropped first.
#[derive(Debug)]
pub(crate) struct KeptOutputs {
    limit: usize,
    used: usize,
    entries: VecDeque<Kept>,
    next: u64,
    /// Reads answered (for the task's context record).
    reads: usize,
}

impl KeptOutputs {
    /// A store holding at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            used: 0,
            entries: VecDeque::new(),
            next: 1,
            reads: 0,
        }
    }

    /// Whether anything can be kept at all.
    pub(crate) fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Outputs kept over the task, dropped ones included.
    pub(crate) fn kept_count(&self) -> usize {
        usize::try_from(self.next - 1).unwrap_or(usize::MAX)
    }

    /// `read_output` calls answered.
    pub(crate) fn read_count(&self) -> usize {
        self.reads
    }

    /// Keep `text` and return its id, or `None` if it is larger than the whole bound.
    fn keep(&mut self, text: String) -> Option<String> {
        if text.len() > self.limit {
            return None;
        }
        while self.used + text.len() > self.limit {
            let Some(oldest) = self.entries.pop_front() else {
                break;
            };
            self.used -= oldest.text.len();
        }
        let number = self.next;
        self.next += 1;
        self.used += text.len();
        let chars = text.chars().count();
        self.entries.push_back(Kept {
            number,
            text,
            chars,
        });
        Some(format!("out-{number}"))
    }

    /// What the worker is shown of `text`: all of it when it fits in `cap` characters, else a
    /// preview with an id to page with (or, when nothing may be kept, the old cut).
    pub(crate) fn show(&mut self, text: String, cap: usize) -> String {
        let total = text.chars().count();
        if total <= cap {
            return text;
        }
        if !self.enabled() {
            return cut(&text, cap);
        }
        // The end often says how a list or a log finishes; a tenth of the cap, at most 1000.
        let tail_chars = (cap / 10).min(1000);
        let head_chars = cap - tail_chars;
        let head: String = text.chars().take(head_chars).collect();
        let tail: String = text.chars().skip(total - tail_chars).collect();
        let bytes = text.len();
        match self.keep(text) {
            Some(id) => format!(
                "{head}\n[… {id}: this output has {total} characters; shown are 0–{head_chars} above and \
                 {}–{total} below. Read on with {READ_OUTPUT} {{\"id\": \"{id}\", \"offset\": {head_chars}}}, \
                 or search it with {READ_OUTPUT} {{\"id\": \"{id}\", \"find\": \"…\"}}.]\n{tail}",
                total - tail_chars
            ),
            None => format!(
                "{head}\n[… cut: this output has {total} characters ({bytes} bytes), more than the {} bytes \
                 a task may keep, so the rest is lost; ask for less (snapshot -s <selector>, get text <selector>).]",
                self.limit
            ),
        }
    }

    /// Answer one `read_output` call; `cap` is the most characters one read shows.
    pub(crate) fn read(&mut self, input: Value, cap: usize) -> Result<String, ReadOutputError> {
        let input: ReadOutputInput =
            serde_json::from_value(input).map_err(|e| ReadOutputError::Input(e.to_string()))?;
        let kept = self.find_kept(&input.id)?;
        let text = match &input.find {
            Some(needle) => found(kept, &input.id, needle)?,
            None => slice(
                kept,
                &input.id,
                input.offset.unwrap_or(0),
                input.length,
                cap,
            )?,
        };
        self.reads += 1;
        Ok(text)
    }

    fn find_kept(&self, id: &str) -> Result<&Kept, ReadOutputError> {
        let number = id
            .trim()
            .strip_prefix("out-")
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|n| (1..self.next).contains(n))
            .ok_or_else(|| ReadOutputError::Unknown { id: id.to_owned() })?;
        self.entries
            .iter()
            .find(|kept| kept.number == number)
            .ok_or_else(|| ReadOutputError::Dropped {
                id: id.to_owned(),
                limit: self.limit,
            })
    }
}

fn slice(
    kept: &Kept,
    id: &str,
    offset: usize,
    length: Option<usize>,
    cap: usize,
) -> Result<String, ReadOutputError> {
    if offset >= kept.chars {
        return Err(ReadOutputError::Offset {
            id: id.to_owned(),
            offset,
            total: kept.chars,
            last: kept.chars.saturating_sub(1),
        });
    }
    let length = match length {
        Some(0) => return Err(ReadOutputError::ZeroLength),
        Some(length) => length.min(cap),
        None => cap,
    };
    let end = offset.saturating_add(length).min(kept.chars);
    let part: String = kept.text.chars().skip(offset).take(end - offset).collect();
    let total = kept.chars;
    let next = if end < total {
        format!("next: {READ_OUTPUT} {{\"id\": \"{id}\", \"offset\": {end}}}")
    } else {
        "the end".to_owned()
    };
    Ok(format!(
        "[{id}: characters {offset}–{end} of {total}; {next}]\n{part}"
    ))
}

fn found(kept: &Kept, id: &str, needle: &str) -> Result<String, ReadOutputError> {
    if needle.trim().is_empty() {
        return Err(ReadOutputError::EmptyFind);
    }
    let pattern = RegexBuilder::new(&regex::escape(needle))
        .case_insensitive(true)
        .build()
        .map_err(|e| ReadOutputError::Input(e.to_string()))?;
    let text = &kept.text;
    let mut places = Vec::new();
    let mut count = 0;
    // Byte offsets from the regex, turned into character offsets as we go (matches are in order).
    let (mut byte_at, mut char_at) = (0, 0);
    for found in pattern.find_iter(text) {
        count += 1;
        if places.len() == MAX_FOUND {
            continue;
        }
        char_at += text[byte_at..found.start()].chars().count();
        byte_at = found.start();
        let before_start = floor_chars_back(text, found.start(), FOUND_CONTEXT);
        let after_end = ceil_chars_forward(text, found.end(), FOUND_CONTEXT);
        let around = text[before_start..after_end].replace(['\n', '\r'], " ");
        places.push(format!("- offset {char_at}: …{around}…"));
    }
    let mut answer = format!(
        "[{id}: `{needle}` occurs {count} time{} in {} characters]",
        if count == 1 { "" } else { "s" },
        kept.chars
    );
    for place in &places {
        answer.push('\n');
        answer.push_str(place);
    }
    if count > places.len() {
        answer.push_str(&format!(
            "\n[the first {MAX_FOUND} are listed; search for something more exact to see the rest]"
        ));
    }
    Ok(answer)
}

/// The byte index `chars` characters before `index` (or 0).
fn floor_chars_back(text: &str, index: usize, chars: usize) -> usize {
    text[..index]
        .char_indices()
        .rev()
        .nth(chars.saturating_sub(1))
        .map_or(0, |(at, _)| at)
}

/// The byte index `chars` characters after `index` (or the end).
fn ceil_chars_forward(text: &str, index: usize, chars: usize) -> usize {
    text[index..]
        .char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| index + at)
}

/// The paging tool's definition, for the model.
pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition::for_input::<ReadOutputInput>(READ_OUTPUT, READ_OUTPUT_DESCRIPTION)
}

/// Whether a task with `limits` offers `read_output`.
pub(crate) fn offered(limits: &TaskLimits) -> bool {
    limits.max_kept_output_bytes > 0
}

/// Cut `text` to `max` characters, saying how much was cut.
pub fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n[… cut: {} more characters not shown]", total - max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hundred_thousand() -> String {
        // Multi-byte characters throughout, so a byte-based slice would split one.
        (0..100_000)
            .map(|i| {
                if i % 7 == 0 {
                    'é'
                } else {
                    char::from(b'a' + u8::try_from(i % 26).unwrap())
                }
            })
            .collect()
    }

    #[test]
    fn a_long_output_gets_a_preview_and_an_id_and_pages_back_exactly() {
        let text = hundred_thousand();
        let mut store = KeptOutputs::new(8 * 1024 * 1024);
        let shown = store.show(text.clone(), 10_000);
        assert!(
            shown.contains("out-1: this output has 100000 characters"),
            "{shown}"
        );
        assert!(shown.starts_with(&text.chars().take(9_000).collect::<String>()));
        assert!(shown.ends_with(&text.chars().skip(99_000).collect::<String>()));

        let mut rebuilt = String::new();
        let mut offset = 0;
        while offset < 100_000 {
            let page = store
                .read(
                    json!({"id": "out-1", "offset": offset, "length": 7_777}),
                    10_000,
                )
                .unwrap();
            let (header, body) = page.split_once('\n').unwrap();
            let end = (offset + 7_777).min(100_000);
            assert!(
                header.contains(&format!("characters {offset}–{end} of 100000")),
                "{header}"
            );
            assert_eq!(body.chars().count(), end - offset);
            rebuilt.push_str(body);
            offset = end;
        }
        assert_eq!(rebuilt, text);
        assert_eq!(store.read_count(), 13);
    }

    #[test]
    fn a_read_is_never_longer_than_the_cap() {
        let mut store = KeptOutputs::new(1024 * 1024);
        store.show("x".repeat(50_000), 1_000);
        let page = store
            .read(json!({"id": "out-1", "length": 40_000}), 1_000)
            .unwrap();
        assert!(page.contains("characters 0–1000 of 50000"), "{page}");
        assert!(page.contains("\"offset\": 1000"), "{page}");
    }

    #[test]
    fn bad_reads_name_the_fix() {
        let mut store = KeptOutputs::new(1024 * 1024);
        store.show("y".repeat(5_000), 1_000);
        let mut error = |input| store_read(&mut store, input);
        assert!(matches!(
            error(json!({"id": "out-9"})),
            ReadOutputError::Unknown { .. }
        ));
        assert!(matches!(
            error(json!({"id": "nonsense"})),
            ReadOutputError::Unknown { .. }
        ));
        assert!(matches!(
            error(json!({"id": "out-0"})),
            ReadOutputError::Unknown { .. }
        ));
        let past = error(json!({"id": "out-1", "offset": 5_000}));
        assert_eq!(
            past.to_string(),
            "offset 5000 is past the end of `out-1`, which has 5000 characters: use an offset from 0 to 4999"
        );
        assert_eq!(
            error(json!({"id": "out-1", "length": 0})),
            ReadOutputError::ZeroLength
        );
        assert_eq!(
            error(json!({"id": "out-1", "find": " "})),
            ReadOutputError::EmptyFind
        );
        assert!(matches!(
            error(json!({"id": "out-1", "offset": -1})),
            ReadOutputError::Input(_)
        ));
        assert!(matches!(
            error(json!({"id": "out-1", "page": 2})),
            ReadOutputError::Input(_)
        ));
        assert!(matches!(error(json!("out-1")), ReadOutputError::Input(_)));
        assert_eq!(store.read_count(), 0, "a refused read is not counted");
    }

    fn store_read(store: &mut KeptOutputs, input: Value) -> ReadOutputError {
        store.read(input, 1_000).unwrap_err()
    }

    #[test]
    fn the_store_keeps_its_byte_bound_dropping_the_oldest() {
        let mut store = KeptOutputs::new(25_000);
        for letter in ['a', 'b', 'c'] {
            store.show(letter.to_string().repeat(10_000), 1_000);
        }
        assert!(store.used <= 25_000);
        let dropped = store.read(json!({"id": "out-1"}), 1_000).unwrap_err();
        assert_eq!(
            dropped.to_string(),
            "output `out-1` was dropped to keep this task's kept outputs under 25000 bytes (oldest go first); run its command again"
        );
        assert!(
            store
                .read(json!({"id": "out-2"}), 1_000)
                .unwrap()
                .ends_with(&"b".repeat(1_000))
        );
        assert!(
            store
                .read(json!({"id": "out-3"}), 1_000)
                .unwrap()
                .ends_with(&"c".repeat(1_000))
        );
        assert_eq!(store.kept_count(), 3);

        // One output larger than the whole bound is not kept, and the worker is told so.
        let shown = store.show("z".repeat(30_000), 1_000);
        assert!(
            shown.contains("more than the 25000 bytes a task may keep"),
            "{shown}"
        );
        assert!(
            store.read(json!({"id": "out-2"}), 1_000).is_ok(),
            "nothing was evicted for it"
        );
    }

    #[test]
    fn with_nothing_kept_a_long_output_is_cut_as_before() {
        let mut store = KeptOutputs::new(0);
        let shown = store.show("q".repeat(2_000), 1_000);
        assert_eq!(shown, cut(&"q".repeat(2_000), 1_000));
    }

    #[test]
    fn short_outputs_are_shown_whole_and_not_kept() {
        let mut store = KeptOutputs::new(1024);
        assert_eq!(store.show("short".to_owned(), 1_000), "short");
        assert_eq!(store.kept_count(), 0);
    }

    #[test]
    fn find_lists_places_by_character_offset_ignoring_case() {
        let mut text = "é".repeat(3_000);
        text.push_str("The Vault Code is ZEBRA-4821.");
        text.push_str(&"ü".repeat(3_000));
        text.push_str("vault code again");
        let mut store = KeptOutputs::new(1024 * 1024);
        store.show(text.clone(), 1_000);
        let answer = store
            .read(json!({"id": "out-1", "find": "VAULT CODE"}), 1_000)
            .unwrap();
        assert!(
            answer.starts_with("[out-1: `VAULT CODE` occurs 2 times"),
            "{answer}"
        );
        assert!(answer.contains("- offset 3004: "), "{answer}");
        assert!(answer.contains("ZEBRA-4821"), "{answer}");
        let second = 3_000 + "The Vault Code is ZEBRA-4821.".len() + 3_000;
        assert!(answer.contains(&format!("- offset {second}: ")), "{answer}");
        // The offset it gives reads the place itself.
        let at = store
            .read(json!({"id": "out-1", "offset": 3004, "length": 10}), 1_000)
            .unwrap();
        assert!(at.ends_with("Vault Code"), "{at}");
    }

    #[test]
    fn find_lists_at_most_twenty_places() {
        let mut store = KeptOutputs::new(1024 * 1024);
        store.show("needle ".repeat(1_000), 1_000);
        let answer = store
            .read(json!({"id": "out-1", "find": "needle"}), 1_000)
            .unwrap();
        assert!(answer.contains("occurs 1000 times"), "{answer}");
        assert_eq!(answer.matches("- offset ").count(), MAX_FOUND);
        assert!(answer.contains("the first 20 are listed"));
    }
}
