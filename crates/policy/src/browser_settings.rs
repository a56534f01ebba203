//! How a task's browser is set: its viewport (or a mobile device), locale, time zone,
//! geolocation and colour scheme, as the caller chose them within the operator's ceiling.
//!
//! The driver applies them before the worker's first command; the worker may not change a
//! setting the caller fixed ([`BrowserSettings::refusal`]). Locale and time zone are the
//! browser's own at launch (the `Accept-Language` it sends and `navigator.language`, and the
//! zone every page reads), so a task that sets either starts a browser of its own; the others
//! are agent-browser's `set` commands, which also hold for tabs the page opens later.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The smallest viewport side: below it pages lay out for nothing real.
pub const MIN_VIEWPORT_SIDE: u32 = 240;
/// The largest viewport an operator may allow (4K): every pixel is the container's memory.
pub const MAX_VIEWPORT: (u32, u32) = (3840, 2160);
/// The viewport ceiling unless the operator sets one (`--max-viewport`): a desktop's full HD.
pub const DEFAULT_MAX_VIEWPORT: (u32, u32) = (1920, 1080);
/// The largest device scale factor (screenshots grow with its square).
pub const MAX_SCALE: f64 = 3.0;
/// The mobile devices agent-browser emulates (viewport, scale and user agent; the driver adds
/// touch).
pub const DEVICES: &[&str] = &[
    "iPhone 12",
    "iPhone 14",
    "iPhone 15",
    "iPhone 16",
    "iPhone 16 Pro",
    "iPhone 17",
    "Pixel 5",
    "Pixel 7",
    "Pixel 9",
    "Galaxy S21",
    "Galaxy S25",
];

/// The page's size in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    /// Width in CSS pixels.
    pub width: u32,
    /// Height in CSS pixels.
    pub height: u32,
    /// Device pixels per CSS pixel (1 to 3; 2 for a retina screen). Omitted: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
}

/// Where the page is told it is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Geolocation {
    /// Degrees north (-90 to 90).
    pub latitude: f64,
    /// Degrees east (-180 to 180).
    pub longitude: f64,
}

/// The colour scheme pages see (`prefers-color-scheme`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ColorScheme {
    /// Light.
    Light,
    /// Dark.
    Dark,
}

impl ColorScheme {
    fn word(self) -> &'static str {
        match self {
            Self::Light => "light",
            Self::Dark => "dark",
        }
    }
}

/// A task's browser settings; each omitted one is the browser's default (a 1280×720 desktop
/// viewport, `en-US`, UTC, no geolocation, light).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserSettings {
    /// The viewport (not with `device`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<Viewport>,
    /// A mobile device to emulate, by name (`iPhone 15`, `Pixel 7`, …; not with `viewport`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// A BCP 47 language tag (`fr-FR`): the `Accept-Language` the browser sends and
    /// `navigator.language`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// An IANA time zone (`Europe/Paris`) every page reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// The position the page's geolocation requests receive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geolocation: Option<Geolocation>,
    /// The colour scheme pages see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color_scheme: Option<ColorScheme>,
}

/// Why a task's browser settings were refused; each names the field and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BrowserSettingsError {
    /// A viewport side out of range.
    #[error(
        "browser.viewport {width}x{height} is out of range: give each side from {MIN_VIEWPORT_SIDE} up to {max_width}x{max_height}, this server's ceiling"
    )]
    Viewport {
        /// Asked width.
        width: u32,
        /// Asked height.
        height: u32,
        /// The ceiling's width.
        max_width: u32,
        /// The ceiling's height.
        max_height: u32,
    },
    /// A scale that is not a number from 1 to 3.
    #[error(
        "browser.viewport.scale {0} is out of range: give a number from 1 to 3, or leave it out"
    )]
    Scale(f64),
    /// Both a viewport and a device.
    #[error("browser: give a viewport or a device, not both: a device sets its own viewport")]
    ViewportAndDevice,
    /// A device agent-browser does not emulate.
    #[error("browser.device `{0}` is not a device Airlock emulates: use one of {list}", list = DEVICES.join(", "))]
    Device(String),
    /// Not a BCP 47 tag.
    #[error("browser.locale `{0}` is not a language tag: give one like `fr-FR`, `de` or `pt-BR`")]
    Locale(String),
    /// Not an IANA zone.
    #[error(
        "browser.time_zone `{0}` is not an IANA time zone: give one like `Europe/Paris` or `America/New_York`"
    )]
    TimeZone(String),
    /// Coordinates out of range.
    #[error(
        "browser.geolocation {latitude},{longitude} is out of range: latitude from -90 to 90, longitude from -180 to 180"
    )]
    Geolocation {
        /// Asked latitude.
        latitude: f64,
        /// Asked longitude.
        longitude: f64,
    },
}

impl BrowserSettings {
    /// Whether nothing is set.
    #[must_use]
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }

    /// The settings, checked against the ceiling `max_viewport` (width, height), with the device
    /// named as agent-browser spells it.
    ///
    /// # Errors
    /// The first setting out of range or not understood, naming it and the fix.
    pub fn check(mut self, max_viewport: (u32, u32)) -> Result<Self, BrowserSettingsError> {
        if let Some(viewport) = self.viewport {
            if self.device.is_some() {
                return Err(BrowserSettingsError::ViewportAndDevice);
            }
            let (max_width, max_height) = max_viewport;
            if !(MIN_VIEWPORT_SIDE..=max_width).contains(&viewport.width)
                || !(MIN_VIEWPORT_SIDE..=max_height).contains(&viewport.height)
            {
                return Err(BrowserSettingsError::Viewport {
                    width: viewport.width,
                    height: viewport.height,
                    max_width,
                    max_height,
                });
            }
            if let Some(scale) = viewport.scale
                && !(1.0..=MAX_SCALE).contains(&scale)
            {
                return Err(BrowserSettingsError::Scale(scale));
            }
        }
        if let Some(asked) = &self.device {
            let known = DEVICES
                .iter()
                .find(|name| name.eq_ignore_ascii_case(asked.trim()))
                .ok_or_else(|| BrowserSettingsError::Device(shown(asked)))?;
            self.device = Some((*known).to_owned());
        }
        if let Some(locale) = &self.locale {
            let tag = oxilangtag::LanguageTag::parse(locale.as_str())
                .ok()
                .filter(|tag| tag.as_str().len() <= 35 && tag.private_use().is_none())
                .ok_or_else(|| BrowserSettingsError::Locale(shown(locale)))?;
            self.locale = Some(tag.as_str().to_owned());
        }
        if let Some(zone) = &self.time_zone {
            let zone = chrono_tz::Tz::from_str(zone)
                .map_err(|_| BrowserSettingsError::TimeZone(shown(zone)))?;
            self.time_zone = Some(zone.name().to_owned());
        }
        if let Some(Geolocation {
            latitude,
            longitude,
        }) = self.geolocation
            && !((-90.0..=90.0).contains(&latitude) && (-180.0..=180.0).contains(&longitude))
        {
            return Err(BrowserSettingsError::Geolocation {
                latitude,
                longitude,
            });
        }
        Ok(self)
    }

    /// Whether the settings need a browser launched for them (locale or time zone), rather than
    /// a warm one that launched with the defaults.
    #[must_use]
    pub fn needs_launch(&self) -> bool {
        self.locale.is_some() || self.time_zone.is_some()
    }

    /// The environment a browser launched for these settings starts with: the image's Chromium
    /// wrapper passes `AIRLOCK_ACCEPT_LANG` as `--accept-lang`; Chromium reads its zone from `TZ`.
    /// Values are checked by [`Self::check`]: language tags and zone names only.
    #[must_use]
    pub fn launch_env(&self) -> Vec<String> {
        let mut env = Vec::new();
        if let Some(locale) = &self.locale {
            // The base language after the tag, as browsers send it (`fr-FR,fr`).
            let base = locale.split('-').next().unwrap_or(locale);
            let languages = if base == locale {
                locale.clone()
            } else {
                format!("{locale},{base}")
            };
            env.push(format!("AIRLOCK_ACCEPT_LANG={languages}"));
        }
        if let Some(zone) = &self.time_zone {
            env.push(format!("TZ={zone}"));
        }
        env
    }

    /// The agent-browser commands that apply the rest, in order.
    #[must_use]
    pub fn set_commands(&self) -> Vec<Vec<String>> {
        let mut commands = Vec::new();
        let set = |words: &[&str]| -> Vec<String> {
            ["agent-browser", "set"]
                .iter()
                .chain(words)
                .map(|w| (*w).to_owned())
                .collect()
        };
        if let Some(viewport) = self.viewport {
            let mut command = set(&[
                "viewport",
                &viewport.width.to_string(),
                &viewport.height.to_string(),
            ]);
            if let Some(scale) = viewport.scale {
                command.push(scale.to_string());
            }
            commands.push(command);
        }
        if let Some(device) = &self.device {
            commands.push(set(&["device", device]));
        }
        if let Some(place) = self.geolocation {
            commands.push(set(&[
                "geo",
                &place.latitude.to_string(),
                &place.longitude.to_string(),
            ]));
        }
        if let Some(scheme) = self.color_scheme {
            commands.push(set(&["media", scheme.word()]));
        }
        commands
    }

    /// Why the worker may not run `args` (agent-browser's words): it would change a setting
    /// the caller fixed. `None`: it may.
    #[must_use]
    pub fn refusal(&self, args: &[String]) -> Option<String> {
        // Read as the command policy reads them: a value flag's value is not the command.
        let words = crate::command::operands(args).ok()?;
        if words.first() != Some(&"set") {
            return None;
        }
        let fixed = match *words.get(1)? {
            "viewport" | "device" if self.viewport.is_some() || self.device.is_some() => {
                "the viewport"
            }
            "geo" | "geolocation" if self.geolocation.is_some() => "the geolocation",
            "media" if self.color_scheme.is_some() => "the colour scheme",
            _ => return None,
        };
        Some(format!(
            "{fixed} is fixed for this task by the caller; work with the page as it is"
        ))
    }
}

/// A refused value in an error: cut short, so a long one does not fill the message.
fn shown(value: &str) -> String {
    value.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CEILING: (u32, u32) = (1920, 1080);

    fn settings(json: serde_json::Value) -> Result<BrowserSettings, BrowserSettingsError> {
        serde_json::from_value::<BrowserSettings>(json)
            .unwrap()
            .check(CEILING)
    }

    #[test]
    fn good_settings_are_kept_in_their_usual_spelling() {
        let checked = settings(serde_json::json!({
            "device": "iphone 15",
            "locale": "fr-FR",
            "time_zone": "Europe/Paris",
            "geolocation": {"latitude": 48.8566, "longitude": 2.3522},
            "color_scheme": "dark"
        }))
        .unwrap();
        assert_eq!(checked.device.as_deref(), Some("iPhone 15"));
        assert!(checked.needs_launch());
        assert_eq!(
            checked.launch_env(),
            ["AIRLOCK_ACCEPT_LANG=fr-FR,fr", "TZ=Europe/Paris"]
        );
        let commands: Vec<String> = checked.set_commands().iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            commands,
            [
                "agent-browser set device iPhone 15",
                "agent-browser set geo 48.8566 2.3522",
                "agent-browser set media dark"
            ]
        );
        let viewport =
            settings(serde_json::json!({"viewport": {"width": 800, "height": 600, "scale": 2.0}}))
                .unwrap();
        assert!(!viewport.needs_launch());
        assert_eq!(
            viewport.set_commands()[0].join(" "),
            "agent-browser set viewport 800 600 2"
        );
        assert!(BrowserSettings::default().is_default());
        assert!(BrowserSettings::default().set_commands().is_empty());
    }

    #[test]
    fn each_bad_setting_is_refused_naming_its_field() {
        for (json, says) in [
            (
                serde_json::json!({"viewport": {"width": 4000, "height": 600}}),
                "browser.viewport 4000x600",
            ),
            (
                serde_json::json!({"viewport": {"width": 100, "height": 600}}),
                "from 240 up to 1920x1080",
            ),
            (
                serde_json::json!({"viewport": {"width": 800, "height": 600, "scale": 9.0}}),
                "browser.viewport.scale",
            ),
            (
                serde_json::json!({"viewport": {"width": 800, "height": 600}, "device": "Pixel 7"}),
                "not both",
            ),
            (
                serde_json::json!({"device": "Nokia 3310"}),
                "browser.device `Nokia 3310`",
            ),
            (serde_json::json!({"locale": "fr_FR!"}), "browser.locale"),
            (serde_json::json!({"locale": "x-private"}), "browser.locale"),
            (
                serde_json::json!({"time_zone": "Mars/Olympus"}),
                "browser.time_zone `Mars/Olympus`",
            ),
            (
                serde_json::json!({"time_zone": "../../etc/passwd"}),
                "browser.time_zone",
            ),
            (
                serde_json::json!({"geolocation": {"latitude": 91.0, "longitude": 0.0}}),
                "browser.geolocation",
            ),
        ] {
            let error = settings(json).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
        assert!(serde_json::from_value::<BrowserSettings>(serde_json::json!({"zoom": 2})).is_err());
        assert!(
            serde_json::from_value::<BrowserSettings>(serde_json::json!({"color_scheme": "blue"}))
                .is_err()
        );
    }

    #[test]
    fn the_worker_cannot_change_what_the_caller_fixed() {
        let args =
            |words: &[&str]| -> Vec<String> { words.iter().map(|w| (*w).to_owned()).collect() };
        let fixed = settings(serde_json::json!({
            "device": "Pixel 7",
            "geolocation": {"latitude": 1.0, "longitude": 2.0},
            "color_scheme": "dark"
        }))
        .unwrap();
        for words in [
            &["set", "viewport", "100", "100"][..],
            &["set", "device", "iPhone 15"],
            &["--json", "set", "geo", "0", "0"],
            &["--timeout", "5", "set", "media", "light"],
            &["set", "geolocation", "0", "0"],
            &["set", "media", "light"],
        ] {
            let why = fixed.refusal(&args(words)).unwrap();
            assert!(why.contains("fixed for this task"), "{why}");
        }
        assert_eq!(fixed.refusal(&args(&["open", "https://a.example"])), None);
        // What the caller left alone, the worker may set.
        let free = BrowserSettings::default();
        assert_eq!(
            free.refusal(&args(&["set", "viewport", "800", "600"])),
            None
        );
    }
}
