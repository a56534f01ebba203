//! Session state over `POST /v1/tasks` (curl) and MCP (the Python SDK): a state handed back on
//! request, a named context kept per token (a second token's context of the same name is its
//! own), and a state outside the scope refused naming its entry.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use airlock_testkit::dns::dns;
use airlock_testkit::login::{SESSION, login_site, sign_in_turns};

use super::*;

const OTHER_TOKEN: &str = "second-token-abcdef0123456";

#[allow(clippy::too_many_lines)]
#[test]
fn a_state_comes_back_on_request_and_a_context_is_kept_per_token() {
    if !docker_ready() {
        return;
    }
    let password = "context-pa55word";
    let (port, posted) = login_site("member", password, "");
    let resolver = dns(HashMap::from([("shop.lab", vec![Ipv4Addr::LOCALHOST])]));
    let dir = tempfile::tempdir().unwrap();
    let contexts = dir.path().join("contexts");
    let call = |args: Value| json!({"name": "agent_browser", "input": {"args": args}});
    let shop = format!("http://shop.lab:{port}");
    let account = |expect: &str, report: &str| {
        vec![
            json!({"tool_calls": [call(json!(["open", format!("{shop}/account")]))]}),
            json!({"tool_calls": [call(json!(["get", "title"]))]}),
            json!({"expect": {"shown_contains": [expect]}, "text": report}),
        ]
    };
    let mut turns = sign_in_turns(&format!("{shop}/login"), "pw");
    turns.push(json!({"text": "signed in"}));
    turns.extend(account("Account", "the context kept the session"));
    turns.extend(account("Sign in", "another token's context is its own"));
    let served = Served::start_with_env(
        &[
            "serve".to_owned(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--model".to_owned(),
            format!("script:{}", {
                let path = dir.path().join("script.json");
                std::fs::write(&path, json!({"turns": turns}).to_string()).unwrap();
                path.display().to_string()
            }),
            "--pool-size".to_owned(),
            "0".to_owned(),
            "--allow".to_owned(),
            format!("127.0.0.1:{port}"),
            "--nameserver".to_owned(),
            format!("127.0.0.1:{resolver}"),
            "--allowed-domain".to_owned(),
            "shop.lab".to_owned(),
        ],
        &format!("{TOKEN},{OTHER_TOKEN}"),
        &[("AIRLOCK_CONTEXTS_DIR", contexts.to_str().unwrap())],
    );
    // Signed in with an inline secret, into context `shop`, with the state handed back too.
    let (status, result) = curl_task(
        &served,
        TOKEN,
        &json!({"task": "Sign in", "context": "shop", "return_state": true,
                "secrets": [{"name": "pw", "value": password, "domains": ["shop.lab"]}]}),
    );
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["report"], "signed in", "{result}");
    let cookies = result["state"]["cookies"].as_array().unwrap();
    assert!(
        cookies.iter().any(|c| format!(
            "{}={}",
            c["name"].as_str().unwrap(),
            c["value"].as_str().unwrap()
        ) == SESSION),
        "{result}"
    );
    // The same token's next task starts signed in; the other token's `shop` is another context.
    // Over MCP (the Python SDK), with the same token: the calling agent never sees the state.
    let asked = json!({"task": "Read", "context": "shop"}).to_string();
    let headers = json!({"Authorization": format!("Bearer {TOKEN}")});
    let result = sdk_call(&served, &headers, &asked);
    assert_eq!(
        result["texts"][0], "the context kept the session",
        "{result}"
    );
    let session_value = SESSION.split('=').nth(1).unwrap();
    assert!(!result.to_string().contains(session_value), "{result}");
    let (status, result) = curl_task(
        &served,
        OTHER_TOKEN,
        &json!({"task": "Read", "context": "shop"}),
    );
    assert_eq!(status, 200, "{result}");
    assert_eq!(
        result["report"], "another token's context is its own",
        "{result}"
    );
    assert_eq!(posted.lock().unwrap().len(), 1, "signed in more than once");
    // Stored owner-only, under a digest of each token, never the token itself.
    let owners: Vec<String> = std::fs::read_dir(&contexts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(owners.len(), 2, "{owners:?}");
    assert!(
        owners
            .iter()
            .all(|o| o.starts_with("token-") && !o.contains(TOKEN))
    );
    // A state outside the scope, and a state with a context, are refused before anything runs.
    let outside = json!({"task": "Go", "state": {"cookies": [
        {"name": "t", "value": "v-1234567", "domain": "tracker.lab"}]}});
    let (status, body) = curl_task(&served, TOKEN, &outside);
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("cookie `t` for tracker.lab") && !error.contains("v-1234567"),
        "{error}"
    );
    let both = json!({"task": "Go", "context": "shop", "state": {"cookies": []}});
    assert_eq!(curl_task(&served, TOKEN, &both).0, 400);
    assert_eq!(containers_of(served.child.id()).len(), 0);
}
