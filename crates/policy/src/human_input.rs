//! The guard on what a human helping a task may send to its browser: mouse, keyboard and touch
//! events on the page, nothing else. A viewer's message is parsed into one of these typed events
//! (unknown fields and types refused, every number and string bounded) and only the event is
//! written on to agent-browser's stream, so a viewer can never send the stream's other messages
//! (its configuration, or anything a later agent-browser adds). Input alone cannot open the seal:
//! whatever a click or a key makes the page fetch still goes through the egress proxy. The
//! browser is headless, so keys reach the page, not a window (no address bar, no DevTools, no
//! file dialog to open).

use serde::{Deserialize, Serialize};

/// The largest message a viewer may send (an event is far smaller).
pub const MAX_HUMAN_MESSAGE_BYTES: usize = 1024;
/// The largest coordinate taken (pixels; the viewport is 1280 × 720).
const MAX_COORDINATE: f64 = 10_000.0;
/// The largest scroll step taken (pixels).
const MAX_WHEEL_DELTA: f64 = 10_000.0;
/// The most touch points in one event.
const MAX_TOUCH_POINTS: usize = 10;
/// The longest `key` or `code` (`"ArrowLeft"`, `"Backspace"`, `"KeyA"`).
const MAX_KEY_CHARS: usize = 32;
/// The longest `text` one key event types (one character, or a short composed one).
const MAX_KEY_TEXT_CHARS: usize = 8;

/// One input event from a human, as agent-browser's stream takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HumanInput {
    /// A mouse event (press, release, move, wheel).
    InputMouse(MouseInput),
    /// A key event.
    InputKeyboard(KeyInput),
    /// A touch event.
    InputTouch(TouchInput),
}

/// A mouse event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MouseInput {
    /// What happened.
    pub event_type: MouseEvent,
    /// Where, in the page's CSS pixels.
    pub x: f64,
    /// Where, in the page's CSS pixels.
    pub y: f64,
    /// Which button, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub button: Option<MouseButton>,
    /// 1 for a click, 2 for a double click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub click_count: Option<u8>,
    /// A wheel's horizontal step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_x: Option<f64>,
    /// A wheel's vertical step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_y: Option<f64>,
    /// Alt 1, Ctrl 2, Meta 4, Shift 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modifiers: Option<u8>,
}

/// A mouse event's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MouseEvent {
    /// A button went down.
    MousePressed,
    /// A button came up.
    MouseReleased,
    /// The pointer moved.
    MouseMoved,
    /// The wheel turned.
    MouseWheel,
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MouseButton {
    /// No button (a move).
    None,
    /// The main button.
    Left,
    /// The wheel's button.
    Middle,
    /// The context button.
    Right,
}

/// A key event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyInput {
    /// What happened.
    pub event_type: KeyEvent,
    /// The key's value (`"a"`, `"Enter"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The physical key (`"KeyA"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The text it types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Windows' key code, which some pages read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows_virtual_key_code: Option<u16>,
    /// Alt 1, Ctrl 2, Meta 4, Shift 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modifiers: Option<u8>,
}

/// A key event's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyEvent {
    /// A key went down (with its text).
    KeyDown,
    /// A key went down (without text).
    RawKeyDown,
    /// A key came up.
    KeyUp,
    /// A character was typed.
    Char,
}

/// A touch event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TouchInput {
    /// What happened.
    pub event_type: TouchEvent,
    /// Where the fingers are.
    pub touch_points: Vec<TouchPoint>,
    /// Alt 1, Ctrl 2, Meta 4, Shift 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modifiers: Option<u8>,
}

/// A touch event's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TouchEvent {
    /// Fingers went down.
    TouchStart,
    /// Fingers moved.
    TouchMove,
    /// Fingers came up.
    TouchEnd,
    /// The touch was cancelled.
    TouchCancel,
}

/// One finger.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TouchPoint {
    /// Where, in the page's CSS pixels.
    pub x: f64,
    /// Where, in the page's CSS pixels.
    pub y: f64,
}

/// What kind of action an event is, for counting what a human did (never what they typed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HumanAction {
    /// A mouse button went down.
    Click,
    /// A key went down.
    Key,
    /// The wheel turned.
    Scroll,
    /// A touch began.
    Touch,
    /// Anything else (moves, releases): not counted.
    Other,
}

/// A viewer's message that is not an input event the guard passes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputRefusal {
    /// Over [`MAX_HUMAN_MESSAGE_BYTES`].
    #[error(
        "the message is {0} bytes; an input event is at most {MAX_HUMAN_MESSAGE_BYTES}: send one event per message"
    )]
    TooLarge(usize),
    /// Not one of the three events, or a field the guard does not know.
    #[error(
        "not an input event ({0}): send {{\"type\": \"input_mouse\" | \"input_keyboard\" | \"input_touch\", …}} with agent-browser's fields only"
    )]
    NotInput(String),
    /// A field out of its range.
    #[error("`{field}` is out of range: {fix}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What it may be.
        fix: &'static str,
    },
}

impl HumanInput {
    /// Parse and bound one viewer message.
    pub fn parse(message: &str) -> Result<Self, InputRefusal> {
        if message.len() > MAX_HUMAN_MESSAGE_BYTES {
            return Err(InputRefusal::TooLarge(message.len()));
        }
        let input: Self = serde_json::from_str(message)
            .map_err(|error| InputRefusal::NotInput(without_strings(&error.to_string())))?;
        input.check()?;
        Ok(input)
    }

    fn check(&self) -> Result<(), InputRefusal> {
        match self {
            Self::InputMouse(mouse) => {
                point(mouse.x, mouse.y)?;
                let wheel = [mouse.delta_x, mouse.delta_y].into_iter().flatten();
                for delta in wheel {
                    if !delta.is_finite() || delta.abs() > MAX_WHEEL_DELTA {
                        return Err(InputRefusal::OutOfRange {
                            field: "deltaX/deltaY",
                            fix: "a scroll step from -10000 to 10000 pixels",
                        });
                    }
                }
                if mouse.click_count.is_some_and(|count| count > 3) {
                    return Err(InputRefusal::OutOfRange {
                        field: "clickCount",
                        fix: "0 to 3",
                    });
                }
                modifiers(mouse.modifiers)
            }
            Self::InputKeyboard(key) => {
                for (field, value, most) in [
                    ("key", &key.key, MAX_KEY_CHARS),
                    ("code", &key.code, MAX_KEY_CHARS),
                    ("text", &key.text, MAX_KEY_TEXT_CHARS),
                ] {
                    if value.as_ref().is_some_and(|v| v.chars().count() > most) {
                        return Err(InputRefusal::OutOfRange {
                            field,
                            fix: "one key's name or text (at most 32 characters for key and code, 8 for text)",
                        });
                    }
                }
                modifiers(key.modifiers)
            }
            Self::InputTouch(touch) => {
                if touch.touch_points.len() > MAX_TOUCH_POINTS {
                    return Err(InputRefusal::OutOfRange {
                        field: "touchPoints",
                        fix: "at most 10 points",
                    });
                }
                for finger in &touch.touch_points {
                    point(finger.x, finger.y)?;
                }
                modifiers(touch.modifiers)
            }
        }
    }

    /// The event as agent-browser's stream takes it: written from the typed event, never the
    /// viewer's text.
    pub fn to_stream_message(&self) -> String {
        // A derived Serialize of plain fields (finite numbers, strings) cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What kind of action it is, for the record.
    pub fn action(&self) -> HumanAction {
        match self {
            Self::InputMouse(mouse) => match mouse.event_type {
                MouseEvent::MousePressed => HumanAction::Click,
                MouseEvent::MouseWheel => HumanAction::Scroll,
                MouseEvent::MouseReleased | MouseEvent::MouseMoved => HumanAction::Other,
            },
            Self::InputKeyboard(key) => match key.event_type {
                KeyEvent::KeyDown | KeyEvent::RawKeyDown => HumanAction::Key,
                KeyEvent::KeyUp | KeyEvent::Char => HumanAction::Other,
            },
            Self::InputTouch(touch) => match touch.event_type {
                TouchEvent::TouchStart => HumanAction::Touch,
                TouchEvent::TouchMove | TouchEvent::TouchEnd | TouchEvent::TouchCancel => {
                    HumanAction::Other
                }
            },
        }
    }
}

/// serde's message names the field or variant at fault, and may quote a value given (what a
/// human typed): every quoted string is left out.
fn without_strings(message: &str) -> String {
    let mut kept = String::with_capacity(message.len());
    let mut inside = false;
    for c in message.chars() {
        if c == '"' {
            if !inside {
                kept.push_str("\"…\"");
            }
            inside = !inside;
        } else if !inside {
            kept.push(c);
        }
    }
    kept
}

fn point(x: f64, y: f64) -> Result<(), InputRefusal> {
    let inside = |value: f64| value.is_finite() && (0.0..=MAX_COORDINATE).contains(&value);
    if inside(x) && inside(y) {
        Ok(())
    } else {
        Err(InputRefusal::OutOfRange {
            field: "x/y",
            fix: "a point on the page, 0 to 10000 pixels",
        })
    }
}

fn modifiers(value: Option<u8>) -> Result<(), InputRefusal> {
    if value.is_some_and(|bits| bits > 15) {
        return Err(InputRefusal::OutOfRange {
            field: "modifiers",
            fix: "a sum of Alt 1, Ctrl 2, Meta 4 and Shift 8 (0 to 15)",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_passes_and_is_written_from_the_typed_event() {
        let click = r#"{"type":"input_mouse","eventType":"mousePressed","x":40,"y":50.5,"button":"left","clickCount":1}"#;
        let input = HumanInput::parse(click).unwrap();
        assert_eq!(input.action(), HumanAction::Click);
        let written: serde_json::Value = serde_json::from_str(&input.to_stream_message()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"type": "input_mouse", "eventType": "mousePressed", "x": 40.0,
                "y": 50.5, "button": "left", "clickCount": 1})
        );
    }

    #[test]
    fn keys_and_touches_pass() {
        let key = r#"{"type":"input_keyboard","eventType":"keyDown","key":"a","code":"KeyA","text":"a","windowsVirtualKeyCode":65}"#;
        assert_eq!(HumanInput::parse(key).unwrap().action(), HumanAction::Key);
        let touch =
            r#"{"type":"input_touch","eventType":"touchStart","touchPoints":[{"x":1,"y":2}]}"#;
        assert_eq!(
            HumanInput::parse(touch).unwrap().action(),
            HumanAction::Touch
        );
        let wheel = r#"{"type":"input_mouse","eventType":"mouseWheel","x":1,"y":2,"deltaY":120}"#;
        assert_eq!(
            HumanInput::parse(wheel).unwrap().action(),
            HumanAction::Scroll
        );
    }

    #[test]
    fn the_streams_other_messages_are_refused() {
        for message in [
            r#"{"type":"config","maxFps":120}"#,
            r#"{"type":"ack","seq":4}"#,
            r#"{"type":"navigate","url":"http://10.0.0.1/"}"#,
            r#"{"action":"fill","selector":"@e1","value":"x"}"#,
            r#"{"type":"input_mouse","eventType":"mousePressed","x":1,"y":1,"url":"http://10.0.0.1/"}"#,
            r#"{"type":"input_keyboard","eventType":"keyDown","commands":["selectAll"]}"#,
            r#"{"type":"input_mouse","eventType":"dragIntercepted","x":1,"y":1}"#,
            "not json",
        ] {
            assert!(
                matches!(HumanInput::parse(message), Err(InputRefusal::NotInput(_))),
                "{message}"
            );
        }
    }

    #[test]
    fn every_number_and_string_is_bounded() {
        for (message, field) in [
            (
                r#"{"type":"input_mouse","eventType":"mouseMoved","x":-1,"y":1}"#,
                "x/y",
            ),
            (
                r#"{"type":"input_mouse","eventType":"mouseMoved","x":1,"y":1e9}"#,
                "x/y",
            ),
            (
                r#"{"type":"input_mouse","eventType":"mouseWheel","x":1,"y":1,"deltaY":1e7}"#,
                "deltaX/deltaY",
            ),
            (
                r#"{"type":"input_mouse","eventType":"mousePressed","x":1,"y":1,"clickCount":200}"#,
                "clickCount",
            ),
            (
                r#"{"type":"input_keyboard","eventType":"keyDown","text":"a long pasted text"}"#,
                "text",
            ),
            (
                r#"{"type":"input_keyboard","eventType":"keyDown","key":"a","modifiers":16}"#,
                "modifiers",
            ),
        ] {
            match HumanInput::parse(message) {
                Err(InputRefusal::OutOfRange { field: named, .. }) => assert_eq!(named, field),
                other => panic!("{message}: {other:?}"),
            }
        }
        let points = [r#"{"x":1,"y":1}"#; 11].join(",");
        let many = format!(
            r#"{{"type":"input_touch","eventType":"touchStart","touchPoints":[{points}]}}"#
        );
        assert!(matches!(
            HumanInput::parse(&many),
            Err(InputRefusal::OutOfRange {
                field: "touchPoints",
                ..
            })
        ));
        let large = format!(
            r#"{{"type":"input_keyboard","eventType":"keyDown","key":"{}"}}"#,
            "a".repeat(2000)
        );
        assert!(matches!(
            HumanInput::parse(&large),
            Err(InputRefusal::TooLarge(_))
        ));
    }

    #[test]
    fn a_refusal_never_repeats_what_was_typed() {
        let typed = r#"{"type":"input_keyboard","eventType":"keyDown","text":"hunter2-secret"}"#;
        let refusal = HumanInput::parse(typed).unwrap_err().to_string();
        assert!(!refusal.contains("hunter2"), "{refusal}");
        let misplaced = r#"{"type":"input_mouse","eventType":"mouseMoved","x":"hunter2","y":1}"#;
        let refusal = HumanInput::parse(misplaced).unwrap_err().to_string();
        assert!(
            refusal.contains("invalid type") && !refusal.contains("hunter2"),
            "{refusal}"
        );
    }
}
