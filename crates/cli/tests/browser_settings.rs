//! A task's browser settings, read back from a real page in the sealed browser: the
//! `Accept-Language` the lab heard, and `navigator.language`, the time zone, the viewport (and a
//! device's touch), the colour scheme and the geolocation the page itself saw. The worker cannot set again
//! what the caller fixed, and the record keeps the settings. Needs Docker, the image and a
//! non-root user; `cargo xtask integration` runs it with those required.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::Command;

use airlock_testkit::docker::docker_ready;
use airlock_testkit::site::site;
use serde_json::{Value, json};

/// The page writes what it sees into `#seen` and its title becomes `ready` once the
/// geolocation request is answered (or refused).
const PAGE: &str = r"<html><head><meta name='viewport' content='width=device-width'><title>waiting</title></head><body><p id='seen'>nothing yet</p><script>
const parts = [
  'lang=' + navigator.language,
  'tz=' + Intl.DateTimeFormat().resolvedOptions().timeZone,
  'width=' + innerWidth,
  'dark=' + matchMedia('(prefers-color-scheme: dark)').matches,
  'touch=' + navigator.maxTouchPoints,
  'coarse=' + matchMedia('(pointer: coarse)').matches,
  'hover=' + !matchMedia('(hover: none)').matches,
  'touchstart=' + ('ontouchstart' in window),
];
const done = (place) => {
  document.getElementById('seen').textContent = parts.concat([place]).join(' ');
  document.title = 'ready';
};
navigator.geolocation.getCurrentPosition(
  (p) => done('geo=' + p.coords.latitude + ',' + p.coords.longitude),
  (e) => done('geo-refused=' + e.code),
  { timeout: 10000 });
</script></body></html>";

/// Runs `airlock task` with `flags` on the lab page; the scripted worker reads the page (and, if
/// `new_tab`, the page again in a tab it opens), is shown `expected` each time, then tries
/// `set_again` and is shown `refused`.
fn run_task(
    flags: &[&str],
    expected: &[String],
    new_tab: bool,
    set_again: &[&str],
    refused: &str,
) -> (Value, Vec<Option<String>>, tempfile::TempDir) {
    let (port, seen) = site(|_| HashMap::from([("/", ("200 OK", String::new(), PAGE.to_owned()))]));
    let url = format!("http://127.0.0.1:{port}/");
    let dir = tempfile::tempdir().unwrap();
    let call = |args: Value| json!([{"name": "agent_browser", "input": {"args": args}}]);
    let read = [
        json!({"tool_calls": call(json!(["wait", "--fn", "document.title === 'ready'"]))}),
        json!({"tool_calls": call(json!(["get", "text", "#seen"]))}),
    ];
    let mut turns = vec![json!({"tool_calls": call(json!(["open", url]))})];
    turns.extend(read.clone());
    if new_tab {
        turns.push(json!({"expect": {"shown_contains": expected}, "tool_calls": call(json!(["tab", "new", url]))}));
        turns.extend(read);
    }
    turns.push(
        json!({"expect": {"shown_contains": expected}, "tool_calls": call(json!(set_again))}),
    );
    turns.push(
        json!({"expect": {"shown_contains": [refused]}, "text": "The page saw the settings."}),
    );
    let script = json!({ "turns": turns });
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let record = dir.path().join("record");
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args(["task", "Read what the page sees", "--url", &url, "--json"])
        .args(["--model", &format!("script:{}", script_path.display())])
        .args(["--allow", &format!("127.0.0.1:{port}")])
        .arg("--record")
        .arg(&record)
        .args(flags)
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "completed", "{result}");
    let languages = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|heard| heard.path == "/")
        .map(|heard| heard.accept_language.clone())
        .collect();
    let record: Value =
        serde_json::from_slice(&std::fs::read(record.join("record.json")).unwrap()).unwrap();
    (record, languages, dir)
}

#[test]
fn the_page_sees_the_locale_zone_viewport_scheme_and_place_the_caller_set() {
    if !docker_ready() {
        return;
    }
    let flags = [
        "--viewport",
        "812x640",
        "--locale",
        "fr-FR",
        "--time-zone",
        "Asia/Tokyo",
        "--geolocation",
        "48.8566,2.3522",
        "--color-scheme",
        "dark",
    ];
    let expected = [
        "lang=fr-FR",
        "tz=Asia/Tokyo",
        "width=812",
        "dark=true",
        "geo=48.8566,2.3522",
        // A viewport is a desktop's: no touch, a fine pointer (the container has no mouse, so
        // whether it can hover is Chromium's guess).
        "touch=0 coarse=false",
        "touchstart=false",
    ]
    .map(str::to_owned);
    let (record, languages, _dir) = run_task(
        &flags,
        &expected,
        false,
        &["set", "media", "light"],
        "the colour scheme is fixed for this task",
    );
    assert!(!languages.is_empty());
    for language in &languages {
        assert!(
            language
                .as_deref()
                .is_some_and(|l| l.starts_with("fr-FR,fr")),
            "{languages:?}"
        );
    }
    assert_eq!(
        record["browser"],
        json!({
            "viewport": {"width": 812, "height": 640},
            "locale": "fr-FR",
            "time_zone": "Asia/Tokyo",
            "geolocation": {"latitude": 48.8566, "longitude": 2.3522},
            "color_scheme": "dark"
        })
    );
}

#[test]
fn a_device_sets_its_viewport_and_the_defaults_stay_otherwise() {
    if !docker_ready() {
        return;
    }
    // Pixel 7's CSS width and user agent's scale, and touch (a phone's five points, a coarse
    // pointer that cannot hover, touch events), on the first page and in a tab opened later;
    // the browser's own language, zone and scheme otherwise; with no position set, a page asking
    // for one gets none (the container has no position of its own).
    let expected = [
        "lang=en-US",
        "tz=UTC",
        "width=412",
        "dark=false",
        "touch=5 coarse=true hover=false touchstart=true",
        "geo-refused=",
    ]
    .map(str::to_owned);
    let (record, languages, _dir) = run_task(
        &["--device", "pixel 7"],
        &expected,
        true,
        &["set", "viewport", "1280", "720"],
        "the viewport is fixed for this task",
    );
    assert!(
        languages
            .iter()
            .all(|l| l.as_deref().is_none_or(|l| l.starts_with("en-US"))),
        "{languages:?}"
    );
    assert_eq!(record["browser"], json!({"device": "Pixel 7"}));
}

#[test]
fn browse_takes_a_viewport_and_its_screenshot_has_its_device_pixels() {
    if !docker_ready() {
        return;
    }
    let (port, _) = site(|_| HashMap::from([("/", ("200 OK", String::new(), PAGE.to_owned()))]));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shots");
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args(["browse", &format!("http://127.0.0.1:{port}/")])
        .args(["--allow", &format!("127.0.0.1:{port}")])
        .args(["--viewport", "500x400@2", "--out"])
        .arg(&out)
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let shot = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "png"))
        .expect("a screenshot");
    let png = std::fs::read(shot).unwrap();
    // The PNG header's IHDR: width and height, big-endian, at bytes 16 and 20.
    let side = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((side(16), side(20)), (1000, 800));

    // A viewport over the ceiling is bad input, named, before any browser starts.
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args(["browse", &format!("http://127.0.0.1:{port}/")])
        .args(["--viewport", "500x400", "--max-viewport", "400x400"])
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--viewport 500x400 is out of range") && stderr.contains("400x400"),
        "{stderr}"
    );
}
