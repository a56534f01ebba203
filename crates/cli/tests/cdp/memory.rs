//! What a hostile CDP client's largest messages cost the server: its peak resident memory.

use super::*;

/// How far the server's peak resident memory may rise above its peak with a lease open, while
/// one client sends the largest messages the server takes and asks for a large answer. A 32 MiB
/// client message is held as its frame and its text, then moved into the command; a browser
/// answer (bounded at 64 MiB) is held as it arrives and once more as the frame to the client.
/// Measured: 207–239 MiB; the bound leaves room for the allocator's slack. Parsing the 32 MiB of
/// zeros into values instead (no element bound) measured 687 MiB.
const MAX_PEAK_GROWTH_MIB: u64 = 384;

#[test]
fn a_hostile_clients_largest_messages_keep_the_servers_peak_memory_bounded() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (served, _dir) = start(&sites, false, &["--cdp-pool-size", "0"]);
    let url = format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port);
    let client = RawClient::open(&url, "hostile");
    let leased_kib = served.peak_rss_kib();
    let out = client.go();
    let peak_kib = served.peak_rss_kib();
    let growth_mib = peak_kib.saturating_sub(leased_kib) / 1024;
    eprintln!(
        "peak resident memory: {} MiB with a lease open, {} MiB after the hostile messages (+{growth_mib} MiB)",
        leased_kib / 1024,
        peak_kib / 1024
    );
    assert!(
        growth_mib <= MAX_PEAK_GROWTH_MIB,
        "the server's peak grew by {growth_mib} MiB, over {MAX_PEAK_GROWTH_MIB} MiB"
    );
    for round in 0..3 {
        let zeros = &out["zeros"][round];
        assert_eq!(zeros["error"]["code"], -32600, "{zeros}");
        assert!(
            zeros["error"]["message"]
                .as_str()
                .unwrap()
                .contains("JSON elements"),
            "{zeros}"
        );
        assert_eq!(
            out["script"][round]["result"]["result"]["type"], "number",
            "the long script reached the browser: {}",
            out["script"][round]
        );
        assert_eq!(
            out["answer"][round],
            48 * 1024 * 1024,
            "the large answer came back whole"
        );
    }
    served.wait_for_log("a CDP lease ended");
}
