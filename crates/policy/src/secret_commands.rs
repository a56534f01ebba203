//! What may not run while a task holds secrets: anything that could read a typed value back.
//!
//! Every output is scrubbed of the secrets' values anyway; refusing these keeps the worker from
//! even asking, and covers what a scrubber cannot know (a page script that transforms the value
//! before it shows it).

/// Words that, anywhere in a command, make it a read of what a field holds (or a script that
/// could read it): `eval`, `get value`, `get attr`, `get html`, `network request(s)`, and a
/// `find … <action>` that does one of those.
const READS_BACK: &[(&str, &str)] = &[
    ("eval", "a script could read what was typed"),
    ("value", "it reads what a field holds"),
    ("attr", "it reads a field's attributes"),
    ("html", "markup can carry what was typed"),
    ("request", "a request's body can carry what was typed"),
    ("requests", "a request's body can carry what was typed"),
];

/// Why `args` may not run while secrets are held, if it may not. Flags and their values are not
/// words here; URLs never equal a word.
pub fn refused_while_secrets_held(args: &[String]) -> Option<String> {
    let word = args
        .iter()
        .filter(|arg| !arg.starts_with('-'))
        .find_map(|arg| {
            let lower = arg.to_ascii_lowercase();
            READS_BACK
                .iter()
                .find(|(word, _)| *word == lower)
                .map(|(word, why)| (*word, *why))
        });
    word.map(|(word, why)| {
        format!(
            "`{word}` is not available while this task holds secrets: {why}. Read the page with snapshot or get text instead"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn reads_of_a_field_are_refused_and_ordinary_commands_are_not() {
        for refused in [
            &["eval", "document.querySelector('#pw').value"][..],
            &["eval", "--stdin"],
            &["get", "value", "#pw"],
            &["get", "attr", "#pw", "value"],
            &["GET", "HTML", "form"],
            &["network", "requests"],
            &["network", "request", "42"],
            &["find", "label", "Password", "value"],
        ] {
            let why = refused_while_secrets_held(&args(refused));
            assert!(
                why.is_some_and(|w| w.contains("holds secrets")),
                "{refused:?}"
            );
        }
        for allowed in [
            &["open", "https://example.com/value"][..],
            &["snapshot", "-i"],
            &["get", "text", "#greeting"],
            &["fill", "#user", "someone"],
            &["click", "@e3"],
            &["screenshot"],
        ] {
            assert_eq!(
                refused_while_secrets_held(&args(allowed)),
                None,
                "{allowed:?}"
            );
        }
    }
}
