//! Both HTTP backends against a local server that checks the exact request bodies and replays
//! recorded answers: tool calls, images, errors and 429s.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_models::{
    AnthropicModel, BackendError, BackendOptions, OpenAiModel, RetryPolicy, Thinking,
};
use airlock_worker::{
    AssistantTurn, Content, Image, Message, Model, ModelRequest, ToolCall, ToolDefinition,
    ToolResult,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "sk-test-0123456789abcdefghijklmnop";

#[derive(Default)]
struct Seen {
    bodies: Vec<Value>,
    headers: Vec<String>,
}

/// Answers each request with the next `(status, extra headers, body)`.
async fn server(answers: Vec<(u16, &'static str, Value)>) -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        for (status, extra, body) in answers {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut data = Vec::new();
            let mut buf = [0_u8; 4096];
            let (head, length) = loop {
                let n = stream.read(&mut buf).await.unwrap();
                data.extend_from_slice(&buf[..n]);
                if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&data[..end]).to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    data.drain(..end + 4);
                    break (head, length);
                }
            };
            while data.len() < length {
                let n = stream.read(&mut buf).await.unwrap();
                data.extend_from_slice(&buf[..n]);
            }
            {
                let mut seen = record.lock().unwrap();
                seen.bodies.push(serde_json::from_slice(&data).unwrap());
                seen.headers.push(head.to_ascii_lowercase());
            }
            let text = body.to_string();
            let response = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{text}",
                text.len()
            );
            stream.write_all(response.as_bytes()).await.unwrap();
        }
    });
    (base, seen)
}

fn options(base: &str) -> BackendOptions {
    BackendOptions {
        base_url: Some(base.to_owned()),
        thinking: Thinking::Off,
        max_tokens: 1000,
        request_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            attempts: 3,
            first_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
        },
    }
}

/// A conversation with a tool call and a screenshot result.
fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a browser worker.".into(),
        messages: vec![
            Message::User {
                content: vec![Content::text("Task: read the page")],
            },
            Message::Assistant {
                turn: AssistantTurn {
                    text: "Opening.".into(),
                    tool_calls: vec![ToolCall {
                        id: "call-1".into(),
                        name: "agent_browser".into(),
                        input: json!({"args": ["screenshot"]}),
                    }],
                    ..AssistantTurn::default()
                },
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    call_id: "call-1".into(),
                    content: vec![
                        Content::text("Done."),
                        Content::Image {
                            image: Image::png(vec![137, 80, 78, 71]),
                        },
                    ],
                    is_error: false,
                }],
            },
        ],
        tools: vec![ToolDefinition {
            name: "agent_browser".into(),
            description: "Run one command.".into(),
            input_schema: json!({"type": "object", "properties": {"args": {"type": "array"}}}),
        }],
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn anthropic_request_shape_tool_calls_and_a_retried_429() {
    let answer = json!({"content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "Clicking."},
        {"type": "tool_use", "id": "toolu_1", "name": "agent_browser", "input": {"args": ["click", "@e1"]}},
    ]});
    let (base, seen) = server(vec![
        (
            429,
            "retry-after: 0\r\n",
            json!({"error": {"message": "rate limited"}}),
        ),
        (200, "", answer),
    ])
    .await;
    let model = AnthropicModel::new(
        "claude-test",
        KEY,
        BackendOptions {
            thinking: Thinking::Low,
            ..options(&base)
        },
    )
    .unwrap();
    let turn = model.next_turn(request()).await.unwrap();
    assert_eq!(turn.text, "Clicking.");
    assert_eq!(turn.tool_calls[0].id, "toolu_1");
    assert_eq!(turn.tool_calls[0].input, json!({"args": ["click", "@e1"]}));
    assert_eq!(turn.opaque.len(), 1, "thinking is kept to send back");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.bodies.len(), 2, "the 429 was retried");
    assert!(seen.headers[1].contains(&format!("x-api-key: {}", KEY.to_ascii_lowercase())));
    assert!(seen.headers[1].contains("anthropic-version: 2023-06-01"));
    insta::assert_json_snapshot!(seen.bodies[1]);
}

#[tokio::test]
async fn openai_request_shape_tool_calls_and_images_after_tool_messages() {
    let answer = json!({"choices": [{"message": {"content": null, "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "agent_browser", "arguments": "{\"args\":[\"snapshot\"]}"}}
    ]}}]});
    let (base, seen) = server(vec![
        (503, "", json!({"error": {"message": "overloaded"}})),
        (200, "", answer),
    ])
    .await;
    let model = OpenAiModel::new(
        "gpt-test",
        Some(KEY),
        BackendOptions {
            thinking: Thinking::High,
            ..options(&base)
        },
    )
    .unwrap();
    let turn = model.next_turn(request()).await.unwrap();
    assert_eq!(turn.tool_calls[0].name, "agent_browser");
    assert_eq!(turn.tool_calls[0].input, json!({"args": ["snapshot"]}));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.bodies.len(), 2, "the 503 was retried");
    assert!(seen.headers[1].contains(&format!(
        "authorization: bearer {}",
        KEY.to_ascii_lowercase()
    )));
    insta::assert_json_snapshot!(seen.bodies[1]);
}

#[test]
fn anthropic_marks_the_shared_instructions_and_the_newest_block_for_its_cache() {
    let model = AnthropicModel::new("claude-test", KEY, options("http://127.0.0.1:9")).unwrap();
    let body = model.body(&request());
    let ephemeral = json!({"type": "ephemeral"});
    // Tools and system come first in the cache's order: one mark after the system prompt
    // lets every task read both.
    assert_eq!(body["system"][0]["text"], "You are a browser worker.");
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    // The conversation: the newest block is marked, so the next turn reads all before it.
    let messages = body["messages"].as_array().unwrap();
    let newest = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(newest.last().unwrap()["type"], "tool_result");
    assert_eq!(newest.last().unwrap()["cache_control"], ephemeral);
    let marks = body.to_string().matches("cache_control").count();
    assert_eq!(marks, 2, "the API allows four marks; two are all it needs");
    // No system prompt: no empty block (the API refuses one).
    let bare = model.body(&ModelRequest {
        system: String::new(),
        ..request()
    });
    assert_eq!(bare["system"], json!([]));
}

#[tokio::test]
async fn errors_say_what_the_api_said_and_never_the_key() {
    let (base, _) = server(vec![(
        400,
        "",
        json!({"error": {"message": "max_tokens is too large"}}),
    )])
    .await;
    let model = AnthropicModel::new("claude-test", KEY, options(&base)).unwrap();
    let error = model.next_turn(request()).await.unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<BackendError>(),
            Some(BackendError::Refused {
                provider: "anthropic",
                ..
            })
        ),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(
        error.contains("400") && error.contains("max_tokens is too large"),
        "{error}"
    );
    assert!(!error.contains(KEY));
    assert!(!format!("{model:?}").contains(KEY));

    let (base, seen) = server(vec![
        (
            429,
            "retry-after: 0\r\n",
            json!({"error": {"message": "slow down"}}),
        ),
        (
            429,
            "retry-after: 0\r\n",
            json!({"error": {"message": "slow down"}}),
        ),
        (
            429,
            "retry-after: 0\r\n",
            json!({"error": {"message": "slow down"}}),
        ),
    ])
    .await;
    let model = OpenAiModel::new("gpt-test", Some(KEY), options(&base)).unwrap();
    let error = model.next_turn(request()).await.unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<BackendError>(),
            Some(BackendError::RateLimited {
                provider: "openai",
                ..
            })
        ),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(
        error.contains("429") && error.contains("slow down"),
        "{error}"
    );
    assert!(!error.contains(KEY));
    assert_eq!(
        seen.lock().unwrap().bodies.len(),
        3,
        "three attempts, then the error"
    );
    assert!(!format!("{model:?}").contains(KEY));
}

#[test]
fn specs_and_thinking_levels_are_validated() {
    use airlock_models::ModelSpec;
    assert_eq!(
        ModelSpec::parse("openai/gpt-4o").unwrap(),
        ModelSpec::OpenAi("gpt-4o".into())
    );
    assert_eq!(
        ModelSpec::parse("script:run.json").unwrap().provider(),
        "script"
    );
    for bad in ["", "gpt-4o", "anthropic/", "mistral/large", "script:"] {
        let error = ModelSpec::parse(bad).unwrap_err().to_string();
        assert!(error.contains("anthropic/<model>"), "{bad}: {error}");
    }
    assert_eq!(Thinking::parse("high").unwrap().budget(), Some(24_576));
    assert!(
        Thinking::parse("100")
            .unwrap_err()
            .to_string()
            .contains("--thinking")
    );
}

#[tokio::test]
async fn anthropic_signed_thinking_is_echoed_back_unchanged_on_the_next_turn() {
    // Shaped like the API's own blocks: a signed thinking block and a redacted one.
    let thinking = json!({
        "type": "thinking",
        "thinking": "The page has a link to the second page; I should click it.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds6tJ9kCVPfFfhhkFX1LpgHBM7VJFLPUz1RTw7x8Gv+nnfGcaHLQRaV+NbZXNKhTVTkmG1srz5/eHSFpw0nzvMmDBaRgC"
    });
    let redacted = json!({
        "type": "redacted_thinking",
        "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pPmNdRH3kx"
    });
    let first = json!({"content": [
        thinking,
        redacted,
        {"type": "tool_use", "id": "toolu_1", "name": "agent_browser", "input": {"args": ["click", "@e1"]}},
    ]});
    let second = json!({"content": [{"type": "text", "text": "Done."}]});
    let (base, seen) = server(vec![(200, "", first), (200, "", second)]).await;
    let model = AnthropicModel::new(
        "claude-test",
        KEY,
        BackendOptions {
            thinking: Thinking::Low,
            ..options(&base)
        },
    )
    .unwrap();
    let mut conversation = request();
    let turn = model.next_turn(conversation.clone()).await.unwrap();
    conversation.messages.push(Message::Assistant { turn });
    conversation.messages.push(Message::ToolResults {
        results: vec![ToolResult {
            call_id: "toolu_1".into(),
            content: vec![Content::text("Clicked.")],
            is_error: false,
        }],
    });
    let turn = model.next_turn(conversation).await.unwrap();
    assert_eq!(turn.text, "Done.");
    let seen = seen.lock().unwrap();
    let echoed = &seen.bodies[1]["messages"][3];
    assert_eq!(echoed["role"], "assistant");
    // The thinking blocks come first, byte for byte, then the tool call they led to.
    assert_eq!(echoed["content"][0], thinking);
    assert_eq!(echoed["content"][1], redacted);
    assert_eq!(echoed["content"][2]["type"], "tool_use");
    insta::assert_json_snapshot!(seen.bodies[1]);
}

#[test]
fn openai_reasoning_models_get_max_completion_tokens() {
    let body = |model: &str, thinking: Thinking| {
        OpenAiModel::new(
            model,
            Some(KEY),
            BackendOptions {
                thinking,
                ..options("http://127.0.0.1:9")
            },
        )
        .unwrap()
        .body(&request())
    };
    for (model, thinking) in [
        ("o3", Thinking::Off),
        ("o4-mini", Thinking::Off),
        ("gpt-5", Thinking::Off),
        ("gpt-4o", Thinking::Medium),
    ] {
        let sent = body(model, thinking);
        assert_eq!(sent["max_completion_tokens"], 1000, "{model}: {sent}");
        assert!(sent.get("max_tokens").is_none(), "{model}: {sent}");
    }
    for model in ["gpt-4o", "gpt-4.1-mini", "llama3.1"] {
        let sent = body(model, Thinking::Off);
        assert_eq!(sent["max_tokens"], 1000, "{model}: {sent}");
        assert!(
            sent.get("max_completion_tokens").is_none(),
            "{model}: {sent}"
        );
    }
}

#[test]
fn a_turns_own_output_cap_lowers_max_tokens_and_shrinks_or_drops_thinking() {
    let capped = |cap: u32| ModelRequest {
        max_output_tokens: Some(cap),
        ..request()
    };
    let anthropic = |thinking: Thinking, cap: Option<u32>| {
        let model = AnthropicModel::new(
            "claude-test",
            KEY,
            BackendOptions {
                thinking,
                ..options("http://127.0.0.1:9")
            },
        )
        .unwrap();
        cap.map_or_else(|| model.body(&request()), |cap| model.body(&capped(cap)))
    };
    // No cap: the backend's own (thinking Low is 2,048, plus 1,024 for the answer).
    let sent = anthropic(Thinking::Low, None);
    assert_eq!(sent["max_tokens"], 3072, "{sent}");
    assert_eq!(sent["thinking"]["budget_tokens"], 2048, "{sent}");
    // A cap above the backend's own changes nothing.
    assert_eq!(anthropic(Thinking::Off, Some(50_000))["max_tokens"], 1000);
    assert_eq!(anthropic(Thinking::Off, Some(600))["max_tokens"], 600);
    // Thinking shrinks to fit beside a 1,024-token answer ...
    let sent = anthropic(Thinking::Low, Some(2_500));
    assert_eq!(sent["max_tokens"], 2500, "{sent}");
    assert_eq!(sent["thinking"]["budget_tokens"], 1476, "{sent}");
    // ... and is left off below the API's minimum of 1,024.
    let sent = anthropic(Thinking::Low, Some(2_000));
    assert_eq!(sent["max_tokens"], 2000, "{sent}");
    assert!(sent.get("thinking").is_none(), "{sent}");

    let openai = |model: &str, cap: u32| {
        OpenAiModel::new(model, Some(KEY), options("http://127.0.0.1:9"))
            .unwrap()
            .body(&capped(cap))
    };
    assert_eq!(openai("gpt-4o", 700)["max_tokens"], 700);
    assert_eq!(openai("gpt-4o", 70_000)["max_tokens"], 1000);
    assert_eq!(openai("o3", 700)["max_completion_tokens"], 700);
}

#[tokio::test]
async fn retry_after_is_honoured_instead_of_the_back_off() {
    let (base, seen) = server(vec![
        (
            429,
            "retry-after: 1\r\n",
            json!({"error": {"message": "slow down"}}),
        ),
        (
            200,
            "",
            json!({"content": [{"type": "text", "text": "ok"}]}),
        ),
    ])
    .await;
    // A back-off far longer than the server's Retry-After: only honouring it finishes quickly.
    let model = AnthropicModel::new(
        "claude-test",
        KEY,
        BackendOptions {
            retry: RetryPolicy {
                attempts: 2,
                first_backoff: Duration::from_secs(120),
                max_backoff: Duration::from_secs(120),
            },
            ..options(&base)
        },
    )
    .unwrap();
    let started = std::time::Instant::now();
    let turn = tokio::time::timeout(Duration::from_secs(60), model.next_turn(request()))
        .await
        .expect("the back-off was used instead of Retry-After")
        .unwrap();
    assert_eq!(turn.text, "ok");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retried before the server's Retry-After of 1 s"
    );
    assert_eq!(seen.lock().unwrap().bodies.len(), 2);
}

// Usage: each vendor's counts, summed by the runner over a task's turns.

/// A driver whose one tool answers "ok": the runner needs a session to run turns against.
struct OneTool;
struct AnswersOk;
struct NoDispose;

impl airlock_worker::Tool for AnswersOk {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "agent_browser".into(),
            description: "answers ok".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn execute(
        &self,
        _input: Value,
    ) -> airlock_worker::BoxFuture<
        '_,
        Result<airlock_worker::ToolOutput, airlock_worker::ToolFailure>,
    > {
        Box::pin(async { Ok(airlock_worker::ToolOutput::text("ok")) })
    }
}

impl airlock_worker::Dispose for NoDispose {
    fn dispose(self: Box<Self>) -> airlock_worker::BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

impl airlock_worker::BrowserDriver for OneTool {
    fn check(&self) -> airlock_worker::BoxFuture<'_, Result<(), airlock_worker::DriverError>> {
        Box::pin(async { Ok(()) })
    }
    fn start(
        &self,
        _context: airlock_worker::TaskContext,
    ) -> airlock_worker::BoxFuture<
        '_,
        Result<airlock_worker::BrowserSession, airlock_worker::DriverError>,
    > {
        Box::pin(async {
            Ok(airlock_worker::BrowserSession {
                tools: vec![Arc::new(AnswersOk)],
                guide: String::new(),
                prompt: String::new(),
                dispose: Box::new(NoDispose),
                warm: false,
            })
        })
    }
}

async fn usage_of_a_task(model: Arc<dyn Model>) -> airlock_worker::TaskResult {
    let runner = airlock_worker::TaskRunner::new(
        Arc::new(OneTool),
        model,
        airlock_worker::TaskLimits::default(),
    )
    .unwrap();
    let request = airlock_worker::TaskRequest {
        task: "count".into(),
        url: None,
        scope: airlock_worker::Scope::default(),
        secrets: airlock_worker::Secrets::default(),
        state: None,
        return_state: false,
        uploads: airlock_worker::Uploads::default(),
        max_download_bytes: None,
        route: None,
        output_schema: None,
        browser: airlock_worker::BrowserSettings::default(),
    };
    runner
        .run(request, airlock_worker::CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn anthropic_usage_is_summed_over_a_tasks_turns_cache_included() {
    let call = json!({"content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "agent_browser", "input": {}},
    ], "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 150}});
    let report = json!({"content": [{"type": "text", "text": "Done."}],
        "usage": {"input_tokens": 80, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3000, "output_tokens": 40}});
    let (base, _) = server(vec![(200, "", call), (200, "", report)]).await;
    let model = AnthropicModel::new("claude-test", KEY, options(&base)).unwrap();
    let result = usage_of_a_task(Arc::new(model)).await;
    assert_eq!(result.report, "Done.");
    assert_eq!(
        result.usage,
        airlock_worker::Usage {
            input_tokens: 1280,
            cache_read_tokens: 3000,
            cache_write_tokens: 3000,
            output_tokens: 190,
            // Anthropic bills thinking as output and does not count it apart.
            thinking_tokens: 0,
        }
    );
    assert_eq!(result.usage.total(), 7470);
}

#[tokio::test]
async fn openai_usage_is_summed_over_a_tasks_turns_cached_and_reasoning_split_out() {
    let call = json!({"choices": [{"message": {"content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "agent_browser", "arguments": "{}"}}
    ]}}], "usage": {"prompt_tokens": 2000, "completion_tokens": 300,
        "prompt_tokens_details": {"cached_tokens": 1536}, "completion_tokens_details": {"reasoning_tokens": 256}}});
    // A compatible server that reports only the basic counts.
    let report = json!({"choices": [{"message": {"content": "Done."}}],
        "usage": {"prompt_tokens": 2100, "completion_tokens": 20}});
    let (base, _) = server(vec![(200, "", call), (200, "", report)]).await;
    let model = OpenAiModel::new("gpt-test", Some(KEY), options(&base)).unwrap();
    let result = usage_of_a_task(Arc::new(model)).await;
    assert_eq!(result.report, "Done.");
    assert_eq!(
        result.usage,
        airlock_worker::Usage {
            input_tokens: 464 + 2100,
            cache_read_tokens: 1536,
            cache_write_tokens: 0,
            output_tokens: 320,
            thinking_tokens: 256,
        }
    );
    assert_eq!(result.usage.total(), 4420);
}

/// A recorded exchange with a real llama-server (`tests/fixtures/llama-server/`).
fn recorded(name: &str) -> (u16, Value) {
    let path = format!(
        "{}/tests/fixtures/llama-server/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    (
        u16::try_from(file["status"].as_u64().unwrap()).unwrap(),
        file["answer"].clone(),
    )
}

/// The real agent_browser tool, as the recordings offered it.
fn recorded_tools() -> Vec<ToolDefinition> {
    let path = format!(
        "{}/tests/fixtures/llama-server/call-as-text.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let function = &file["request"]["tools"][0]["function"];
    vec![ToolDefinition {
        name: function["name"].as_str().unwrap().to_owned(),
        description: function["description"].as_str().unwrap().to_owned(),
        input_schema: function["parameters"].clone(),
    }]
}

async fn turn_against_recorded(name: &str) -> Result<AssistantTurn, airlock_worker::ModelError> {
    let (status, answer) = recorded(name);
    let (base, _) = server(vec![(status, "", answer)]).await;
    let model = OpenAiModel::new("qwen2.5-coder-0.5b", None, options(&base)).unwrap();
    let mut request = request();
    request.tools = recorded_tools();
    model.next_turn(request).await
}

/// llama-server with Qwen2.5-Coder wrote the call as the message's text in a json fence: it is
/// read as the call (its input as written, for the tool to judge), marked as read from text.
#[tokio::test]
async fn a_real_servers_call_written_as_text_is_read_as_the_call() {
    let turn = turn_against_recorded("call-as-text").await.unwrap();
    assert!(turn.call_read_from_text, "{turn:?}");
    assert_eq!(turn.text, "");
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].name, "agent_browser");
    assert_eq!(
        turn.tool_calls[0].input,
        json!(["open", "http://127.0.0.1:8000/"])
    );
    assert!(turn.usage.input_tokens > 0 && turn.usage.output_tokens > 0);
}

/// The worker's whole prompt today (standing instructions that put the work first, the short
/// guide): the 1.5B model opens the start page, as a call in text with the list bare.
#[tokio::test]
async fn a_real_servers_first_answer_to_the_worker_opens_the_page() {
    let turn = turn_against_recorded("open-as-bare-list").await.unwrap();
    assert!(turn.call_read_from_text, "{turn:?}");
    let input = &turn.tool_calls[0].input;
    assert_eq!(input[0], "open", "{input}");
    assert!(
        input[1].as_str().unwrap().contains("click-button.html"),
        "{input}"
    );
}

/// After the page opened, the 1.5B model wrote the guide's commands as calls, one per line,
/// until its answer was cut at 300 tokens: the first is the call.
#[tokio::test]
async fn a_real_servers_list_of_calls_cut_short_is_read_as_its_first() {
    let turn = turn_against_recorded("list-of-calls").await.unwrap();
    assert!(turn.call_read_from_text, "{turn:?}");
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].input, json!(["snapshot", "-i"]));
}

/// A call followed by more text is no call alone: it stays text, as a report would.
#[tokio::test]
async fn a_real_servers_call_with_text_after_it_stays_text() {
    let turn = turn_against_recorded("after-invalid-input").await.unwrap();
    assert!(!turn.call_read_from_text);
    assert!(turn.tool_calls.is_empty());
    assert!(turn.text.contains("agent_browser"), "{}", turn.text);
    // The server read the repeated prefix from its cache, and the usage says so.
    assert!(turn.usage.cache_read_tokens > 0, "{:?}", turn.usage);
}

/// A prompt past the server's context is its 400, named, and not tried again.
#[tokio::test]
async fn a_real_servers_context_refusal_is_named_and_not_retried() {
    let error = turn_against_recorded("context-exceeded").await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("exceeds the available context size"),
        "{text}"
    );
}

/// Given the worker's whole prompt, the 1.5B model wrote agent-browser command lines in a bash
/// fence, as the guide shows them: no call of any shape, so it stays text (the report).
#[tokio::test]
async fn a_real_servers_command_lines_as_text_are_no_call() {
    let turn = turn_against_recorded("cli-commands-as-text").await.unwrap();
    assert!(!turn.call_read_from_text);
    assert!(turn.tool_calls.is_empty());
    assert!(turn.text.contains("agent-browser open"), "{}", turn.text);
}
