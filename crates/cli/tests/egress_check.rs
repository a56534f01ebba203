//! `airlock egress check` as a user runs it: the real binary, its stdout and exit codes.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

fn airlock() -> Command {
    Command::cargo_bin("airlock").unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let output = airlock().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn one_line_per_target_and_exit_zero_when_refused() {
    let out = stdout_of(&[
        "egress",
        "check",
        "--allow",
        "127.0.0.1:8080",
        "https://example.com/",
        "http://127.0.0.1:8080/",
        "http://127.0.0.1:8081/",
        "10.0.0.1",
        "8.8.8.8",
        "[::ffff:169.254.169.254]:80",
        "example.com:22",
    ]);
    insta::assert_snapshot!(out);
}

#[test]
fn json_lines_shape() {
    let out = stdout_of(&[
        "egress",
        "check",
        "--json",
        "--profile",
        "local",
        "http://192.168.1.1/",
        "http://[fe80::1]/",
        "https://example.com",
    ]);
    let values: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    insta::assert_json_snapshot!(values);
}

#[test]
fn targets_come_from_stdin_when_none_are_given() {
    let output = airlock()
        .args(["egress", "check"])
        .write_stdin("# a comment\n\nhttp://10.1.1.1/\n  https://example.com  \n")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "refuse http://10.1.1.1/: private address 10.1.1.1 (10.0.0.0/8)\nresolve https://example.com\n"
    );
}

#[test]
fn bad_arguments_exit_two_and_name_the_flag() {
    for (args, needle) in [
        (&["egress", "check", "--allow", "nope", "x"][..], "--allow"),
        (
            &["egress", "check", "--allow", "169.254.169.254:80", "x"],
            "nothing may open",
        ),
        (&["egress", "check", "--profile", "lan", "x"], "--profile"),
        (&["egress", "check", "--port", "70000", "x"], "--port"),
        (&["egress", "frobnicate"], "frobnicate"),
    ] {
        let output = airlock().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn help_describes_targets_and_flags() {
    let out = stdout_of(&["egress", "check", "--help"]);
    for needle in [
        "--profile",
        "--allow",
        "--port",
        "--json",
        "--resolve",
        "TARGET",
    ] {
        assert!(out.contains(needle), "{needle} missing from help:\n{out}");
    }
}

#[test]
fn resolve_asks_the_proxys_resolver_not_the_hosts_file() {
    use std::collections::HashMap;
    use std::net::Ipv4Addr;
    // A name from this machine's /etc/hosts: the system resolver would answer it, the proxy's
    // resolver must not (it never reads the hosts file).
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    let local_name = hosts
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.split_whitespace().skip(1))
        .find(|name| !name.ends_with("localhost") && !name.contains(':'))
        .expect("this test needs a name besides localhost in /etc/hosts, as every Docker or Debian host has")
        .to_owned();
    let port = airlock_testkit::dns::dns(HashMap::from([
        ("lab.test", vec![Ipv4Addr::new(10, 1, 2, 3)]),
        ("pub.test", vec![Ipv4Addr::new(93, 184, 216, 34)]),
    ]));
    let nameserver = format!("127.0.0.1:{port}");
    let out = stdout_of(&[
        "egress",
        "check",
        "--json",
        "--resolve",
        "--nameserver",
        &nameserver,
        "lab.test",
        "pub.test",
        &local_name,
    ]);
    let verdicts: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(verdicts[0]["verdict"], "refuse", "{out}");
    assert_eq!(verdicts[0]["class"], "private", "{out}");
    assert_eq!(verdicts[1]["verdict"], "allow", "{out}");
    assert_eq!(
        verdicts[1]["addresses"],
        serde_json::json!(["93.184.216.34"]),
        "{out}"
    );
    assert_eq!(verdicts[2]["verdict"], "refuse", "{out}");
    assert_eq!(verdicts[2]["class"], "no-address", "{out}");
    assert!(
        verdicts[2]["reason"]
            .as_str()
            .unwrap()
            .contains("does not resolve"),
        "{out}"
    );
}

#[test]
fn a_nameserver_without_resolve_is_a_usage_error() {
    let output = airlock()
        .args(["egress", "check", "--nameserver", "127.0.0.1:53", "x.test"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--resolve"));
}

#[test]
fn a_scope_is_judged_with_the_address_rule_and_json_says_which_rule_decided() {
    use std::collections::HashMap;
    use std::net::Ipv4Addr;
    let port = airlock_testkit::dns::dns(HashMap::from([
        ("shop.test", vec![Ipv4Addr::new(93, 184, 216, 34)]),
        ("inside.test", vec![Ipv4Addr::new(10, 1, 2, 3)]),
        ("cdn.test", vec![Ipv4Addr::new(93, 184, 216, 35)]),
    ]));
    let nameserver = format!("127.0.0.1:{port}");
    let out = stdout_of(&[
        "egress",
        "check",
        "--json",
        "--resolve",
        "--nameserver",
        &nameserver,
        "--allowed-domain",
        "shop.test",
        "--allowed-domain",
        "inside.test",
        "--blocked-domain",
        "ads.shop.test",
        "https://SHOP.test./",
        "inside.test",
        "cdn.test",
        "https://shop.test.cdn.test/",
        "8.8.8.8",
        "http://169.254.169.254/",
        "shop.test:22",
    ]);
    let verdicts: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let row = |i: usize| {
        (
            verdicts[i]["verdict"].as_str().unwrap().to_owned(),
            verdicts[i]["rule"].as_str().unwrap_or_default().to_owned(),
            verdicts[i]["class"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let expect = |v: &str, r: &str, c: &str| (v.to_owned(), r.to_owned(), c.to_owned());
    assert_eq!(row(0), expect("allow", "scope+address", ""), "{out}");
    // In scope, but its answer is private: the address rule still refuses it.
    assert_eq!(row(1), expect("refuse", "address", "private"), "{out}");
    assert_eq!(row(2), expect("refuse", "scope", "out-of-scope"), "{out}");
    assert_eq!(row(3), expect("refuse", "scope", "out-of-scope"), "{out}");
    assert_eq!(row(4), expect("refuse", "scope", "out-of-scope"), "{out}");
    assert_eq!(row(5), expect("refuse", "address", "never-opened"), "{out}");
    assert_eq!(row(6), expect("refuse", "port", "port"), "{out}");
    let bad = airlock()
        .args(["egress", "check", "--allowed-domain", "*.com", "x.com"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("--allowed-domain") && stderr.contains("`*.com`"),
        "{stderr}"
    );
}
