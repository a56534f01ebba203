//! A task's scope over MCP HTTP (the official Python SDK) and `POST /v1/tasks` (curl), held to
//! the server's ceiling.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use airlock_testkit::dns::dns;
use airlock_testkit::site::site;

use super::*;

const SCOPED_TOKEN: &str = "scoped-token-0123456789abcdef";

// One server takes every case: a test per case would start a server each.
#[allow(clippy::too_many_lines)]
#[test]
fn a_scope_asked_over_mcp_and_the_json_api_is_enforced_and_held_to_the_servers_ceiling() {
    if !docker_ready() {
        return;
    }
    let (cdn, heard_by_cdn) =
        site(|_| HashMap::from([("/", ("200 OK", String::new(), "cdn".to_owned()))]));
    let (port, _) = site(|_| {
        let body = format!(
            "<title>Shop</title><p>shop page</p><img src=\"http://cdn.lab:{cdn}/pixel.png\">"
        );
        HashMap::from([("/", ("200 OK", String::new(), body))])
    });
    let resolver = dns(HashMap::from([
        ("shop.lab", vec![Ipv4Addr::LOCALHOST]),
        ("cdn.lab", vec![Ipv4Addr::LOCALHOST]),
    ]));
    let dir = tempfile::tempdir().unwrap();
    // A token of its own, confined to the shop inside the server's ceiling.
    let tokens_file = dir.path().join("tokens");
    std::fs::write(
        &tokens_file,
        format!("# scoped\n{SCOPED_TOKEN} allowed_domains=shop.lab\n"),
    )
    .unwrap();
    let open = json!({"name": "agent_browser", "input": {"args": ["open", format!("http://shop.lab:{port}/")]}});
    let wait = json!({"name": "agent_browser", "input": {"args": ["wait", "1500"]}});
    let told = "Scope: this task may reach only shop.lab, except admin.corp.lab.";
    let task_turns = |report: &str| {
        json!([
            {"expect": {"system_contains": [told]}, "tool_calls": [open]},
            {"expect": {"shown_contains": ["Shop"]}, "tool_calls": [wait]},
            {"text": report}
        ])
    };
    let mut turns = task_turns("seen over MCP").as_array().unwrap().clone();
    turns.extend(
        task_turns("seen over the JSON API")
            .as_array()
            .unwrap()
            .clone(),
    );
    let served = serve(
        &json!({"turns": turns}),
        dir.path(),
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--allow",
            &format!("127.0.0.1:{cdn}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
            "--allowed-domain",
            "shop.lab,cdn.lab,*.corp.lab",
            "--blocked-domain",
            "admin.corp.lab",
            "--tokens-file",
            tokens_file.to_str().unwrap(),
        ],
    );
    let good = json!({"Authorization": format!("Bearer {TOKEN}")});

    // Over MCP: narrowed to shop.lab, so the page's CDN image is refused though the server allows it.
    let asked = json!({"task": "Read the shop", "allowed_domains": ["shop.lab"]});
    let result = sdk_call(&served, &good, &asked.to_string());
    assert_eq!(result["texts"][0], "seen over MCP", "{result}");
    let structured = &result["structured"];
    assert_eq!(structured["scope"]["allowed_domains"], json!(["shop.lab"]));
    assert_eq!(
        structured["scope"]["blocked_domains"],
        json!(["admin.corp.lab"])
    );
    assert_eq!(
        structured["egress_refusals"][0]["target"],
        format!("http://cdn.lab:{cdn}/pixel.png"),
        "{result}"
    );
    assert_eq!(structured["egress_refusals"][0]["class"], "out-of-scope");

    // Beyond the ceiling: refused with the entry, before any browser starts.
    for (allowed, says) in [
        ("evil.lab", "`evil.lab` is beyond what the server allows"),
        (
            "admin.corp.lab",
            "`admin.corp.lab` is blocked by the server",
        ),
        ("*.lab", "top-level domain"),
    ] {
        let asked = json!({"task": "Go", "allowed_domains": [allowed]});
        let refused = sdk_call(&served, &good, &asked.to_string());
        assert_eq!(refused["is_error"], true, "{refused}");
        let text = refused["texts"][0].as_str().unwrap();
        assert!(text.contains(says), "{allowed}: {text}");
        let (status, body) = curl_task(&served, TOKEN, &asked);
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }

    // The scoped token may not ask for what the server would give another token.
    let (status, body) = curl_task(
        &served,
        SCOPED_TOKEN,
        &json!({"task": "Go", "allowed_domains": ["cdn.lab"]}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("`cdn.lab` is beyond what this token allows (shop.lab)"),
        "{body}"
    );
    // Over the JSON API, a task that asks nothing gets its token's ceiling.
    let (status, result) = curl_task(&served, SCOPED_TOKEN, &json!({"task": "Read the shop"}));
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["report"], "seen over the JSON API");
    assert_eq!(result["scope"]["allowed_domains"], json!(["shop.lab"]));
    assert_eq!(
        result["egress_refusals_by_class"]["out-of-scope"], 1,
        "{result}"
    );
    assert!(
        heard_by_cdn.lock().unwrap().is_empty(),
        "the CDN was reached out of scope"
    );

    let (_, schema) = request(served.port, "GET", "/v1/schema", &[&bearer()], "");
    let schema: Value = serde_json::from_str(&schema).unwrap();
    let properties = &schema["request"]["properties"];
    assert!(
        properties["allowed_domains"]["description"].is_string(),
        "{schema}"
    );
    assert!(properties["blocked_domains"].is_object(), "{schema}");
    assert!(
        schema["response"]["properties"]["scope"].is_object(),
        "{schema}"
    );
    assert_eq!(containers_of(served.child.id()).len(), 0);
}
