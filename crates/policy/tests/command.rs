//! The command policy for agent-browser 0.41.x.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_policy::{
    CommandRefusal, allowed_commands, check_command, refused_commands, refused_flags,
};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn check(list: &[&str]) -> Result<&'static str, CommandRefusal> {
    check_command(&args(list)).map(|allowed| allowed.command)
}

#[test]
fn ordinary_work_is_allowed() {
    for list in [
        &["open", "https://example.com"][..],
        &["open"],
        &["goto", "example.com/docs"],
        &["snapshot", "-i", "-c", "-d", "3"],
        &["snapshot", "-s", "#main"],
        &["click", "@e3"],
        &["click", "@e3", "--new-tab"],
        &["fill", "@e2", "hello world"],
        &["press", "Enter"],
        &["scroll", "down", "500"],
        &["mouse", "wheel", "-200"],
        &["set", "geo", "37.77", "-122.41"],
        &["wait", "--text", "Done"],
        &["wait", "--load", "networkidle"],
        &["get", "text", "@e1"],
        &["get", "attr", "@e1", "href"],
        &["is", "visible", "@e1"],
        &["find", "role", "button", "click", "--name", "Submit"],
        &["screenshot", "--full"],
        &["eval", "--stdin"],
        &["eval", "document.title"],
        &["tab"],
        &["tab", "new", "https://example.com"],
        &["tab", "new", "--label", "docs", "https://example.com"],
        &["tab", "t2"],
        &["diff", "url", "https://a.example", "https://b.example"],
        &["read", "https://example.com", "--outline"],
        &["skills", "get", "core", "--full"],
        &["--json", "get", "url"],
        &["network", "requests", "--filter", "api"],
    ] {
        assert!(check(list).is_ok(), "{list:?}: {:?}", check(list));
    }
}

#[test]
fn aliases_are_the_same_command() {
    assert_eq!(check(&["goto", "https://example.com"]), Ok("open"));
    assert_eq!(check(&["navigate", "https://example.com"]), Ok("open"));
    assert_eq!(check(&["key", "Enter"]), Ok("press"));
    assert_eq!(check(&["scrollinto", "@e1"]), Ok("scrollintoview"));
    for alias in ["close", "quit", "exit"] {
        assert!(
            matches!(check(&[alias]), Err(CommandRefusal::Refused { .. })),
            "{alias}"
        );
    }
    assert!(check(&["goto", "file:///etc/passwd"]).is_err());
    assert!(check(&["navigate", "chrome://settings"]).is_err());
}

#[test]
fn refused_commands_and_subcommands() {
    for list in [
        &["download", "@e1", "/tmp/x"][..],
        &["upload", "@e1", "/etc/passwd"],
        &["pdf", "out.pdf"],
        &["install"],
        &["cookies"],
        &["state", "save", "x.json"],
        &["auth", "login", "bank"],
        &["connect", "9222"],
        &["batch", "open https://a", "download @e1 x"],
        &["record", "start", "x.webm"],
        &["set", "headers", "{}"],
        &["set", "credentials", "u", "p"],
        &["set", "offline", "on"],
        &["network", "route", "*", "--abort"],
        &["network", "har", "start"],
        &["get", "cdp-url"],
        &["diff", "screenshot", "--baseline", "x.png"],
        &["get"],
        &["mouse", "teleport"],
        &["frobnicate"],
        &[],
    ] {
        assert!(check(list).is_err(), "{list:?} was allowed");
    }
}

#[test]
fn urls_in_commands_must_be_http() {
    for list in [
        &["open", "file:///etc/passwd"][..],
        &["open", "  FILE:///etc/passwd"],
        &["open", "javascript:alert(1)"],
        &["open", "data:text/html,<h1>x"],
        &["open", "view-source:https://example.com"],
        &["open", "about:blank"],
        &["open", "https://user:pw@example.com"],
        &["open", "http://2130706433/"],
        &["tab", "new", "file:///etc/passwd"],
        &["read", "ftp://example.com/"],
        &["pushstate", "chrome://settings"],
        &["diff", "url", "https://a.example", "file:///etc/hosts"],
    ] {
        assert!(
            matches!(check(list), Err(CommandRefusal::Url { .. })),
            "{list:?}: {:?}",
            check(list)
        );
    }
}

#[test]
fn refused_flags_in_every_position_and_form() {
    for flag in refused_flags() {
        for list in [
            vec![flag, "x", "open", "https://example.com"],
            vec!["open", "https://example.com", flag, "x"],
            vec!["snapshot", "--timeout", flag],
        ] {
            assert!(
                matches!(check(&list), Err(CommandRefusal::Flag { .. })),
                "{list:?}"
            );
        }
        let inline = format!("{flag}=x");
        assert!(
            matches!(
                check(&["snapshot", &inline]),
                Err(CommandRefusal::Flag { .. })
            ),
            "{inline}"
        );
    }
    assert!(matches!(
        check(&["snapshot", "--bogus"]),
        Err(CommandRefusal::UnknownFlag { .. })
    ));
    assert!(matches!(
        check(&["snapshot", "--json=false"]),
        Err(CommandRefusal::UnknownFlag { .. })
    ));
    assert!(matches!(
        check(&["snapshot", "-d"]),
        Err(CommandRefusal::MissingValue { .. })
    ));
}

#[test]
fn every_listed_command_is_either_allowed_or_refused_never_both() {
    let allowed: Vec<_> = allowed_commands().collect();
    for refused in refused_commands() {
        assert!(!allowed.contains(&refused), "{refused}");
    }
    assert!(allowed.contains(&"open") && allowed.contains(&"snapshot"));
}

#[test]
fn refusal_reasons_snapshot() {
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["download", "@e1", "x"],
        &["close"],
        &["cookies", "get"],
        &["batch"],
        &["set", "headers", "{}"],
        &["network", "route", "*"],
        &["get"],
        &["get", "secrets"],
        &["open", "--proxy=http://evil:3128", "https://example.com"],
        &["open", "--args", "--no-sandbox"],
        &["open", "--ignore-https-errors"],
        &["open", "--profile", "Default"],
        &["screenshot", "--screenshot-dir", "/"],
        &["snapshot", "--bogus"],
        &["open", "file:///etc/passwd"],
        &["open", "example.com:8080"],
        &["open", "https://user:pw@example.com"],
        &["open", "http://0x7f.1/"],
    ];
    let lines: Vec<String> = cases
        .iter()
        .map(|list| format!("{list:?} -> {}", check(list).unwrap_err()))
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}
