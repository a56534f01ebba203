//! The domain matcher and the scope: normalisation, wildcards, lookalikes, ceilings, and the scope
//! inside the egress policy.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use airlock_policy::{Decision, DomainPattern, EgressPolicy, Profile, Refusal, Scope, ScopeError};
use proptest::prelude::*;

fn scope(allowed: &[&str], blocked: &[&str]) -> Scope {
    Scope::parse(allowed, blocked).unwrap()
}

#[test]
fn a_bare_name_and_its_wildcard_match_apart() {
    let bare = scope(&["example.com"], &[]);
    assert!(bare.admits_name("example.com"));
    assert!(!bare.admits_name("www.example.com"));
    let wild = scope(&["*.example.com"], &[]);
    assert!(!wild.admits_name("example.com"));
    assert!(wild.admits_name("www.example.com"));
    assert!(wild.admits_name("a.b.example.com"));
    let both = scope(&["example.com", "*.example.com"], &[]);
    assert!(both.admits_name("example.com") && both.admits_name("www.example.com"));
}

#[test]
fn lookalikes_never_match() {
    let scope = scope(&["example.com", "*.example.com"], &[]);
    for lookalike in [
        "example.com.evil.net",
        "evil-example.com",
        "evilexample.com",
        "xn--exampl-gva.com", // exampl\u{e9}.com
        "example.co",
        "example.comm",
        "wwwexample.com",
    ] {
        assert!(!scope.admits_name(lookalike), "{lookalike} matched");
    }
    // A Cyrillic `е` spelled as the browser would send it (punycode) is another name.
    let policy = EgressPolicy::default().with_scope(scope);
    let Decision::Refuse(why) = policy.decide_url("https://exampl\u{435}.com/") else {
        panic!("a Cyrillic lookalike was let through")
    };
    assert_eq!(why.class(), "out-of-scope");
    assert!(why.to_string().contains("xn--"), "{why}");
}

#[test]
fn names_are_normalised_the_way_the_browser_does() {
    let pattern: DomainPattern = "*.Example.COM.".parse().unwrap();
    assert_eq!(pattern.to_string(), "*.example.com");
    let policy = EgressPolicy::default().with_scope(scope(&["b\u{fc}cher.example"], &[]));
    for url in [
        "https://B\u{dc}CHER.example./",
        "https://xn--bcher-kva.example/",
    ] {
        assert!(
            matches!(policy.decide_url(url), Decision::Resolve { .. }),
            "{url} was refused"
        );
    }
}

#[test]
fn blocked_wins_over_allowed_and_applies_alone() {
    let shop = scope(&["*.shop.example"], &["ads.shop.example"]);
    assert!(shop.admits_name("www.shop.example"));
    assert!(!shop.admits_name("ads.shop.example"));
    let only_blocked = scope(&[], &["*.tracker.example"]);
    assert!(only_blocked.admits_name("anything.example"));
    assert!(!only_blocked.admits_name("x.tracker.example"));
}

#[test]
fn bad_patterns_name_the_pattern_and_the_fix() {
    for (pattern, says) in [
        ("*", "`*` may only open a pattern"),
        ("*.com", "top-level domain"),
        ("www.*.example.com", "`*` may only open a pattern"),
        ("10.0.0.1", "an address is not a domain"),
        ("[::1]", "an address is not a domain"),
        ("exa mple.com", "white space"),
        (" example.com", "white space"),
        ("example.com ", "white space"),
        ("example.com\n", "white space"),
        ("*.\texample.com", "white space"),
        ("*.co.uk", "public suffix"),
        ("*.com.au", "public suffix"),
        ("*.CO.UK", "public suffix"),
        ("*.co.uk.", "public suffix"),
        ("*.github.io", "public suffix"),
        ("localhost", "this machine"),
        ("", "empty"),
    ] {
        let error = pattern.parse::<DomainPattern>().unwrap_err().to_string();
        assert!(
            error.contains(&format!("`{pattern}`")) && error.contains(says),
            "{pattern}: {error}"
        );
        assert!(error.contains("write a name"), "{error}");
    }
    // Below a public suffix, and under a name the list does not know, a wildcard is a site's.
    for pattern in [
        "*.example.co.uk",
        "*.corp.test",
        "*.example.github.io",
        "co.uk",
    ] {
        assert!(pattern.parse::<DomainPattern>().is_ok(), "{pattern}");
    }
    // The scope's own reading refuses a padded pattern too (no quiet trimming).
    assert!(Scope::parse([" example.com"], [] as [&str; 0]).is_err());
    let many: Vec<String> = (0..300).map(|i| format!("s{i}.example")).collect();
    let error = Scope::parse(&many, &[] as &[&str]).unwrap_err();
    assert!(matches!(
        error,
        ScopeError::TooMany {
            field: "allowed_domains",
            count: 300
        }
    ));
}

#[test]
fn with_a_domain_scope_an_address_literal_is_out_of_scope_but_the_address_rule_speaks_first() {
    let lab = EgressPolicy::new(Profile::Public, None, ["127.0.0.1:8080".parse().unwrap()])
        .unwrap()
        .with_scope(scope(&["lab.example"], &[]));
    let Decision::Refuse(why) = lab.decide_url("http://127.0.0.1:8080/") else {
        panic!("an address literal passed a domain scope")
    };
    assert_eq!(why.class(), "out-of-scope");
    assert!(why.to_string().contains("address literal"), "{why}");
    let Decision::Refuse(why) = lab.decide_url("http://169.254.169.254/") else {
        panic!()
    };
    assert_eq!(why.class(), "never-opened");
    // A scope that only blocks names leaves literals to the address rule.
    let blocking = EgressPolicy::new(Profile::Public, None, ["127.0.0.1:8080".parse().unwrap()])
        .unwrap()
        .with_scope(scope(&[], &["ads.example"]));
    assert!(matches!(
        blocking.decide_url("http://127.0.0.1:8080/"),
        Decision::Allow { .. }
    ));
}

#[test]
fn out_of_scope_names_are_refused_before_any_lookup_and_in_scope_ones_still_face_the_address_rule()
{
    let policy = EgressPolicy::default().with_scope(scope(&["shop.example"], &[]));
    let Decision::Refuse(why) = policy.decide_authority("cdn.example:443") else {
        panic!()
    };
    assert_eq!(
        why.to_string(),
        "`cdn.example` is out of this task's scope: not in the task's allowed domains (shop.example)"
    );
    assert_eq!(why.for_page(), why.to_string());
    let Decision::Resolve { name, port } = policy.decide_authority("shop.example:443") else {
        panic!()
    };
    let private = ["10.0.0.1".parse().unwrap()];
    let Err(why) = policy.decide_resolved(&name, port, &private) else {
        panic!("a scope opened a private address")
    };
    assert_eq!(why.class(), "private");
}

#[test]
fn a_request_inside_the_ceiling_is_kept_and_one_beyond_it_is_refused() {
    let ceiling = scope(&["*.corp.example", "docs.example"], &["admin.corp.example"]);
    let asked = scope(&["wiki.corp.example"], &["x.example"]);
    let effective = asked.within(&ceiling, "this token").unwrap();
    assert_eq!(
        effective.to_string(),
        "only wiki.corp.example, except admin.corp.example, x.example"
    );
    // Asking for nothing takes the ceiling.
    let effective = Scope::default().within(&ceiling, "this token").unwrap();
    assert_eq!(effective, ceiling);
    let error = scope(&["corp.example"], &[])
        .within(&ceiling, "this token")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "allowed_domains entry `corp.example` is beyond what this token allows (docs.example, *.corp.example): ask for names inside it"
    );
    let error = scope(&["*.docs.example"], &[])
        .within(&ceiling, "the server")
        .unwrap_err();
    assert!(matches!(error, ScopeError::BeyondCeiling { .. }), "{error}");
    let error = scope(&["admin.corp.example"], &[])
        .within(&ceiling, "the server")
        .unwrap_err();
    assert!(
        matches!(error, ScopeError::BlockedByCeiling { .. }),
        "{error}"
    );
    // A ceiling with no allowed list only adds its blocks.
    let open = scope(&[], &["ads.example"]);
    let effective = scope(&["a.example"], &[])
        .within(&open, "the server")
        .unwrap();
    assert_eq!(effective.to_string(), "only a.example, except ads.example");
}

#[test]
fn the_refusal_has_its_own_class() {
    let refusal = Refusal::OutOfScope {
        host: "x.example".into(),
        why: "blocked by `x.example`".into(),
    };
    assert_eq!(refusal.class(), "out-of-scope");
}

/// A host label. Hyphens in its third and fourth places are reserved (RFC 5891 §4.2.3.1): `xn--`
/// starts an encoded label, which must then decode, so such a label is not an ordinary name.
fn label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?"
        .prop_filter("a reserved label", |label| label.get(2..4) != Some("--"))
}

/// A name whose last label is letters, so it never reads as an IPv4 address.
fn name() -> impl Strategy<Value = String> {
    (prop::collection::vec(label(), 1..4), "[a-z]{2,6}")
        .prop_map(|(labels, top)| format!("{}.{top}", labels.join(".")))
}

proptest! {
    #[test]
    fn a_wildcard_matches_exactly_the_names_ending_in_dot_parent(parent in name(), other in name(), head in label()) {
        // The property is about patterns that parse: a wildcard over a public suffix (`*.a.np`,
        // as `*.np` makes every name under np one) is refused.
        let wild = format!("*.{parent}").parse::<DomainPattern>();
        prop_assume!(wild.is_ok());
        let wild = wild.unwrap();
        let under = format!("{head}.{parent}");
        let glued = format!("{head}{parent}");
        let dotted_parent = format!(".{parent}");
        prop_assert!(wild.matches(&under));
        prop_assert!(!wild.matches(&parent));
        // Glued on without a dot, it is another site.
        prop_assert!(!wild.matches(&glued));
        prop_assert_eq!(wild.matches(&other), other.ends_with(&dotted_parent));
    }

    #[test]
    fn an_exact_pattern_matches_one_name_however_spelled(name in name(), upper in any::<bool>(), dot in any::<bool>()) {
        let mut spelled = if upper { name.to_uppercase() } else { name.clone() };
        if dot { spelled.push('.'); }
        let policy = EgressPolicy::default().with_scope(Scope::parse([&name], [] as [&str; 0]).unwrap());
        let in_scope = matches!(policy.decide_url(&format!("https://{spelled}/")), Decision::Resolve { .. });
        prop_assert!(in_scope);
        let sub = format!("https://www.{name}/");
        let is_refused = matches!(policy.decide_url(&sub), Decision::Refuse(_));
        prop_assert!(is_refused);
    }

    #[test]
    fn covers_agrees_with_matches(a in name(), b in name(), head in label(), wild_a in any::<bool>(), wild_b in any::<bool>()) {
        let make = |wild: bool, n: &str| -> Option<DomainPattern> {
            if wild { format!("*.{n}").parse().ok() } else { n.parse().ok() }
        };
        // Patterns that parse only (a wildcard over a public suffix is refused).
        let (pa, pb) = (make(wild_a, &a), make(wild_b, &b));
        prop_assume!(pa.is_some() && pb.is_some());
        let (pa, pb) = (pa.unwrap(), pb.unwrap());
        if pa.covers(&pb) {
            // Every name pb matches (sampled), pa matches too.
            let sample = if wild_b { format!("{head}.{b}") } else { b.clone() };
            prop_assert!(pb.matches(&sample));
            prop_assert!(pa.matches(&sample));
        }
    }
}
