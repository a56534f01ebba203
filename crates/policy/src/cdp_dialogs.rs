//! JavaScript dialogs on a CDP lease, decided by the operator's setting.
//!
//! A page's `alert`, `confirm`, `prompt` or `beforeunload` stops it until someone answers. Left to
//! the client (the default), each client answers as it does elsewhere: Playwright dismisses a
//! dialog nobody listens for, Puppeteer leaves it open and the page waits. With `accept` or
//! `dismiss` the server answers every dialog itself, at once, in the dialog's own session, and
//! the client never hears of it (so a client's own handler cannot answer it a second time). The
//! server's answers carry ids from [`DIALOG_ID_BASE`] up, which the guard refuses to clients like
//! every server id, and the browser's replies to them are kept from the client. This is a state
//! machine without I/O: it says what to send and reads what arrives.

use serde_json::{Value, json};

use crate::cdp_ids::{DIALOG_ID_BASE, DIALOG_IDS, leading_id, next_in};

/// Who answers a lease's JavaScript dialogs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DialogSetting {
    /// The client, as it would any browser's.
    #[default]
    Client,
    /// The server accepts each (a prompt with its default text).
    Accept,
    /// The server dismisses each.
    Dismiss,
}

/// A setting that is not one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{given}` is not a dialog setting: use accept, dismiss or client")]
pub struct DialogSettingError {
    /// What was given (cut to 40 characters).
    pub given: String,
}

impl std::str::FromStr for DialogSetting {
    type Err = DialogSettingError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "client" => Ok(Self::Client),
            "accept" => Ok(Self::Accept),
            "dismiss" => Ok(Self::Dismiss),
            other => Err(DialogSettingError {
                given: other.chars().take(40).collect(),
            }),
        }
    }
}

impl std::fmt::Display for DialogSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Client => "client",
            Self::Accept => "accept",
            Self::Dismiss => "dismiss",
        })
    }
}

/// What to do with one message from the browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogStep {
    /// Not the dialogs' business: pass it to the client.
    Pass,
    /// A dialog the setting answers: send this to the browser, and nothing to the client.
    Answer(String),
    /// The browser's reply to an answer: nothing to the client.
    Keep,
}

/// One lease's dialog answering.
#[derive(Debug, Clone)]
pub struct DialogAnswers {
    setting: DialogSetting,
    next_id: i64,
    answered: u64,
}

impl DialogAnswers {
    /// Answering by `setting`.
    #[must_use]
    pub fn new(setting: DialogSetting) -> Self {
        Self {
            setting,
            next_id: DIALOG_ID_BASE,
            answered: 0,
        }
    }

    /// Dialogs answered so far.
    #[must_use]
    pub fn answered(&self) -> u64 {
        self.answered
    }

    /// Read one browser message. Only a dialog's opening event and the replies to the server's
    /// answers are parsed; the rest is told apart by a substring and an id's first digits.
    pub fn step(&mut self, message: &str) -> DialogStep {
        if self.setting == DialogSetting::Client {
            return DialogStep::Pass;
        }
        if message.starts_with("{\"id\":21") && is_answer_reply(message) {
            return DialogStep::Keep;
        }
        if !message.contains("\"Page.javascriptDialogOpening\"") {
            return DialogStep::Pass;
        }
        let Ok(event) = serde_json::from_str::<Value>(message) else {
            return DialogStep::Pass;
        };
        if event.get("method").and_then(Value::as_str) != Some("Page.javascriptDialogOpening") {
            return DialogStep::Pass;
        }
        let accept = self.setting == DialogSetting::Accept;
        let mut params = json!({"accept": accept});
        if accept
            && let Some(text) = event
                .pointer("/params/defaultPrompt")
                .and_then(Value::as_str)
        {
            params["promptText"] = Value::String(text.to_owned());
        }
        let mut answer = json!({
            "id": self.next_id,
            "method": "Page.handleJavaScriptDialog",
            "params": params,
        });
        if let Some(session) = event.get("sessionId").and_then(Value::as_str) {
            answer["sessionId"] = Value::String(session.to_owned());
        }
        self.next_id = next_in(self.next_id, &DIALOG_IDS);
        self.answered += 1;
        DialogStep::Answer(answer.to_string())
    }
}

/// Whether `message` is the browser's reply to one of the server's answers.
fn is_answer_reply(message: &str) -> bool {
    leading_id(message).is_some_and(|id| DIALOG_IDS.contains(&id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENING: &str = r#"{"method":"Page.javascriptDialogOpening","params":{"url":"http://lab/","frameId":"F","message":"Sure?","type":"prompt","hasBrowserHandler":false,"defaultPrompt":"yes"},"sessionId":"S1"}"#;

    #[test]
    fn the_client_setting_passes_everything() {
        let mut answers = DialogAnswers::new(DialogSetting::Client);
        assert_eq!(answers.step(OPENING), DialogStep::Pass);
        assert_eq!(answers.answered(), 0);
    }

    #[test]
    fn accept_answers_in_the_dialogs_session_with_its_default_text_and_keeps_the_reply() {
        let mut answers = DialogAnswers::new(DialogSetting::Accept);
        let DialogStep::Answer(answer) = answers.step(OPENING) else {
            panic!("not answered");
        };
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["method"], "Page.handleJavaScriptDialog");
        assert_eq!(
            answer["params"],
            json!({"accept": true, "promptText": "yes"})
        );
        assert_eq!(answer["sessionId"], "S1");
        assert_eq!(answer["id"], DIALOG_ID_BASE);
        let reply = format!(r#"{{"id":{DIALOG_ID_BASE},"result":{{}},"sessionId":"S1"}}"#);
        assert_eq!(answers.step(&reply), DialogStep::Keep);
        // The client's own replies and events pass.
        assert_eq!(answers.step(r#"{"id":7,"result":{}}"#), DialogStep::Pass);
        assert_eq!(
            answers.step(r#"{"id":2000000001,"result":{}}"#),
            DialogStep::Pass,
            "the live view's replies are its own business"
        );
        assert_eq!(
            answers.step(r#"{"method":"Page.loadEventFired","params":{}}"#),
            DialogStep::Pass
        );
    }

    #[test]
    fn dismiss_answers_without_text_and_each_answer_has_its_own_id() {
        let mut answers = DialogAnswers::new(DialogSetting::Dismiss);
        let ids: Vec<i64> = (0..2)
            .map(|_| match answers.step(OPENING) {
                DialogStep::Answer(answer) => {
                    let answer: Value = serde_json::from_str(&answer).unwrap();
                    assert_eq!(answer["params"], json!({"accept": false}));
                    answer["id"].as_i64().unwrap()
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, [DIALOG_ID_BASE, DIALOG_ID_BASE + 1]);
        assert_eq!(answers.answered(), 2);
    }

    #[test]
    fn a_page_that_names_the_event_in_its_own_text_is_not_a_dialog() {
        let mut answers = DialogAnswers::new(DialogSetting::Accept);
        let console = r#"{"method":"Runtime.consoleAPICalled","params":{"args":[{"value":"\"Page.javascriptDialogOpening\""}]}}"#;
        assert_eq!(answers.step(console), DialogStep::Pass);
    }

    #[test]
    fn settings_read_and_a_bad_one_names_the_choices() {
        assert_eq!("accept".parse(), Ok(DialogSetting::Accept));
        assert_eq!(DialogSetting::default(), DialogSetting::Client);
        let bad = "yes".parse::<DialogSetting>().unwrap_err();
        assert!(
            bad.to_string().contains("accept, dismiss or client"),
            "{bad}"
        );
    }
}
