//! What bounds a client: the MCP session cap, the time limits, and stateless requests.

use super::*;

#[test]
fn a_flood_of_mcp_sessions_is_bounded() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &["--max-sessions", "3"]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}})
    .to_string();
    let headers = [
        bearer(),
        "content-type: application/json".to_owned(),
        "accept: application/json, text/event-stream".to_owned(),
    ];
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let statuses: Vec<u16> = (0..5)
        .map(|_| request(served.port, "POST", "/mcp", &headers, &initialize).0)
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 503, 503],
        "sessions past --max-sessions were opened"
    );
    // Initializes that arrive together cannot all pass the check of the sessions already open.
    let served = serve(&json!({"turns": []}), dir.path(), &["--max-sessions", "3"]);
    let port = served.port;
    let at_once: Vec<_> = (0..20)
        .map(|_| {
            let initialize = initialize.clone();
            let headers: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
            std::thread::spawn(move || {
                let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
                request(port, "POST", "/mcp", &headers, &initialize).0
            })
        })
        .collect();
    let mut statuses: Vec<u16> = at_once.into_iter().map(|t| t.join().unwrap()).collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        3,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
}

#[test]
fn slow_clients_are_cut_off_at_the_time_limits() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &[]);
    // A body that never finishes, to the MCP endpoint, is answered at the body time limit (30 s)
    // instead of holding its connection.
    let (status, answer) = raw(
        served.port,
        format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n{}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 1000\r\n\r\n{{\"jsonrpc\"",
            served.port,
            bearer()
        )
        .as_bytes(),
    );
    assert!(
        status >= 400,
        "a trickled MCP body was not cut off: {status} {answer}"
    );
    // A client that never finishes its request head is dropped at the header time limit.
    let mut slow = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .unwrap();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(
        !String::from_utf8_lossy(&rest).contains("200 OK"),
        "a half-sent head was answered"
    );
}

#[test]
fn stateless_requests_stand_alone_so_any_server_answers_any_request() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Stateless page", "Hello without sessions");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"expect": {"shown_contains": ["Stateless page"]}, "text": "Read without a session."}
    ]});
    let allow = format!("127.0.0.1:{port}");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(&script, dir_a.path(), &["--stateless", "--allow", &allow]);
    let b = serve(&script, dir_b.path(), &["--stateless", "--allow", &allow]);
    // The official SDK: browser_task completes with its progress streamed in the response.
    let good = json!({"Authorization": format!("Bearer {TOKEN}")});
    let result = sdk_call(&a, &good, "Read the page");
    assert_eq!(result["texts"][0], "Read without a session.", "{result}");
    assert_eq!(result["progress"].as_array().unwrap().len(), 1, "{result}");
    // No session is handed out, and a server that never saw an initialize answers a request.
    let mcp_post = |port: u16, body: &Value| {
        let body = body.to_string();
        exchange(
            port,
            format!(
                "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n{}\r\n\
                 content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
                 mcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n\r\n{body}",
                bearer(),
                body.len()
            )
            .as_bytes(),
        )
    };
    let initialized = mcp_post(
        a.port,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert!(initialized.starts_with("HTTP/1.1 200"), "{initialized}");
    assert!(
        !initialized.to_ascii_lowercase().contains("mcp-session-id"),
        "a stateless server handed out a session: {initialized}"
    );
    let listed = mcp_post(
        b.port,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert!(listed.starts_with("HTTP/1.1 200"), "{listed}");
    assert!(listed.contains("browser_task"), "{listed}");
    assert_eq!(containers_of(a.child.id()).len(), 0);
}

#[test]
fn tasks_cancelled_at_the_end_of_the_drain_still_get_their_answer() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = json!({"text": "done", "tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "20000"]}}]});
    let mut served = serve(
        &json!({"turns": vec![long; 4]}),
        dir.path(),
        &["--max-concurrent-tasks", "2", "--drain-timeout", "1"],
    );
    let clients = tasks_at_once(served.port, 2);
    let pid = served.child.id();
    assert!(wait_for_containers_of(pid, 2, Duration::from_secs(60)));
    // The drain ends long before the tasks would: they are cancelled, and their clients are
    // still owed an answer before the process exits.
    signal(pid, "-TERM");
    for client in clients {
        let (status, body) = client.join().unwrap();
        assert_eq!(status, 200, "no answer: {body:?}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["ended"],
            "cancelled",
            "{body}"
        );
    }
    assert!(served.child.wait().unwrap().success());
    assert!(containers_of(pid).is_empty());
}

#[test]
fn a_client_that_pipelines_requests_and_never_reads_is_cut_off() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    // Past the server's 30 s write limit, with room: without it, this write blocks for good.
    stream
        .set_write_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let requests = format!(
        "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n\r\n",
        served.port
    )
    .repeat(1000);
    let mut rounds = 0;
    let failed = loop {
        if let Err(error) = stream.write_all(requests.as_bytes()) {
            break error;
        }
        rounds += 1;
        assert!(
            rounds < 100_000,
            "the server read a million requests nobody read the answers of"
        );
    };
    assert!(
        matches!(
            failed.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        "the server kept the connection of a client that never reads: {failed}"
    );
}

#[test]
fn an_idle_keep_alive_connection_is_closed_at_the_header_time_limit() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
        .write_all(
            format!(
                "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n\r\n",
                served.port
            )
            .as_bytes(),
        )
        .unwrap();
    // The answer, then nothing more is asked: the server closes the connection (10 s after the
    // answer, its header limit for the next request), well before this read gives up.
    let mut seen = Vec::new();
    let closed = stream.read_to_end(&mut seen);
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        closed.is_ok(),
        "an idle keep-alive connection was kept open: {closed:?}"
    );
}

/// The `Mcp-Session-Id` an initialize over raw HTTP was given.
fn open_raw_mcp_session(port: u16) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{init}",
        bearer(),
        init.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let session = answer
        .lines()
        .take_while(|line| !line.is_empty())
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session: {answer}"));
    let (status, body) = request(
        port,
        "POST",
        "/mcp",
        &[
            &bearer(),
            "content-type: application/json",
            "accept: application/json, text/event-stream",
            "mcp-protocol-version: 2025-06-18",
            &format!("mcp-session-id: {session}"),
        ],
        r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
    );
    assert!(status < 300, "{status} {body}");
    session
}

#[test]
fn an_mcp_client_that_drops_its_connection_mid_task_cancels_it() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = json!({"turns": [{"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]}]});
    let served = serve(&long, dir.path(), &[]);
    let (port, pid) = (served.port, served.child.id());
    let session = open_raw_mcp_session(port);
    // The call, on a connection the client then drops: no cancel notification, no DELETE.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "browser_task", "arguments": {"task": "wait"}}})
    .to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\nmcp-session-id: {session}\r\ncontent-length: {}\r\n\r\n{call}",
        bearer(),
        call.len()
    )
    .unwrap();
    // The task would wait a minute; its client's leaving ends it now.
    assert!(
        dropping_the_client_ends_its_task(pid, stream, Duration::from_secs(15)),
        "the task outlived the connection that carried its call"
    );
}
