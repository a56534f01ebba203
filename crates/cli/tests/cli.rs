//! The `airlock` binary's help, argument errors and settings precedence.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

fn airlock() -> Command {
    let mut command = Command::cargo_bin("airlock").unwrap();
    // Started as root (as `cargo test` in CI is), Airlock runs itself again unprivileged; these
    // tests are about the command's own checks, so they skip that (`cargo xtask integration`
    // proves the drop as root).
    command.env("AIRLOCK_PRIVSEP_CHILD", "1");
    // Keep the user's own environment out of these tests.
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("AIRLOCK_")) {
        command.env_remove(key);
    }
    command
}

#[test]
fn every_command_has_help() {
    for command in [
        &["--help"][..],
        &["task", "--help"],
        &["browse", "--help"],
        &["doctor", "--help"],
        &["cleanup", "--help"],
        &["image", "build-command", "--help"],
        &["proxy", "--help"],
        &["egress", "check", "--help"],
    ] {
        let output = airlock().args(command).output().unwrap();
        assert!(output.status.success(), "{command:?}");
        assert!(!output.stdout.is_empty());
    }
    let help = String::from_utf8(airlock().arg("--help").output().unwrap().stdout).unwrap();
    for name in [
        "task", "browse", "doctor", "cleanup", "image", "egress", "proxy",
    ] {
        assert!(help.contains(name), "{name} missing from --help");
    }
}

#[test]
fn image_build_command_names_xtask_and_docker_build() {
    let out = String::from_utf8(
        airlock()
            .args(["image", "build-command"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(out.contains("cargo xtask image"), "{out}");
    assert!(
        out.contains(&format!(
            "--tag airlock-browser:{}",
            env!("CARGO_PKG_VERSION")
        )),
        "{out}"
    );
}

/// `airlock doctor`'s settings table as (name, value, source) rows.
fn settings_table(command: &mut Command) -> Vec<(String, String, String)> {
    let output = command.output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    stdout
        .lines()
        .skip_while(|line| !line.starts_with("settings"))
        .skip(1)
        .map(|line| {
            let (rest, source) = line.trim().rsplit_once(" [").unwrap();
            let (name, value) = rest.split_once(' ').unwrap();
            (
                name.to_owned(),
                value.trim().to_owned(),
                source.trim_end_matches(']').to_owned(),
            )
        })
        .collect()
}

fn row<'a>(table: &'a [(String, String, String)], name: &str) -> (&'a str, &'a str) {
    let (_, value, source) = table.iter().find(|(n, _, _)| n == name).unwrap();
    (value, source)
}

#[test]
fn settings_come_from_flags_then_env_then_file_then_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("airlock.toml");
    std::fs::write(
        &config,
        "max_steps = 7\ntimeout = 120\nmax_screenshots = 3\nallow = [\"127.0.0.1:8080\"]\n",
    )
    .unwrap();
    let table = settings_table(
        airlock()
            .env("AIRLOCK_CONFIG", &config)
            .env("AIRLOCK_TIMEOUT", "90")
            .env("AIRLOCK_MAX_SCREENSHOTS", "2")
            .args(["doctor", "--max-screenshots", "1"]),
    );
    assert!(!table.is_empty(), "doctor printed no settings");
    assert_eq!(row(&table, "max_screenshots"), ("1", "flag"));
    assert_eq!(row(&table, "timeout"), ("90 s", "env AIRLOCK_TIMEOUT"));
    assert_eq!(row(&table, "max_steps").0, "7");
    assert!(row(&table, "max_steps").1.starts_with("file "));
    assert_eq!(row(&table, "allow").0, "127.0.0.1:8080");
    assert_eq!(row(&table, "max_output_chars"), ("10000", "default"));
    assert_eq!(row(&table, "browser_sandbox"), ("on", "default"));
    assert_eq!(row(&table, "pool_max"), ("the pool size", "default"));
    assert_eq!(row(&table, "guide"), ("compact", "default"));
    assert_eq!(row(&table, "max_answer_tokens"), ("4096", "default"));
    assert_eq!(row(&table, "model_timeout"), ("120 s", "default"));
    assert_eq!(row(&table, "command_timeout"), ("60 s", "default"));
    assert_eq!(row(&table, "direct_idle_timeout"), ("300 s", "default"));
    assert_eq!(row(&table, "direct_lifetime"), ("14400 s", "default"));
    assert_eq!(row(&table, "direct_max_steps"), ("0 (no limit)", "default"));
    let guide = settings_table(airlock().args(["doctor", "--guide", "agent-browser"]));
    assert_eq!(row(&guide, "guide"), ("agent-browser", "flag"));
    let adaptive = settings_table(airlock().args(["doctor", "--pool-min", "1", "--pool-max", "4"]));
    assert_eq!(row(&adaptive, "pool_size"), ("1", "flag"));
    assert_eq!(row(&adaptive, "pool_max"), ("4", "flag"));

    // Chromium's sandbox goes off only when asked, from any of the three places.
    let off = |command: &mut Command| {
        let table = settings_table(command);
        row(&table, "browser_sandbox").0 == "off" && row(&table, "browser_sandbox").1 != "default"
    };
    assert!(off(airlock().args(["doctor", "--no-browser-sandbox"])));
    assert!(off(airlock()
        .env("AIRLOCK_NO_BROWSER_SANDBOX", "true")
        .arg("doctor")));
    std::fs::write(&config, "browser_sandbox = false\n").unwrap();
    assert!(off(airlock().env("AIRLOCK_CONFIG", &config).arg("doctor")));
}

#[test]
fn bad_values_name_the_setting_and_the_fix() {
    for (args, env, needle) in [
        (
            vec!["task", "x", "--max-steps", "0"],
            None,
            "`max_steps` is 0: use a value from 1 to 500",
        ),
        (vec!["task", "x", "--timeout", "1"], None, "--timeout"),
        (vec!["task", "x", "--allow", "nope"], None, "--allow"),
        (vec!["task", "x", "--profile", "lan"], None, "--profile"),
        (
            vec!["task", "x"],
            Some(("AIRLOCK_MAX_STEPS", "many")),
            "--max-steps",
        ),
        (
            vec!["task", "x", "--model", "gpt-4o"],
            None,
            "anthropic/<model>",
        ),
        (
            vec!["task", "x", "--base-url", "ftp://x"],
            None,
            "--base-url",
        ),
        (
            vec!["task", "x", "--model", "script:/nonexistent/script.json"],
            None,
            "/nonexistent/script.json",
        ),
        (
            vec![
                "task",
                "x",
                "--model",
                "script:/dev/null",
                "--out",
                "/dev/null",
            ],
            None,
            "--out",
        ),
        (
            vec!["task", "x", "--pool-min", "3", "--pool-max", "2"],
            None,
            "--pool-max 2 must be from the pool size (3) to 8",
        ),
        (vec!["task", "x", "--pool-max", "9"], None, "--pool-max 9"),
        (
            vec!["task", "x", "--max-answer-tokens", "10"],
            None,
            "--max-answer-tokens 10 is out of range: use a value from 64 to 65536",
        ),
        (
            vec!["task", "x"],
            Some(("AIRLOCK_MODEL_TIMEOUT", "5")),
            "--model-timeout 5 is out of range",
        ),
        (
            vec!["task", "x", "--command-timeout", "1"],
            None,
            "--command-timeout 1 is out of range: use a value from 5 to 600 seconds",
        ),
        (
            vec!["task", "x"],
            Some(("AIRLOCK_COMMAND_TIMEOUT", "601")),
            "--command-timeout 601 is out of range",
        ),
        (
            vec!["mcp", "--direct", "--direct-idle-timeout", "5"],
            None,
            "--direct-idle-timeout 5 is out of range: use a value from 10 to 86400 seconds",
        ),
        (
            vec!["mcp", "--direct"],
            Some(("AIRLOCK_DIRECT_LIFETIME", "90000")),
            "--direct-lifetime 90000 is out of range",
        ),
        (
            vec!["task", "x", "--guide", "full"],
            None,
            "--guide: guide `full` is not one Airlock has: use compact",
        ),
    ] {
        let mut command = airlock();
        command
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .args(&args);
        if let Some((key, value)) = env {
            command.env(key, value);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn a_config_file_with_an_unknown_key_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("airlock.toml");
    std::fs::write(&config, "max_stepz = 7\n").unwrap();
    let output = airlock()
        .env("AIRLOCK_CONFIG", &config)
        .args(["task", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("airlock.toml") && stderr.contains("max_stepz"),
        "{stderr}"
    );
}

#[test]
fn a_failure_that_is_not_bad_input_exits_1_not_2() {
    // A remote daemon is refused before any connection is made, so this needs no Docker.
    let out = tempfile::tempdir().unwrap();
    let out = out.path().to_str().unwrap();
    for args in [
        &["cleanup"][..],
        &["browse", "http://lab.test/", "--out", out],
    ] {
        let output = airlock()
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .env("DOCKER_HOST", "tcp://127.0.0.1:2375")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("DOCKER_HOST is tcp://127.0.0.1:2375")
                && stderr.contains("unix:///var/run/docker.sock"),
            "{args:?}: the refusal names the fix: {stderr}"
        );
    }
}

#[test]
fn an_out_directory_others_could_tamper_with_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    // A directory somebody else owns: made and given away as root, or a system one otherwise.
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let foreign = if root {
        let given = dir.path().join("given");
        std::fs::create_dir(&given).unwrap();
        std::os::unix::fs::chown(&given, Some(65534), Some(65534)).unwrap();
        given
    } else {
        std::path::PathBuf::from("/usr")
    };
    for (out, needle) in [
        (&open, "chmod go-w"),
        (&link, "is a symlink"),
        (&foreign, "not to you"),
    ] {
        let output = airlock()
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .args(["browse", "http://lab.test/", "--out"])
            .arg(out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{}: {stderr}", out.display());
        assert!(stderr.contains(needle), "{}: {stderr}", out.display());
    }
}

#[test]
fn a_model_key_can_come_from_a_secrets_file_and_never_shows() {
    let dir = tempfile::tempdir().unwrap();
    let key = "sk-ant-api03-from-a-secret-0123456789";
    let secret = dir.path().join("anthropic_api_key");
    std::fs::write(&secret, format!("{key}\n")).unwrap();
    let doctor = |file: &std::path::Path| {
        let output = airlock()
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .env_remove("ANTHROPIC_API_KEY")
            .env("ANTHROPIC_API_KEY_FILE", file)
            .args(["doctor", "--model", "anthropic/claude-sonnet-4-5"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(!stdout.contains(key), "{stdout}");
        stdout
            .lines()
            .find(|line| line.contains(" model: "))
            .unwrap_or_default()
            .to_owned()
    };
    let line = doctor(&secret);
    assert!(line.starts_with("ok"), "{line}");
    let line = doctor(&dir.path().join("missing"));
    assert!(
        line.starts_with("FAIL") && line.contains("ANTHROPIC_API_KEY_FILE names"),
        "{line}"
    );
}

/// `airlock doctor` shows the image's Chromium and age, and warns, naming `cargo xtask image`,
/// when the image is older than the bound: here a copy of the image relabelled as built in
/// January.
#[test]
fn doctor_shows_the_images_chromium_and_warns_when_it_is_stale() {
    if !airlock_testkit::docker::docker_ready() {
        return;
    }
    let image = airlock_testkit::docker::image();
    let stale = format!("airlock-stale-test-{}:1", std::process::id());
    let mut build = std::process::Command::new("docker")
        .args(["build", "--quiet", "--tag", &stale])
        .args([
            "--label",
            "org.opencontainers.image.created=2026-01-01T00:00:00Z",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        build.stdin.as_mut().unwrap(),
        format!("FROM {image}\n").as_bytes(),
    )
    .unwrap();
    drop(build.stdin.take());
    assert!(build.wait().unwrap().success());
    let doctor = |image: &str| {
        let output = airlock()
            .args(["doctor", "--image", image])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let fresh_report = doctor(&image);
    let old = doctor(&stale);
    let _ = std::process::Command::new("docker")
        .args(["rmi", "--force", &stale])
        .output();
    let line = |text: &str| {
        text.lines()
            .find(|line| line.contains("image age:"))
            .map_or_else(|| panic!("no image age line: {text}"), str::to_owned)
    };
    let fresh = line(&fresh_report);
    assert!(fresh.starts_with("ok   image age:"), "{fresh}");
    // Built from the security archive, the image's Chromium is the newest this host's apt knows
    // (an image from `bookworm main` alone carried 150 while the host offered 156).
    assert!(
        !fresh_report.contains("this host's apt offers Chromium"),
        "{fresh_report}"
    );
    assert!(fresh.contains("carries Chromium "), "{fresh}");
    let old = line(&old);
    assert!(old.starts_with("warn image age:"), "{old}");
    assert!(old.contains("cargo xtask image"), "{old}");
}
