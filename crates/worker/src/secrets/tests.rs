//! The secret set's unit tests: spellings, refusals, scope, learned values, files.

use base64::engine::general_purpose::STANDARD;

use super::*;

fn secrets(value: &str) -> Secrets {
    Secrets::new(vec![
        Secret::new("pw", value.to_owned(), ["login.example"]).unwrap(),
    ])
    .unwrap()
}

#[test]
fn every_common_spelling_is_scrubbed() {
    let value = "p@ss w\"rd<&>'é1";
    let s = secrets(value);
    let percent = percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
        .to_string();
    let json = serde_json::to_string(value).unwrap();
    for carrier in [
        format!("typed {value} here"),
        format!("GET /login?p={percent} HTTP/1.1"),
        format!("body: p={}", percent.replace("%20", "+")),
        format!("body: p={}", lower_hex_escapes(&percent)),
        format!("{{\"password\":{json}}}"),
        "<input value=\"p@ss w&quot;rd&lt;&amp;&gt;&#39;é1\">".to_owned(),
        format!(
            "Authorization: Basic {}",
            STANDARD.encode(format!("user:{value}"))
        ),
        format!("token={}", STANDARD.encode(format!("ab{value}cd"))),
        format!("t={}", URL_SAFE_NO_PAD.encode(format!("x{value}"))),
    ] {
        let clean = s.scrub(&carrier);
        assert!(clean.contains("[secret:pw]"), "{carrier} → {clean}");
        assert!(!clean.contains(value), "{clean}");
    }
    assert_eq!(s.scrub("nothing here"), "nothing here");
}

#[test]
fn bad_secrets_name_the_field_and_never_the_value() {
    let long = "x".repeat(MAX_SECRET_BYTES + 1);
    for (name, value, domains, says) in [
        ("bad name", "value-1234", vec!["a.example"], "not valid"),
        ("pw", "abc", vec!["a.example"], "4 to 4096 bytes"),
        ("pw", long.as_str(), vec!["a.example"], "4 to 4096 bytes"),
        ("pw", "line\nbreak", vec!["a.example"], "control character"),
        ("pw", "value-1234", vec![], "names no domain"),
        ("pw", "value-1234", vec!["*.com"], "top-level"),
    ] {
        let error = Secret::new(name, value.to_owned(), domains)
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{error}");
        assert!(!error.contains(value), "{error}");
    }
    let one = Secret::new("pw", "value-1234".into(), ["a.example"]).unwrap();
    assert!(!format!("{one:?}").contains("value-1234"));
    let twice = Secrets::new(vec![one.clone(), one]).unwrap_err();
    assert!(matches!(twice, SecretError::Duplicate { .. }));
}

#[test]
fn a_task_holding_secrets_must_be_scoped_over_them() {
    let s = Secrets::new(vec![
        Secret::new("pw", "value-1234".into(), ["login.shop.example"]).unwrap(),
    ])
    .unwrap();
    let covering = Scope::parse(["*.shop.example"], [] as [&str; 0]).unwrap();
    assert!(s.check_scope(&covering).is_ok());
    for scope in [
        Scope::default(),
        Scope::parse(["www.shop.example"], [] as [&str; 0]).unwrap(),
        Scope::parse(["*.shop.example"], ["login.shop.example"]).unwrap(),
    ] {
        let error = s.check_scope(&scope).unwrap_err().to_string();
        assert!(error.contains("`login.shop.example`"), "{error}");
    }
    assert!(s.get("pw").unwrap().belongs_to("login.shop.example"));
    assert!(!s.get("pw").unwrap().belongs_to("evil.example"));
    assert_eq!(placeholder_name(&placeholder("pw")), Some("pw"));
}

#[test]
fn values_learned_during_a_task_are_scrubbed_in_every_clone_from_then_on() {
    let secrets = Secrets::default();
    let held_by_the_worker = secrets.clone();
    let session = "lab-session-7f3a9c".to_owned();
    assert!(held_by_the_worker.scrub(&session).contains("7f3a9c"));
    secrets.learn(&[session.clone(), "en-US".to_owned(), "1".to_owned()]);
    let shown = held_by_the_worker.scrub("sid=lab-session-7f3a9c lang=en-US flag=1");
    assert_eq!(shown, "sid=[stored value] lang=en-US flag=1");
    // Encoded spellings too, and the set's Debug never prints a value.
    let encoded = base64::engine::general_purpose::STANDARD.encode(&session);
    assert!(!held_by_the_worker.scrub(&encoded).contains(&encoded));
    assert!(!format!("{held_by_the_worker:?}").contains("7f3a9c"));
    // Bounded: past the most a task learns, nothing more is added.
    let many: Vec<String> = (0..MAX_LEARNED_VALUES + 10)
        .map(|i| format!("value-{i:08}"))
        .collect();
    secrets.learn(&many);
    let last = many.last().unwrap();
    assert_eq!(held_by_the_worker.scrub(last), last.as_str());
    assert_eq!(held_by_the_worker.scrub(&many[0]), "[stored value]");
}

#[test]
fn a_file_carrying_a_secret_in_any_spelling_is_found_and_a_stored_value_is_not() {
    let value = "p@ss w\"rd<&>'é1";
    let s = secrets(value).hiding(&["stored-session-1234".to_owned()]);
    let percent = percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
        .to_string();
    let base64 = base64::engine::general_purpose::STANDARD.encode(value);
    for carrier in [
        format!("name,password\nme,{value}\n"),
        format!("%PDF-1.4 binary\x00 /URI (https://x/?p={percent})"),
        format!("exported: {base64}"),
    ] {
        assert!(s.found_in(carrier.as_bytes()), "{carrier}");
    }
    assert!(!s.found_in(b"session stored-session-1234 only"));
    assert!(!s.found_in(b"nothing here"));
}

/// What a hostile or careless page around a real sign-in showed the worker: the value upper-cased,
/// HTML-escaped, form-encoded, through `encodeURIComponent` and `escape()`, in a URL's query and
/// hash, and split into two halves read by two commands. Each is scrubbed.
#[test]
fn the_spellings_pages_make_of_a_value_are_scrubbed() {
    let value = "s3cr3t pa~ss&\"<w0rd";
    let s = secrets(value);
    for carrier in [
        "Welcome, S3CR3T PA~SS&\"<W0RD!",
        "<p>s3cr3t pa~ss&amp;&#34;&lt;w0rd</p>",
        "user=ada&password=s3cr3t+pa%7Ess%26%22%3Cw0rd",
        "https://login.example/next?p=s3cr3t%20pa~ss%26%22%3Cw0rd",
        "https://login.example/#v=s3cr3t%20pa%7Ess%26%22%3Cw0rd",
        "var p = \"s3cr3t pa~ss&\\\"\\u003cw0rd\";",
        "first half: s3cr3t pa.",
        "second half: ~ss&\"<w0rd.",
    ] {
        let clean = s.scrub(carrier);
        assert!(clean.contains("[secret:pw]"), "{carrier} → {clean}");
        for piece in ["s3cr3t pa", "S3CR3T", "w0rd", "W0RD"] {
            assert!(!clean.contains(piece), "{carrier} → {clean}");
        }
    }
    // What is not the value stays.
    assert_eq!(
        s.scrub("a secret password field"),
        "a secret password field"
    );
}
