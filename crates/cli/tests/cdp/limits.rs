//! A lease's limits: a browser that stops taking messages, and a client that never stops.

use super::*;

#[test]
fn a_browser_that_stops_taking_messages_ends_its_lease_at_the_idle_limit() {
    if !docker_ready() {
        return;
    }
    let since = std::time::SystemTime::now();
    let sites = sites();
    let (served, _dir) = start(
        &sites,
        false,
        &["--cdp-pool-size", "0", "--cdp-idle-timeout", "5"],
    );
    let url = format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port);
    let client = RawClient::open(&url, "flood");
    let leased = containers_of(served.child.id());
    assert_eq!(leased.len(), 1, "{leased:?}");
    // Frozen, Chromium stops reading its pipe: the writes back up to the server.
    assert!(
        Command::new("docker")
            .args(["pause", &leased[0]])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success()
    );
    let out = client.go();
    assert_eq!(out["closed"]["code"], 1011, "{out}");
    assert!(
        out["closed"]["reason"]
            .as_str()
            .unwrap()
            .contains("took no message"),
        "{out}"
    );
    served.wait_for_log("a CDP lease ended");
    let metrics = served.metrics(TOKEN);
    assert_eq!(
        metric(
            &metrics,
            "airlock_cdp_leases_ended_total{reason=\"browser_stuck\"}"
        ),
        1,
        "{metrics}"
    );
    assert!(
        wait_until_removed(&leased[0], since, std::time::Duration::from_secs(30)),
        "the frozen browser's container was not removed"
    );
}

#[test]
fn a_lease_ends_at_its_time_limit_even_when_busy() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (served, _dir) = start(
        &sites,
        false,
        &[
            "--cdp-pool-size",
            "0",
            "--cdp-timeout",
            "10",
            "--cdp-idle-timeout",
            "5",
        ],
    );
    let url = format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port);
    // A message every second keeps it from idling; the lease's own limit still ends it.
    let out = printed(&node("cdp_raw.js").args([&url, "busy"]).output().unwrap());
    assert_eq!(out["closed"]["code"], 1008, "{out}");
    assert!(
        out["closed"]["reason"]
            .as_str()
            .unwrap()
            .contains("--cdp-timeout"),
        "{out}"
    );
    served.wait_for_log("a CDP lease ended");
    assert!(containers_of(served.child.id()).is_empty());
}
