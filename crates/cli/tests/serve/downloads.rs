//! Downloads over `POST /v1/tasks` (curl) and MCP HTTP (the official Python SDK): a request may
//! ask for what the operator allows and no more, and the files come back typed, whole.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use airlock_testkit::dns::dns;
use airlock_testkit::files::{files_site, report_pdf};
use base64::Engine;

use super::*;

fn download_pdf(port: u16, report: &str) -> Vec<Value> {
    let call = |args: Value| json!({"name": "agent_browser", "input": {"args": args}});
    vec![
        json!({"tool_calls": [call(json!(["open", format!("http://files.lab:{port}/")]))]}),
        json!({"tool_calls": [call(json!(["download", "#pdf", "report.pdf"]))]}),
        json!({"expect": {"shown_contains": ["Downloaded report.pdf"]}, "text": report}),
    ]
}

#[test]
fn downloads_come_back_over_the_json_api_and_mcp_within_what_the_operator_allows() {
    if !docker_ready() {
        return;
    }
    let (port, _) = files_site();
    let resolver = dns(HashMap::from([("files.lab", vec![Ipv4Addr::LOCALHOST])]));
    let dir = tempfile::tempdir().unwrap();
    let mut turns = download_pdf(port, "downloaded over the JSON API");
    turns.extend(download_pdf(port, "downloaded over MCP"));
    let served = serve(
        &json!({"turns": turns}),
        dir.path(),
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
            "--allowed-domain",
            "files.lab",
            "--max-download-bytes",
            "102400",
        ],
    );
    let pdf = base64::engine::general_purpose::STANDARD.encode(report_pdf());

    // More than the operator allows is refused, never narrowed.
    let greedy = json!({"task": "Fetch the report", "max_download_bytes": 200_000});
    let (status, body) = curl_task_text(&served, TOKEN, &greedy);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("max_download_bytes 200000 is over the 102400 bytes this server allows"),
        "{body}"
    );

    let asked = json!({"task": "Fetch the report", "max_download_bytes": 102_400});
    let (status, result) = curl_task(&served, TOKEN, &asked);
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["report"], "downloaded over the JSON API", "{result}");
    let file = &result["downloads"][0];
    assert_eq!(
        (&file["name"], &file["media_type"]),
        (&json!("report.pdf"), &json!("application/pdf")),
        "{result}"
    );
    assert_eq!(file["data"], pdf, "the API's file is not the site's bytes");

    let headers = json!({"Authorization": format!("Bearer {TOKEN}")});
    let answer = sdk_call(&served, &headers, &asked.to_string());
    assert_eq!(answer["texts"][0], "downloaded over MCP", "{answer}");
    let resource = &answer["resources"][0];
    assert_eq!(
        resource["uri"], "airlock://downloads/report.pdf",
        "{answer}"
    );
    assert_eq!(resource["mime_type"], "application/pdf", "{answer}");
    assert_eq!(
        resource["blob"], pdf,
        "the MCP file is not the site's bytes"
    );
    assert_eq!(
        answer["structured"]["downloads"][0]["name"], "report.pdf",
        "{answer}"
    );

    let (_, schema) = request(served.port, "GET", "/v1/schema", &[&bearer()], "");
    let schema: Value = serde_json::from_str(&schema).unwrap();
    assert!(
        schema["request"]["properties"]["max_download_bytes"].is_object(),
        "{schema}"
    );
    assert!(
        schema["response"]["properties"]["downloads"].is_object(),
        "{schema}"
    );
    assert_eq!(containers_of(served.child.id()).len(), 0);
}
