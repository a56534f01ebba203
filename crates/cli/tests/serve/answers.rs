//! Structured answers over MCP HTTP with the official Python SDK: `browser_task` with an
//! `output_schema` reads a real page in a real browser, its worker's first answer misses the
//! schema and is told where, and the result's structured content carries the matching `data`.

use super::*;

#[test]
fn the_python_mcp_sdk_gets_the_answer_as_structured_content() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Opening hours", "Open from 9 to 17 on weekdays.");
    let dir = tempfile::tempdir().unwrap();
    let answer = |hours: Value| json!({"name": "give_answer", "input": {"data": {"opens": hours, "closes": 17}, "report": "From the page."}});
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"expect": {"shown_contains": ["✓ Opening hours"]}, "tool_calls": [answer(json!("nine"))]},
        {"expect": {"shown_contains": ["at `data/opens`", "2 more tries allowed"]}, "tool_calls": [answer(json!(9))]}
    ]});
    let served = serve(
        &script,
        dir.path(),
        &["--allow", &format!("127.0.0.1:{port}")],
    );
    let arguments = json!({
        "task": "When does the shop open and close?",
        "output_schema": {
            "type": "object",
            "properties": {"opens": {"type": "integer"}, "closes": {"type": "integer"}},
            "required": ["opens", "closes"],
            "additionalProperties": false
        }
    });
    let headers = json!({"Authorization": format!("Bearer {TOKEN}")});
    let result = sdk_call(&served, &headers, &arguments.to_string());
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(
        result["structured"]["data"],
        json!({"opens": 9, "closes": 17}),
        "{result}"
    );
    assert_eq!(result["structured"]["ended"], "completed");
    assert_eq!(result["texts"][0], "From the page.");
    assert!(
        result["texts"][1].as_str().unwrap().contains("\"opens\":9"),
        "{result}"
    );
    // The task's record keeps the answer, and its page shows it.
    let links = &result["structured"]["links"];
    let (status, record) = request(
        served.port,
        "GET",
        links["record"].as_str().unwrap(),
        &[&bearer()],
        "",
    );
    assert_eq!(status, 200, "{record}");
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(
        record["data"],
        json!({"opens": 9, "closes": 17}),
        "{record}"
    );
    let (status, page) = request(
        served.port,
        "GET",
        links["record_html"].as_str().unwrap(),
        &[&bearer()],
        "",
    );
    assert_eq!(status, 200);
    assert!(page.contains("id=\"answer\""), "{page}");

    // A schema that is not one is refused before any browser starts, naming the field.
    let bad = json!({"task": "x", "output_schema": {"type": "integr"}});
    let refused = sdk_call(&served, &headers, &bad.to_string());
    let said = refused.to_string();
    assert!(
        said.contains("output_schema is not a JSON Schema"),
        "{said}"
    );
}
