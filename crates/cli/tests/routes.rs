//! Egress routes as the operator sets them: `--parent` and its companions, `[parents.NAME]` in
//! `airlock.toml`, the host's proxy variables, and `--route`; every bad value names its flag, and
//! no credential shows anywhere `doctor` or an error writes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

const USER: &str = "corp-user-5d1";
const PASSWORD: &str = "corp-password-77e0";

fn airlock() -> Command {
    let mut command = Command::cargo_bin("airlock").unwrap();
    // As in cli.rs: these tests are about the command's own checks, not the privilege drop.
    command.env("AIRLOCK_PRIVSEP_CHILD", "1");
    for (key, _) in std::env::vars()
        .filter(|(k, _)| k.starts_with("AIRLOCK_") || k.to_ascii_uppercase().ends_with("_PROXY"))
    {
        command.env_remove(key);
    }
    command
}

/// Everything `doctor` wrote, and its settings rows as (name, value, source).
fn doctor(command: &mut Command) -> (String, Vec<(String, String, String)>) {
    let output = command.output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let rows = stdout
        .lines()
        .skip_while(|line| !line.starts_with("settings"))
        .skip(1)
        .filter_map(|line| {
            let (rest, source) = line.trim().rsplit_once(" [")?;
            let (name, value) = rest.split_once(' ')?;
            Some((
                name.to_owned(),
                value.trim().to_owned(),
                source.trim_end_matches(']').to_owned(),
            ))
        })
        .collect();
    (all, rows)
}

fn row(rows: &[(String, String, String)], name: &str) -> (String, String) {
    let (_, value, source) = rows.iter().find(|(n, _, _)| n == name).unwrap();
    (value.clone(), source.clone())
}

fn assert_hidden(text: &str) {
    for secret in [USER, PASSWORD] {
        assert!(!text.contains(secret), "`{secret}` shown: {text}");
    }
}

#[test]
fn a_parent_from_flags_shows_where_it_goes_and_never_its_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("corp");
    std::fs::write(&credentials, format!("{USER}:{PASSWORD}\n")).unwrap();
    let (all, rows) = doctor(airlock().args([
        "doctor",
        "--parent",
        "corp=http://127.0.0.1:3128",
        "--parent-site",
        "corp=*.corp.test",
        "--parent-credentials",
        &format!("corp=file:{}", credentials.display()),
        "--parent-resolves",
        "corp",
        "--route",
        "corp",
    ]));
    assert_eq!(
        row(&rows, "parents"),
        (
            "route `corp` (through http://127.0.0.1:3128) [always for *.corp.test; the parent resolves names; with credentials]".to_owned(),
            "flag".to_owned()
        ),
        "{all}"
    );
    assert_eq!(row(&rows, "route"), ("corp".to_owned(), "flag".to_owned()));
    // A parent that resolves names is named with what it gives up.
    assert!(
        all.contains("route corp: its parent resolves names"),
        "{all}"
    );
    assert_hidden(&all);
}

#[test]
fn a_parent_from_the_config_file_or_the_environment_variables() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("airlock.toml");
    std::fs::write(
        &config,
        "route = \"socks\"\n[parents.socks]\nurl = \"socks5://127.0.0.1:1080\"\ncredentials = \"env:CORP_SOCKS\"\n",
    )
    .unwrap();
    let (all, rows) = doctor(
        airlock()
            .env("AIRLOCK_CONFIG", &config)
            .env("CORP_SOCKS", format!("{USER}:{PASSWORD}"))
            .arg("doctor"),
    );
    let (parents, source) = row(&rows, "parents");
    assert_eq!(
        parents,
        "route `socks` (through socks5://127.0.0.1:1080) [with credentials]"
    );
    assert!(source.starts_with("file "), "{source}");
    assert_eq!(row(&rows, "route").0, "socks");
    assert_hidden(&all);

    // The host's variables are shown (credentials masked) but not used unless asked.
    let host = |extra: &[&str]| {
        doctor(
            airlock()
                .env(
                    "HTTPS_PROXY",
                    format!("http://{USER}:{PASSWORD}@127.0.0.1:3128"),
                )
                .env("NO_PROXY", ".corp.test,10.0.0.0/8")
                .arg("doctor")
                .args(extra),
        )
    };
    let (all, rows) = host(&[]);
    assert!(
        all.contains("HTTPS_PROXY=http://***@127.0.0.1:3128")
            && all.contains("tasks do not use it"),
        "{all}"
    );
    assert_eq!(row(&rows, "route").0, "direct");
    assert_hidden(&all);
    let (all, rows) = host(&["--parent-from-environment"]);
    assert_eq!(
        row(&rows, "parents").0,
        "route `environment` (through http://127.0.0.1:3128) [with credentials]",
        "{all}"
    );
    assert_eq!(row(&rows, "route").0, "environment");
    assert!(
        all.contains("left out") && all.contains("10.0.0.0/8"),
        "{all}"
    );
    assert_hidden(&all);
}

#[test]
fn bad_route_settings_name_the_flag_and_the_fix_and_never_a_credential() {
    let dir = tempfile::tempdir().unwrap();
    let one_word = dir.path().join("one-word");
    std::fs::write(&one_word, PASSWORD).unwrap();
    let corp = "corp=http://127.0.0.1:3128";
    let one_word = format!("corp=file:{}", one_word.display());
    let in_url = format!("corp=http://{USER}:{PASSWORD}@127.0.0.1:3128");
    let typed = format!("corp={PASSWORD}");
    for (args, says) in [
        (
            vec!["--parent", &in_url],
            "--parent: route `corp`: credentials do not go in the URL",
        ),
        (vec!["--parent", "corp"], "--parent `corp…` has no `=`"),
        (vec!["--parent", "corp=ftp://p:21"], "http://host:port"),
        (
            vec!["--parent", "direct=http://p:1"],
            "`direct` is built in",
        ),
        (
            vec!["--parent", corp, "--parent-site", "home=*.x.test"],
            "--parent-site home: there is no parent `home`",
        ),
        (
            vec!["--parent", corp, "--parent-credentials", &typed],
            "never the command line",
        ),
        (
            vec!["--parent", corp, "--parent-credentials", &one_word],
            "not user:password",
        ),
        (
            vec!["--parent", corp, "--route", "moon"],
            "--route: there is no route `moon`: the routes are `direct`, `corp`",
        ),
        (
            vec!["--parent-from-environment"],
            "none of HTTPS_PROXY, ALL_PROXY or HTTP_PROXY is set",
        ),
    ] {
        let output = airlock()
            .args(["task", "x", "--model", "script:/nonexistent.json"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_hidden(&stderr);
    }
}

#[test]
fn a_ca_file_gives_certificates_only_and_each_must_parse() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) =
        airlock_testkit::certs::self_signed(dir.path(), "/CN=Airlock test corp CA", None);
    let (all, rows) = doctor(airlock().arg("doctor").arg("--ca-cert").arg(&cert));
    assert_eq!(
        row(&rows, "ca_certs"),
        (cert.display().to_string(), "flag".to_owned()),
        "{all}"
    );
    // A bundle with the key in it is refused whole; so is a file with no certificate.
    let both = dir.path().join("both.pem");
    let mut bundle = std::fs::read(&cert).unwrap();
    bundle.extend(std::fs::read(&key).unwrap());
    std::fs::write(&both, bundle).unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let garbled = dir.path().join("garbled.pem");
    std::fs::write(
        &garbled,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    for (file, says) in [
        (&both, "never a private key"),
        (&key, "never a private key"),
        (&junk, "no certificate in it"),
        (&garbled, "does not parse"),
        (&dir.path().join("missing.pem"), "cannot read it"),
    ] {
        let output = airlock()
            .args([
                "task",
                "x",
                "--model",
                "script:/nonexistent.json",
                "--ca-cert",
            ])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("--ca-cert") && stderr.contains(says),
            "{file:?}: {stderr}"
        );
    }
}
