//! The front door, proved as root and as a user: `airlock browse` of a lab page started as root
//! (dropping to `nobody`, the files it keeps handed to root), started through `sudo` (running as,
//! and keeping files for, the person who asked), and started by a user from a directory it does
//! not own. Each must end with the page seen through the seal. Part of `cargo xtask integration`
//! when it runs as root.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::output;

/// One way in: how it was started, and what it must show.
struct Way {
    name: &'static str,
    command: Command,
    /// The uid the kept screenshot must belong to.
    owner: u32,
}

/// Run every way in; print a table; return what went wrong.
pub(crate) fn check(root: &Path, user: &str) -> anyhow::Result<Vec<String>> {
    let airlock = root.join("target/debug/airlock");
    let port = airlock_testkit::site::simple_site("Front door", "Seen through the seal");
    let url = format!("http://127.0.0.1:{port}/");
    let allow = format!("127.0.0.1:{port}");
    let user_uid: u32 = output(Command::new("id").args(["-u", user]))?
        .trim()
        .parse()?;
    let user_group: u32 = output(Command::new("id").args(["-g", user]))?
        .trim()
        .parse()?;
    let browse = |command: &mut Command| {
        command
            .args(["browse", &url, "--allow", &allow])
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID");
    };
    let workdir = tempfile_dir()?;
    let mut as_root = Command::new(&airlock);
    browse(&mut as_root);
    as_root.current_dir(&workdir);
    let mut through_sudo = Command::new(&airlock);
    browse(&mut through_sudo);
    through_sudo
        .current_dir(&workdir)
        .env("SUDO_UID", user_uid.to_string())
        .env("SUDO_GID", user_group.to_string());
    let mut as_user = Command::new("runuser");
    as_user.args(["-u", user, "--"]).arg(&airlock);
    browse(&mut as_user);
    // `/` is root's: a user cannot write there.
    as_user.current_dir("/");
    let ways = [
        Way {
            name: "as root (runs as nobody; files handed to root)",
            command: as_root,
            owner: 0,
        },
        Way {
            name: "through sudo (runs as, and keeps files for, the user)",
            command: through_sudo,
            owner: user_uid,
        },
        Way {
            name: "as a user, from a directory it does not own",
            command: as_user,
            owner: user_uid,
        },
    ];
    let mut problems = Vec::new();
    println!("\n| front door: airlock browse | result |\n|---|---|");
    for mut way in ways {
        let result = match one_way(&mut way) {
            Ok(saved) => {
                let _ = std::fs::remove_file(&saved);
                if let Some(dir) = saved.parent() {
                    let _ = std::fs::remove_dir(dir);
                }
                "ok".to_owned()
            }
            Err(why) => {
                problems.push(format!("front door {}: {why}", way.name));
                why
            }
        };
        println!("| {} | {result} |", way.name);
    }
    let _ = std::fs::remove_dir_all(&workdir);
    Ok(problems)
}

/// Run one way in and check what it printed and kept; the kept screenshot's path.
fn one_way(way: &mut Way) -> Result<PathBuf, String> {
    let ran = way.command.output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    if !ran.status.success() {
        return Err(format!("exited {}: {}", ran.status, stderr.trim()));
    }
    if !stdout.starts_with("Front door") {
        return Err(format!("the page was not seen: {}", stdout.trim()));
    }
    let saved = stderr
        .lines()
        .find_map(|line| line.strip_prefix("saved "))
        .ok_or_else(|| format!("no screenshot kept: {}", stderr.trim()))?;
    let saved = PathBuf::from(saved);
    let file = std::fs::metadata(&saved).map_err(|e| format!("{}: {e}", saved.display()))?;
    let dir = saved
        .parent()
        .and_then(|dir| std::fs::metadata(dir).ok())
        .ok_or("the screenshot's directory is gone")?;
    if file.uid() != way.owner || dir.uid() != way.owner {
        return Err(format!(
            "{} belongs to uid {} (its directory to {}), not to uid {}",
            saved.display(),
            file.uid(),
            dir.uid(),
            way.owner
        ));
    }
    if file.mode() & 0o777 != 0o600 || dir.mode() & 0o777 != 0o700 {
        return Err(format!(
            "{} is {:o} in a {:o} directory, not 600 in 700",
            saved.display(),
            file.mode() & 0o777,
            dir.mode() & 0o777
        ));
    }
    Ok(saved)
}

/// A fresh directory root works in.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("airlock-front-door-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
