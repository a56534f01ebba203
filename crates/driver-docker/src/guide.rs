//! What the worker is told about its browser: Airlock's short guide in the tool's own call form
//! (the default), or agent-browser's own guide read from the binary in the container.
//!
//! agent-browser's guide (`skills get core`, about 14.5 kB, some 3,600 tokens) is written for a
//! person's agent at a shell: sessions, installing, shell pipes, vaults, other skills, WebMCP.
//! Most of it is refused or meaningless in a sealed browser, every task pays for it before its
//! first action, and a small model imitates its `agent-browser …` command lines instead of
//! calling the tool (seen with Qwen2.5-Coder-1.5B: the first "report" was a bash fence of
//! commands). The short guide shows only commands the policy allows, each written as the
//! tool's `args`; a unit test holds every example to the command policy.

use std::fmt;
use std::str::FromStr;

/// Which guide the worker reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Guide {
    /// Airlock's short guide, in call form.
    #[default]
    Compact,
    /// agent-browser's own guide from the binary, with notes on turning its command lines into
    /// calls: every command and flag it documents, at several times the tokens.
    AgentBrowser,
}

impl Guide {
    /// The driver's notes that follow the guide.
    pub(crate) fn notes(self) -> String {
        match self {
            Self::Compact => SEALED_NOTES.to_owned(),
            Self::AgentBrowser => format!("{CALL_FORM} {READING_NOTES} {SEALED_NOTES}"),
        }
    }
}

impl fmt::Display for Guide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Compact => "compact",
            Self::AgentBrowser => "agent-browser",
        })
    }
}

/// A guide name that is none of [`Guide::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guide `{0}` is not one Airlock has: use compact (the default) or agent-browser")]
pub struct UnknownGuide(String);

impl FromStr for Guide {
    type Err = UnknownGuide;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "compact" => Ok(Self::Compact),
            "agent-browser" => Ok(Self::AgentBrowser),
            other => Err(UnknownGuide(other.to_owned())),
        }
    }
}

/// Airlock's short guide. Every `["…"]` list in it is a command the policy allows (tested).
pub(crate) const COMPACT_GUIDE: &str = r##"Your browser is driven by agent-browser. Call the `agent_browser` tool once per step with `args`, the command as a list of words, for example {"args": ["click", "@e3"]}. There is no shell: one command per call, no quoting.

Look at the page:
- ["snapshot", "-i"]: the elements you can click, fill or choose, one a line with its role, text and ref, like `- button "Submit" [ref=e3]`; you act on that one as @e3. Take one after opening a page and after anything that changes it: an older snapshot's refs may be gone.
- ["snapshot"]: the whole page as a tree of text, to read it. ["snapshot", "-s", "#main"] reads one part (a CSS selector).
- ["get", "text", "@e5"]: one element's text. Also ["get", "value", "@e2"] (what a field holds), ["get", "title"], ["get", "url"].

Act on refs from your latest snapshot (a CSS selector such as "#submit" works too):
- ["click", "@e3"]: links, buttons, tabs, checkboxes, radio buttons, list items.
- ["fill", "@e2", "hello world"]: clear a field and type into it. ["type", "@e2", " more"] types without clearing.
- ["press", "Enter"]: a key, sent to the focused element (also Tab, Escape, ArrowDown, Control+a).
- ["select", "@e4", "Blue"]: choose an option of a drop-down list by its text or value.
- ["check", "@e6"] and ["uncheck", "@e6"]: tick or clear a checkbox.
- ["scroll", "down", "500"], or ["scrollintoview", "@e9"] for one element.
- ["find", "text", "Sign in", "click"]: act on an element found by its text, without a ref. Also ["find", "label", "Email", "fill", "dana@example.org"] and ["find", "role", "button", "click", "--name", "Save"].
- ["open", "https://example.com/page"]: go to a page. ["back"] and ["reload"] too.
- ["wait", "--text", "Saved"]: wait until a text appears (["wait", "@e1"]: an element).
- ["eval", "document.querySelector('#out').textContent"]: run JavaScript in the page, to read what the other commands do not show.
- ["screenshot"]: a picture of the page, only when its text does not tell you enough.

When a command fails: a ref that is not found means the page changed, so take a new snapshot and use its refs. A click that does nothing is often covered by something else: take a snapshot and deal with that first."##;

/// How to run the commands of agent-browser's own guide, which are written for a shell.
const CALL_FORM: &str = "\
How to run the commands in the guide: call the `agent_browser` tool with the words after \
`agent-browser` as a list in `args`, one command per call. There is no shell: no quoting, no \
pipes, no `&&`, no redirection, no environment variables. For example, the guide's \
`agent-browser fill @e2 \"hello world\"` is {\"args\": [\"fill\", \"@e2\", \"hello world\"]}, and \
`cat script.js | agent-browser eval --stdin` is {\"args\": [\"eval\", \"--stdin\"], \"stdin\": \"<the script>\"}.";

/// What holds in the sealed browser, whichever guide the worker reads.
const SEALED_NOTES: &str = "\
Screenshots are shown to you and saved by the tool wherever it likes (any path you give is ignored); \
set `keep` to true to return one with your report. The browser is already set up: commands that \
change how it is launched, its proxy, its profile or files on disk are refused, and so are \
destinations that are not public. When a request is refused, the tool result says so. \
An output too long to show whole comes as a preview with an id: search it with `read_output` and \
`find`, or read on from an offset, instead of running the command again.";

/// How to read a page without filling the context: the short guide says this in its own words,
/// agent-browser's does not.
const READING_NOTES: &str = "\
What you read fills your context, so ask for no more than you need: to read, `get text <selector>` \
gives an element's text without the tree around it (on long tables and link lists a third to a quarter \
of `snapshot`); `snapshot -i` lists only what you can click or fill; `snapshot -s <css selector>` \
scopes a snapshot to one part of the page.";

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `[...]` word list in the short guide.
    fn examples() -> Vec<Vec<String>> {
        let mut found = Vec::new();
        let mut rest = COMPACT_GUIDE;
        while let Some(start) = rest.find("[\"") {
            let after = &rest[start..];
            let end = after.find(']').expect("every example list is closed");
            let list: Vec<String> =
                serde_json::from_str(&after[..=end]).expect("every example is a JSON list");
            found.push(list);
            rest = &after[end + 1..];
        }
        found
    }

    #[test]
    fn every_command_the_short_guide_shows_is_one_the_policy_allows() {
        let examples = examples();
        assert!(examples.len() >= 20, "{examples:?}");
        for args in examples {
            if let Err(refusal) = airlock_policy::check_command(&args) {
                panic!("the guide shows {args:?}, which the policy refuses: {refusal}");
            }
        }
    }

    #[test]
    fn the_short_guide_is_short_and_the_notes_follow_each_guide() {
        // agent-browser 0.41.2's own guide is 14,457 bytes; the point of this one is its size.
        assert!(COMPACT_GUIDE.len() < 3_000, "{}", COMPACT_GUIDE.len());
        assert!(!Guide::Compact.notes().contains("guide's `agent-browser"));
        assert!(Guide::AgentBrowser.notes().starts_with(CALL_FORM));
        assert!(Guide::AgentBrowser.notes().contains(READING_NOTES));
        assert!(!Guide::Compact.notes().contains(READING_NOTES));
        for guide in [Guide::Compact, Guide::AgentBrowser] {
            assert!(guide.notes().ends_with(SEALED_NOTES));
            assert_eq!(guide.to_string().parse::<Guide>(), Ok(guide));
        }
        let unknown = "full".parse::<Guide>().expect_err("not a guide");
        assert!(unknown.to_string().contains("compact"), "{unknown}");
    }
}
