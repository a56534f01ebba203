//! How old the browser image is. `cargo xtask image` labels it with the Chromium it installed and
//! when it was built; the driver reads both back so `doctor` and a server can say when the
//! browser that reads hostile pages has gone without its security releases for too long.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// The label holding the image's Chromium package version (`156.0.8078.114-1~deb12u1`).
pub const LABEL_CHROMIUM: &str = "airlock.chromium";
/// The OCI label holding when the image was built (RFC 3339, UTC).
pub const LABEL_BUILT: &str = "org.opencontainers.image.created";

/// Past this age an image is called stale. Chromium ships a security release every one to two
/// weeks (and Debian's security archive follows within days), so an image two weeks old has
/// almost surely missed one: rebuild at least that often.
pub const STALE_AFTER: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// What the image's labels say of its browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageAge {
    /// The image's tag.
    pub image: String,
    /// The Chromium package it carries, when labelled.
    pub chromium: Option<String>,
    /// When it was built, when labelled.
    pub built: Option<SystemTime>,
}

impl ImageAge {
    /// Read from an image's labels; an unlabelled image (built before the labels existed, or by
    /// hand) has neither.
    pub fn from_labels(image: &str, labels: &HashMap<String, String>) -> Self {
        Self {
            image: image.to_owned(),
            chromium: labels
                .get(LABEL_CHROMIUM)
                .filter(|version| !version.is_empty())
                .cloned(),
            built: labels
                .get(LABEL_BUILT)
                .and_then(|text| humantime::parse_rfc3339(text).ok()),
        }
    }

    /// How old it is at `now` (zero for a build date in the future).
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        self.built
            .map(|built| now.duration_since(built).unwrap_or_default())
    }

    /// When it was built, in seconds since the Unix epoch.
    pub fn built_unix_seconds(&self) -> Option<u64> {
        self.built
            .and_then(|built| built.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|since| since.as_secs())
    }

    /// Whether it is past [`STALE_AFTER`] at `now`, or cannot say when it was built.
    pub fn is_stale(&self, now: SystemTime) -> bool {
        self.age(now).is_none_or(|age| age > STALE_AFTER)
    }

    /// One line for a person: the Chromium, the age, and what to do when it is stale.
    pub fn describe(&self, now: SystemTime) -> String {
        let chromium = self.chromium.as_deref().unwrap_or("an unlabelled Chromium");
        match self.age(now) {
            None => format!(
                "{} carries {chromium} and no build date: rebuild it with `cargo xtask image --force` so it is labelled and patched",
                self.image
            ),
            Some(age) => {
                let days = age.as_secs() / 86_400;
                if self.is_stale(now) {
                    format!(
                        "{} carries Chromium {chromium}, built {days} days ago: older than {} days, so it has likely missed Chromium security releases; rebuild it with `cargo xtask image`",
                        self.image,
                        STALE_AFTER.as_secs() / 86_400
                    )
                } else {
                    format!(
                        "{} carries Chromium {chromium}, built {days} days ago",
                        self.image
                    )
                }
            }
        }
    }
}

// What this host's Debian tooling knows: the newest Chromium its apt offers, and dpkg's own
// ordering of versions (epochs and tildes make string order wrong).

/// The candidate `apt-cache policy chromium` names, when this host has apt and knows the package.
pub fn host_apt_chromium() -> Option<String> {
    let output = Command::new("apt-cache")
        .args(["policy", "chromium"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    candidate(&String::from_utf8_lossy(&output.stdout))
}

/// The `Candidate:` of `apt-cache policy` text; `(none)` is none.
fn candidate(policy: &str) -> Option<String> {
    policy
        .lines()
        .find_map(|line| line.trim().strip_prefix("Candidate:"))
        .map(str::trim)
        .filter(|version| !version.is_empty() && *version != "(none)")
        .map(str::to_owned)
}

/// Whether `older` sorts before `newer` as dpkg orders versions (false when dpkg is missing).
pub fn is_older_version(older: &str, newer: &str) -> bool {
    Command::new("dpkg")
        .args(["--compare-versions", older, "lt", newer])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidate_is_read_from_apt_cache_policy() {
        let policy = "chromium:\n  Installed: (none)\n  Candidate: 156.0.8078.114-1~deb12u1\n  Version table:\n";
        assert_eq!(
            candidate(policy).as_deref(),
            Some("156.0.8078.114-1~deb12u1")
        );
        assert_eq!(candidate("chromium:\n  Candidate: (none)\n"), None);
        assert_eq!(candidate(""), None);
    }

    #[test]
    fn versions_are_ordered_by_dpkg() {
        if Command::new("dpkg").arg("--version").output().is_err() {
            // Only Debian-family hosts have dpkg; CI's does, so this runs there.
            return;
        }
        assert!(is_older_version(
            "150.0.7871.100-1~deb12u1",
            "156.0.8078.114-1~deb12u1"
        ));
        assert!(!is_older_version(
            "156.0.8078.114-1~deb12u1",
            "156.0.8078.114-1~deb12u1"
        ));
        // A tilde sorts before anything, so a backport is older than the release it follows.
        assert!(is_older_version("156.0-1~deb12u1", "156.0-1"));
    }

    fn labelled(built: &str) -> ImageAge {
        let labels = HashMap::from([
            (
                LABEL_CHROMIUM.to_owned(),
                "156.0.8078.114-1~deb12u1".to_owned(),
            ),
            (LABEL_BUILT.to_owned(), built.to_owned()),
        ]);
        ImageAge::from_labels("airlock-browser:0.1.0", &labels)
    }

    fn at(text: &str) -> SystemTime {
        humantime::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn a_fresh_image_is_described_without_advice() {
        let image = labelled("2026-12-01T00:00:00Z");
        let now = at("2026-12-04T12:00:00Z");
        assert!(!image.is_stale(now));
        assert_eq!(image.built_unix_seconds(), Some(1_796_083_200));
        let line = image.describe(now);
        assert!(line.contains("156.0.8078.114"), "{line}");
        assert!(line.contains("3 days ago"), "{line}");
        assert!(!line.contains("cargo xtask image"), "{line}");
    }

    #[test]
    fn an_image_past_the_bound_names_the_rebuild() {
        let image = labelled("2026-11-01T00:00:00Z");
        let now = at("2026-12-04T00:00:00Z");
        assert!(image.is_stale(now));
        let line = image.describe(now);
        assert!(line.contains("33 days ago"), "{line}");
        assert!(line.contains("cargo xtask image"), "{line}");
    }

    #[test]
    fn an_unlabelled_image_is_stale_and_says_why() {
        let image = ImageAge::from_labels("old:1", &HashMap::new());
        assert_eq!(image.chromium, None);
        let now = at("2026-12-04T00:00:00Z");
        assert!(image.is_stale(now));
        assert!(image.describe(now).contains("no build date"));
        let garbled = ImageAge::from_labels(
            "old:1",
            &HashMap::from([(LABEL_BUILT.to_owned(), "last tuesday".to_owned())]),
        );
        assert_eq!(garbled.built, None);
    }
}
