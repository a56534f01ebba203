//! `airlock task`'s flags that set its browser: what `browser` is on `browser_task` and
//! `/v1/tasks`, held to the same ceiling.

use airlock_policy::{BrowserSettings, ColorScheme, Geolocation, Viewport};
use clap::Args;

/// How the task's browser is set; the worker cannot change what these fix.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct BrowserFlags {
    /// The viewport, as WIDTHxHEIGHT or WIDTHxHEIGHT@SCALE (`1280x800@2`), within
    /// --max-viewport. Not with --device.
    #[arg(long, value_name = "WxH[@SCALE]", conflicts_with = "device")]
    viewport: Option<String>,
    /// A mobile device to emulate (`iPhone 15`, `Pixel 7`, …): its viewport, scale, user
    /// agent and touch.
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// The browser's language, a BCP 47 tag (`fr-FR`): its Accept-Language and
    /// navigator.language.
    #[arg(long, value_name = "TAG")]
    locale: Option<String>,
    /// The time zone pages see, an IANA name (`Europe/Paris`).
    #[arg(long, value_name = "ZONE")]
    time_zone: Option<String>,
    /// Where pages that ask are told the browser is, as LATITUDE,LONGITUDE (`48.8566,2.3522`).
    #[arg(long, value_name = "LAT,LON", allow_hyphen_values = true)]
    geolocation: Option<String>,
    /// The colour scheme pages see.
    #[arg(long, value_name = "SCHEME", value_parser = ["light", "dark"])]
    color_scheme: Option<String>,
}

impl BrowserFlags {
    /// The settings the flags give, checked against `max_viewport`.
    pub(crate) fn settings(&self, max_viewport: (u32, u32)) -> anyhow::Result<BrowserSettings> {
        let viewport = self.viewport.as_deref().map(viewport).transpose()?;
        let geolocation = self.geolocation.as_deref().map(place).transpose()?;
        let color_scheme = self.color_scheme.as_deref().map(|scheme| match scheme {
            "dark" => ColorScheme::Dark,
            _ => ColorScheme::Light,
        });
        BrowserSettings {
            viewport,
            device: self.device.clone(),
            locale: self.locale.clone(),
            time_zone: self.time_zone.clone(),
            geolocation,
            color_scheme,
        }
        .check(max_viewport)
        .map_err(|e| {
            // Named as the flag that gave it.
            let said = e
                .to_string()
                .replacen("browser.time_zone", "--time-zone", 1);
            anyhow::anyhow!("{}", said.replacen("browser.", "--", 1))
        })
    }
}

fn viewport(given: &str) -> anyhow::Result<Viewport> {
    let bad = || {
        anyhow::anyhow!(
            "--viewport `{given}` is not WIDTHxHEIGHT or WIDTHxHEIGHT@SCALE: write it like 1280x800 or 390x844@3"
        )
    };
    let (size, scale) = match given.split_once('@') {
        Some((size, scale)) => (size, Some(scale.parse::<f64>().map_err(|_| bad())?)),
        None => (given, None),
    };
    let (width, height) = size.split_once('x').ok_or_else(bad)?;
    Ok(Viewport {
        width: width.parse().map_err(|_| bad())?,
        height: height.parse().map_err(|_| bad())?,
        scale,
    })
}

fn place(given: &str) -> anyhow::Result<Geolocation> {
    let bad = || {
        anyhow::anyhow!(
            "--geolocation `{given}` is not LATITUDE,LONGITUDE: write it like 48.8566,2.3522"
        )
    };
    let (latitude, longitude) = given.split_once(',').ok_or_else(bad)?;
    Ok(Geolocation {
        latitude: latitude.trim().parse().map_err(|_| bad())?,
        longitude: longitude.trim().parse().map_err(|_| bad())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_make_checked_settings_and_name_themselves_when_wrong() {
        let flags = BrowserFlags {
            viewport: Some("800x600@2".into()),
            locale: Some("de-CH".into()),
            time_zone: Some("Asia/Tokyo".into()),
            geolocation: Some("-33.86,151.2".into()),
            color_scheme: Some("dark".into()),
            ..BrowserFlags::default()
        };
        let settings = flags.settings((1920, 1080)).unwrap();
        assert_eq!(
            settings.viewport,
            Some(Viewport {
                width: 800,
                height: 600,
                scale: Some(2.0)
            })
        );
        assert_eq!(
            settings.geolocation,
            Some(Geolocation {
                latitude: -33.86,
                longitude: 151.2
            })
        );
        for (flags, says) in [
            (
                BrowserFlags {
                    viewport: Some("800by600".into()),
                    ..BrowserFlags::default()
                },
                "--viewport `800by600`",
            ),
            (
                BrowserFlags {
                    viewport: Some("4000x600".into()),
                    ..BrowserFlags::default()
                },
                "--viewport 4000x600 is out of range",
            ),
            (
                BrowserFlags {
                    geolocation: Some("north".into()),
                    ..BrowserFlags::default()
                },
                "--geolocation `north`",
            ),
            (
                BrowserFlags {
                    time_zone: Some("Nowhere".into()),
                    ..BrowserFlags::default()
                },
                "--time-zone `Nowhere`",
            ),
        ] {
            let error = flags.settings((1920, 1080)).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
    }
}
