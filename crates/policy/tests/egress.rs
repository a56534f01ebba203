//! The egress policy, decision by decision.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use airlock_policy::{AllowEntry, Allowance, Decision, EgressPolicy, Profile, Refusal};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn refusal(decision: Decision) -> Refusal {
    match decision {
        Decision::Refuse(refusal) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn policy(profile: Profile, ports: Option<Vec<u16>>, allow: &[&str]) -> EgressPolicy {
    EgressPolicy::new(profile, ports, allow.iter().map(|e| e.parse().unwrap())).unwrap()
}

#[test]
fn urls_are_read_as_a_browser_reads_them() {
    let p = EgressPolicy::default();
    for url in [
        "https://example.com",
        "HTTPS://example.com/",
        "  https://example.com/\n",
        "http://example.com:80/",
        "http://example.com:0443/",
        "example.com/path",
        "https://example.com?q=a@b",
        "https://example.com#a@b",
    ] {
        assert!(
            matches!(p.decide_url(url), Decision::Resolve { ref name, .. } if name == "example.com"),
            "{url:?}: {:?}",
            p.decide_url(url)
        );
    }
}

#[test]
fn urls_that_browsers_and_other_parsers_read_differently_are_refused() {
    let p = EgressPolicy::default();
    for (url, because) in [
        // WHATWG: host good.example, path `/@evil.example/`; RFC 3986: user `good.example\`.
        (
            "http://good.example\\@evil.example/",
            "`\\` in the host part",
        ),
        (
            "http://good.example\\.evil.example/",
            "`\\` in the host part",
        ),
        ("https:\\\\example.com\\path", "exactly `//`"),
        ("https:example.com", "exactly `//`"),
        ("https:/example.com", "exactly `//`"),
        ("https:///example.com", "exactly `//`"),
        ("http:/\\example.com/", "exactly `//`"),
        ("ht\ttps://example.com/", "tabs and newlines"),
        ("https://exa\nmple.com/", "tabs and newlines"),
        ("https://example.com/\r\npath", "tabs and newlines"),
        ("http://127.0.0.%31/", "percent-encoded host"),
        ("http://exa%6dple.com/", "percent-encoded host"),
    ] {
        let why = refusal(p.decide_url(url));
        assert_eq!(why.class(), "ambiguous-url", "{url:?}: {why}");
        assert!(why.to_string().contains(because), "{url:?}: {why}");
    }
    // A backslash in the path or query is read the same way by both: only the host matters.
    assert!(matches!(
        p.decide_url("https://example.com/a\\b?c=\\"),
        Decision::Resolve { ref name, .. } if name == "example.com"
    ));
}

#[test]
fn refusals_before_resolution() {
    let p = EgressPolicy::default();
    let class = |url: &str| refusal(p.decide_url(url)).class();
    assert_eq!(class("file:///etc/passwd"), "scheme");
    assert_eq!(class("\u{1}JavaScript:alert(1)"), "scheme");
    assert_eq!(class("java\tscript:alert(1)"), "scheme");
    assert_eq!(class("ftp://example.com/"), "scheme");
    assert_eq!(class("chrome://settings"), "scheme");
    assert_eq!(class("ws://example.com/"), "scheme");
    assert_eq!(class("https://user:pass@example.com/"), "userinfo");
    assert_eq!(class("https://@example.com/"), "userinfo");
    assert_eq!(class("http://example.com:22/"), "port");
    assert_eq!(class("http://example.com:0/"), "port");
    assert_eq!(class("http://example.com:65536/"), "port");
    assert_eq!(class("http://example.com:8o/"), "port");
    assert_eq!(class("http://2130706433/"), "host-spelling");
    assert_eq!(class("http://0x7f.1/"), "host-spelling");
    assert_eq!(class("http://localhost/"), "host-spelling");
    assert_eq!(class("http://[fe80::1%25eth0]/"), "host-spelling");
    assert_eq!(class("http://127.0.0.1/"), "loopback");
    assert_eq!(class("http://[::1]/"), "loopback");
    assert_eq!(class("http://[::ffff:127.0.0.1]/"), "IPv4-mapped");
    assert_eq!(class("http://[::ffff:93.184.216.34]/"), "IPv4-mapped");
    assert_eq!(class("http://[::7f00:1]/"), "IPv4-compatible");
    assert_eq!(class("http://[::5db8:d822]/"), "IPv4-compatible");
    assert_eq!(class("http://10.0.0.5/"), "private");
    assert_eq!(class("http://[64:ff9b::10.0.0.5]/"), "private");
    assert_eq!(class("http://100.64.0.1/"), "carrier-grade NAT");
    assert_eq!(class("http://[fd12::1]/"), "unique-local");
    assert_eq!(class("http://169.254.169.254/"), "never-opened");
    assert_eq!(class("http://[::ffff:169.254.169.254]/"), "never-opened");
    assert_eq!(class("http://[fd00:ec2::254]/"), "never-opened");
    assert_eq!(class("http://100.100.100.200/"), "never-opened");
    assert_eq!(class("http://0.0.0.0/"), "never-opened");
    assert_eq!(class("http://[::]/"), "never-opened");
    assert_eq!(class("example.com:8080"), "unreadable");
}

#[test]
fn authorities_need_a_port() {
    let p = EgressPolicy::default();
    assert!(matches!(
        p.decide_authority("example.com:443"),
        Decision::Resolve { port: 443, .. }
    ));
    assert!(matches!(
        p.decide_authority("[2606:4700::1111]:443"),
        Decision::Allow {
            port: 443,
            allowance: Allowance::Public,
            ..
        }
    ));
    assert_eq!(
        refusal(p.decide_authority("example.com")).class(),
        "unreadable"
    );
    assert_eq!(
        refusal(p.decide_authority("example.com:25")).class(),
        "port"
    );
    assert_eq!(refusal(p.decide_authority("[::1]:443")).class(), "loopback");
}

#[test]
fn every_resolved_answer_must_pass() {
    let p = EgressPolicy::default();
    let vetted = p
        .decide_resolved(
            "example.com",
            443,
            &[ip("93.184.216.34"), ip("2606:2800::1"), ip("93.184.216.34")],
        )
        .unwrap();
    assert_eq!(vetted, vec![ip("93.184.216.34"), ip("2606:2800::1")]);
    // A mapped answer is another spelling of an IPv4 address: refused, and with it the name.
    let mapped = p
        .decide_resolved(
            "example.com",
            443,
            &[ip("93.184.216.34"), ip("::ffff:93.184.216.34")],
        )
        .unwrap_err();
    assert_eq!(mapped.class(), "IPv4-mapped");
    // NAT64 answers are judged by what they carry, and kept exactly as answered.
    assert_eq!(
        p.decide_resolved("nat64.example", 443, &[ip("64:ff9b::5db8:d822")])
            .unwrap(),
        vec![ip("64:ff9b::5db8:d822")]
    );

    let mixed = p
        .decide_resolved(
            "rebind.example",
            443,
            &[ip("93.184.216.34"), ip("10.0.0.1")],
        )
        .unwrap_err();
    assert_eq!(
        mixed.to_string(),
        "`rebind.example` resolves to one allowed address and a refused one, so the name is refused as a whole; private address 10.0.0.1 (10.0.0.0/8)"
    );
    let single = p
        .decide_resolved("evil.example", 80, &[ip("169.254.169.254")])
        .unwrap_err();
    assert_eq!(single.class(), "never-opened");
    assert_eq!(
        p.decide_resolved("void.example", 80, &[])
            .unwrap_err()
            .class(),
        "no-address"
    );
}

#[test]
fn allow_entries_open_exactly_what_they_name() {
    let p = policy(
        Profile::Public,
        None,
        &[
            "127.0.0.1:8080",
            "lab.test:9000",
            "10.1.0.0/16:80",
            "[fd00::/8]:443",
        ],
    );
    assert!(matches!(
        p.decide_url("http://127.0.0.1:8080/"),
        Decision::Allow {
            allowance: Allowance::Entry(_),
            ..
        }
    ));
    // Same address, other port; same port, neighbouring address.
    assert_eq!(
        refusal(p.decide_url("http://127.0.0.1:8081/")).class(),
        "loopback"
    );
    assert_eq!(
        refusal(p.decide_url("http://127.0.0.2:8080/")).class(),
        "loopback"
    );
    // A resolved answer can use an address entry too, so a name pointing at the lab works.
    assert!(
        p.decide_resolved("alias.test", 8080, &[ip("127.0.0.1")])
            .is_ok()
    );
    // A mix of an answer the entry opens and a refused one says what was wrong, not "public".
    assert_eq!(
        p.decide_resolved("alias.test", 8080, &[ip("127.0.0.1"), ip("10.9.9.9")])
            .unwrap_err()
            .to_string(),
        "`alias.test` resolves to one allowed address and a refused one, so the name is refused as a whole; private address 10.9.9.9 (10.0.0.0/8)"
    );
    // The entry opens exactly 127.0.0.1: no embedded spelling of it, as a literal or an answer.
    for (literal, class) in [
        ("http://[::ffff:127.0.0.1]:8080/", "IPv4-mapped"),
        ("http://[::7f00:1]:8080/", "IPv4-compatible"),
        ("http://[64:ff9b::127.0.0.1]:8080/", "loopback"),
    ] {
        assert_eq!(refusal(p.decide_url(literal)).class(), class, "{literal}");
    }
    for answer in ["::ffff:127.0.0.1", "::7f00:1", "64:ff9b::7f00:1"] {
        assert!(
            p.decide_resolved("alias.test", 8080, &[ip(answer)])
                .is_err(),
            "{answer} was let through by the entry for 127.0.0.1"
        );
    }
    // A name entry opens that name on that port, whatever it resolves to, but not metadata.
    assert!(matches!(
        p.decide_url("http://lab.test:9000/"),
        Decision::Resolve { .. }
    ));
    assert!(
        p.decide_resolved("lab.test", 9000, &[ip("192.168.1.9")])
            .is_ok()
    );
    assert!(
        p.decide_resolved("other.test", 9000, &[ip("93.184.216.34")])
            .is_err()
    );
    assert_eq!(
        p.decide_resolved("lab.test", 9000, &[ip("169.254.169.254")])
            .unwrap_err()
            .class(),
        "never-opened"
    );
    assert!(matches!(
        p.decide_url("http://10.1.200.3/"),
        Decision::Allow { .. }
    ));
    assert_eq!(refusal(p.decide_url("http://10.2.0.1/")).class(), "private");
    assert!(matches!(
        p.decide_url("https://[fd00::5]/"),
        Decision::Allow { .. }
    ));
    // A block never opens what nothing opens.
    let wide = policy(Profile::Public, None, &["169.254.0.0/16:80"]);
    assert_eq!(
        refusal(wide.decide_url("http://169.254.169.254/")).class(),
        "never-opened"
    );
    assert!(matches!(
        wide.decide_url("http://169.254.1.1/"),
        Decision::Allow { .. }
    ));
}

#[test]
fn local_profile_opens_loopback_and_private_but_not_metadata() {
    let p = policy(Profile::Local, Some(vec![80, 8080]), &[]);
    assert!(matches!(
        p.decide_url("http://127.0.0.1:8080/"),
        Decision::Allow { .. }
    ));
    assert!(matches!(
        p.decide_url("http://192.168.1.1/"),
        Decision::Allow { .. }
    ));
    assert!(matches!(
        p.decide_url("http://[fd12::1]/"),
        Decision::Allow { .. }
    ));
    assert_eq!(
        refusal(p.decide_url("http://169.254.169.254/")).class(),
        "never-opened"
    );
    assert_eq!(
        refusal(p.decide_url("http://169.254.1.1/")).class(),
        "link-local"
    );
    assert_eq!(
        refusal(p.decide_url("https://example.com/")).class(),
        "port"
    );
    assert_eq!(refusal(p.decide_url("http://127.0.0.1:9/")).class(), "port");
}

#[test]
fn bad_settings_name_the_fix() {
    let err = |entry: &str| entry.parse::<AllowEntry>().unwrap_err().to_string();
    assert_eq!(
        err("127.0.0.1"),
        "allow entry `127.0.0.1` is not valid: the port is missing; write name:port, ip:port, [ipv6]:port or cidr:port"
    );
    assert!(err("169.254.169.254:80").contains("nothing may open"));
    assert!(err("[::1:80").contains("no closing"));
    assert!(err("example.com:0").contains("1 to 65535"));
    assert!(err("localhost:8080").contains("always means this machine"));
    assert!(err("10.0.0.0/33:80").contains("not an address block"));
    assert_eq!(
        "lan".parse::<Profile>().unwrap_err().to_string(),
        "profile `lan` is not known: use `public` (the default) or `local`"
    );
    assert!(EgressPolicy::new(Profile::Public, Some(vec![]), []).is_err());
    assert!(EgressPolicy::new(Profile::Public, Some(vec![0]), []).is_err());
    // Entries print back in the form they are written.
    for entry in [
        "127.0.0.1:8080",
        "[::1]:8080",
        "10.0.0.0/8:80",
        "[fd00::/8]:443",
        "lab.test:9000",
    ] {
        assert_eq!(entry.parse::<AllowEntry>().unwrap().to_string(), entry);
    }
}

#[test]
fn refusal_reasons_snapshot() {
    let p = policy(Profile::Public, None, &["127.0.0.1:8080"]);
    let urls = [
        "file:///etc/passwd",
        "https://user:pw@example.com/",
        "http://example.com:22/",
        "http://example.com:99999/",
        "http://2130706433/",
        "http://[::1%25lo]/",
        "http://localhost:8080/",
        "http://127.0.0.1/",
        "http://10.0.0.5/",
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.1.1/",
        "http://[::ffff:10.0.0.5]/",
        "http://[::ffff:93.184.216.34]/",
        "http://[::7f00:1]:8080/",
        "http://[64:ff9b::7f00:1]/",
        "http://[2001:db8::1]/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
    ];
    let mut lines: Vec<String> = urls
        .iter()
        .map(|url| format!("{url} -> {}", refusal(p.decide_url(url))))
        .collect();
    let resolved = p
        .decide_resolved(
            "mixed.example",
            443,
            &[ip("93.184.216.34"), ip("192.168.0.7")],
        )
        .unwrap_err();
    lines.push(format!("mixed.example -> {resolved}"));
    insta::assert_snapshot!(lines.join("\n"));
}
