//! Secrets over MCP HTTP (the official Python SDK, by name) and `POST /v1/tasks` (curl, inline),
//! held to what each token may use; no value comes back in any answer.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use airlock_testkit::dns::dns;
use airlock_testkit::login::{login_site, sign_in_turns};

use super::*;

const LIMITED_TOKEN: &str = "limited-token-0123456789abcdef";

fn sign_in(name: &str, port: u16, report: &str) -> Vec<Value> {
    let call = |args: Value| json!({"name": "agent_browser", "input": {"args": args}});
    let mut turns = sign_in_turns(&format!("http://shop.lab:{port}/login"), name);
    turns.push(json!({"tool_calls": [call(json!(["get", "text", "#welcome"]))]}));
    turns.push(json!({"expect": {"shown_contains": ["Welcome back, member"]}, "text": report}));
    turns
}

// One server takes every case: a test per case would start a server each.
#[allow(clippy::too_many_lines)]
#[test]
fn secrets_are_named_over_mcp_given_inline_to_the_json_api_and_held_to_each_token() {
    if !docker_ready() {
        return;
    }
    let password = "served-pa55 word&more";
    let (port, posted) = login_site("member", password, "");
    let resolver = dns(HashMap::from([("shop.lab", vec![Ipv4Addr::LOCALHOST])]));
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("pw");
    std::fs::write(&secret_file, password).unwrap();
    let tokens_file = dir.path().join("tokens");
    std::fs::write(&tokens_file, format!("{LIMITED_TOKEN} secrets=\n")).unwrap();
    let mut turns = sign_in("shop_pw", port, "signed in over MCP");
    turns.extend(sign_in("inline_pw", port, "signed in over the JSON API"));
    let served = serve(
        &json!({"turns": turns}),
        dir.path(),
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
            "--allowed-domain",
            "shop.lab",
            "--secret",
            &format!("shop_pw@shop.lab=file:{}", secret_file.display()),
            "--tokens-file",
            tokens_file.to_str().unwrap(),
        ],
    );
    let good = json!({"Authorization": format!("Bearer {TOKEN}")});
    let limited = json!({"Authorization": format!("Bearer {LIMITED_TOKEN}")});
    let asked = json!({"task": "Sign in", "secrets": ["shop_pw"]}).to_string();

    // A token whose line lists no secrets may name none; an unknown name is refused with the
    // names the caller may use.
    let refused = sdk_call(&served, &limited, &asked);
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["texts"][0]
            .as_str()
            .unwrap()
            .contains("secret `shop_pw` is not one this caller may use (known: none)"),
        "{refused}"
    );
    let unknown = json!({"task": "Sign in", "secrets": ["nope"]}).to_string();
    let refused = sdk_call(&served, &good, &unknown);
    assert!(
        refused["texts"][0]
            .as_str()
            .unwrap()
            .contains("(known: shop_pw)"),
        "{refused}"
    );

    // By name over MCP: signed in, the site got the exact password, the answer holds no value.
    let result = sdk_call(&served, &good, &asked);
    assert_eq!(result["texts"][0], "signed in over MCP", "{result}");
    assert_eq!(posted.lock().unwrap().last().unwrap()["password"], password);
    assert!(!result.to_string().contains(password), "{result}");

    // Inline over the JSON API: sites outside the scope are refused, in-scope ones work.
    let outside = json!({"task": "Sign in", "secrets": [
        {"name": "inline_pw", "value": password, "domains": ["evil.lab"]}]});
    let (status, body) = curl_task_text(&served, TOKEN, &outside);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("`evil.lab`") && !body.contains(password),
        "{body}"
    );
    let inline = json!({"task": "Sign in", "secrets": [
        {"name": "inline_pw", "value": password, "domains": ["shop.lab"]}]});
    let (status, body) = curl_task_text(&served, TOKEN, &inline);
    assert_eq!(status, 200, "{body}");
    let result: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(result["report"], "signed in over the JSON API", "{result}");
    assert!(
        !body.contains(password) && !body.contains("pa55%20word"),
        "{body}"
    );
    assert_eq!(posted.lock().unwrap().len(), 2);
    assert_eq!(containers_of(served.child.id()).len(), 0);
    // The server's log carries no value either.
    let log = served.log.lock().unwrap().clone();
    assert!(
        !log.contains(password),
        "the server's log holds the password"
    );
}
