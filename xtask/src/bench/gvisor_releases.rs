//! Which gVisors a bench run compares with runc: runsc as `cargo xtask docker` registered it, and
//! when that is not Debian bookworm's own release, the same runsc on its other platform (ptrace or
//! systrap) and bookworm's release (2022-12-19, ptrace only here), unpacked from Debian's archive
//! into `target/bench/runsc-bookworm`. One run then shows what each release and platform give.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

use super::bench_runtimes::{BenchRuntimes, Variant};
use crate::util::{output, run_loud};

/// A runtime the gVisor tables measure, and how its rows name it.
pub(super) struct Runtime {
    pub(super) name: &'static str,
    pub(super) label: String,
}

/// The runtimes, runc first (the baseline), with the bench's registrations kept while this lives.
pub(super) struct Runtimes {
    pub(super) list: Vec<Runtime>,
    /// What could not be added, said under the tables.
    pub(super) missing: Option<String>,
    _registered: Option<BenchRuntimes>,
}

const OTHER_PLATFORM: &str = "airlock-bench-runsc-platform";
const BOOKWORM: &str = "airlock-bench-runsc-bookworm";

pub(super) fn runtimes(root: &Path) -> Runtimes {
    let (program, args) = registered();
    let release = release_date(Path::new(&program));
    let platform = args
        .iter()
        .find_map(|arg| arg.strip_prefix("--platform="))
        .map_or_else(|| default_platform(Path::new(&program)), str::to_owned);
    let mut list = vec![
        Runtime {
            name: "runc",
            label: "runc".to_owned(),
        },
        Runtime {
            name: "runsc",
            label: format!("runsc {release}, {platform} (as registered)"),
        },
    ];
    if release == "2022-12-19" {
        return Runtimes {
            list,
            missing: None,
            _registered: None,
        };
    }
    let bookworm = match bookworm_release(root) {
        Ok(program) => program,
        Err(error) => {
            return Runtimes {
                list,
                missing: Some(format!("bookworm's runsc: {error:#}")),
                _registered: None,
            };
        }
    };
    let other = if platform == "ptrace" {
        "systrap"
    } else {
        "ptrace"
    };
    let variants = [
        Variant::with_args(OTHER_PLATFORM, vec![format!("--platform={other}")]),
        Variant {
            name: BOOKWORM,
            program: Some(&bookworm),
            // Its only platform here, whatever the registration names.
            extra: vec!["--platform=ptrace".to_owned()],
        },
    ];
    match BenchRuntimes::register(&variants) {
        Ok(kept) => {
            list.push(Runtime {
                name: OTHER_PLATFORM,
                label: format!("runsc {release}, {other}"),
            });
            list.push(Runtime {
                name: BOOKWORM,
                label: format!(
                    "runsc {}, ptrace (Debian bookworm's)",
                    release_date(&bookworm)
                ),
            });
            Runtimes {
                list,
                missing: None,
                _registered: Some(kept),
            }
        }
        Err(error) => Runtimes {
            list,
            missing: Some(format!("the other release and platform: {error:#}")),
            _registered: None,
        },
    }
}

/// The program dockerd runs as `runsc`, and its arguments.
fn registered() -> (String, Vec<String>) {
    let config = std::fs::read_to_string(crate::docker::DAEMON_JSON)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .unwrap_or_default();
    let runsc = &config["runtimes"]["runsc"];
    let program = runsc["path"].as_str().unwrap_or("runsc").to_owned();
    let args = runsc["runtimeArgs"]
        .as_array()
        .map(|args| {
            args.iter()
                .filter_map(|arg| arg.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (program, args)
}

/// A runsc's release date (`2024-07-29`), from its version.
fn release_date(program: &Path) -> String {
    let version = output(Command::new(program).arg("--version")).unwrap_or_default();
    release_date_in(&version).unwrap_or_else(|| "of an unknown release".to_owned())
}

/// Debian's runsc versions read `runsc version 0.0~20240729.0`, gVisor's own
/// `runsc version release-20240729.0`.
fn release_date_in(version: &str) -> Option<String> {
    version
        .split(['~', '.', '-', ' ', '\n'])
        .find(|part| part.len() == 8 && part.bytes().all(|b| b.is_ascii_digit()))
        .map(|d| format!("{}-{}-{}", &d[..4], &d[4..6], &d[6..]))
}

/// The platform a runsc runs on when none is named, from `runsc flags`.
fn default_platform(program: &Path) -> String {
    // `runsc flags` writes its list to standard error.
    let flags = Command::new(program)
        .arg("flags")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stderr).into_owned())
        .unwrap_or_default();
    default_platform_in(&flags).map_or_else(|| "its default platform".to_owned(), str::to_owned)
}

/// `runsc flags` describes each flag on the line after its name, ending `(default "ptrace")`.
fn default_platform_in(flags: &str) -> Option<&str> {
    flags
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("-platform "))
        .nth(1)
        .and_then(|line| line.rsplit_once("(default \""))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(name, _)| name)
}

/// Debian bookworm's runsc, unpacked (not installed) into `target/bench/runsc-bookworm`.
fn bookworm_release(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join("target/bench/runsc-bookworm");
    let program = dir.join("usr/bin/runsc");
    if program.exists() {
        return Ok(program);
    }
    std::fs::create_dir_all(&dir)?;
    run_loud(
        Command::new("apt-get")
            .args(["download", "runsc/bookworm"])
            .current_dir(&dir),
    )
    .context("fetching bookworm's runsc from Debian's archive")?;
    let package = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .context("apt-get download gave no .deb")?;
    run_loud(Command::new("dpkg-deb").arg("-x").arg(&package).arg(&dir))?;
    anyhow::ensure!(
        program.exists(),
        "bookworm's runsc package has no usr/bin/runsc"
    );
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::{default_platform_in, release_date_in};

    #[test]
    fn a_release_is_known_by_the_date_in_its_version() {
        assert_eq!(
            release_date_in("runsc version 0.0~20240729.0\nspec: 1.0.2-dev\n").as_deref(),
            Some("2024-07-29")
        );
        assert_eq!(
            release_date_in("runsc version 0.0~20221219.0").as_deref(),
            Some("2022-12-19")
        );
        assert_eq!(
            release_date_in("runsc version release-20240729.0").as_deref(),
            Some("2024-07-29")
        );
        assert_eq!(release_date_in("runsc version 0.0~dev"), None);
    }

    #[test]
    fn the_default_platform_is_read_from_the_line_after_its_flag() {
        let flags = "  -overlay2 string\n    \tspecifies … (default \"root:self\")\n  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"systrap\")\n  -profile\n";
        assert_eq!(default_platform_in(flags), Some("systrap"));
        assert_eq!(
            default_platform_in("  -debug\n    \tenable debug logging.\n"),
            None
        );
    }
}
