//! Lab sites with forms, on 127.0.0.1. A login form and a cookie session: `/login` shows the form,
//! `POST /session` checks the user and password and sets a session cookie, `/account` shows a
//! member's page only with that cookie (and, as some sites do, the session's value). The login page also carries whatever hostile script the
//! test gives it. Every form body the site received is kept, so a test can check the exact bytes.
//! And a file form ([`upload_site`]) that keeps each uploaded body.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// The session cookie's value the site hands out.
pub const SESSION: &str = "sid=lab-session-7f3a9c";

/// The session cookie's value (what follows `sid=`), which the account page also shows.
pub fn session_value() -> &'static str {
    SESSION.split_once('=').map_or(SESSION, |(_, value)| value)
}

/// What the login site received: each form body posted to `/session`, decoded.
pub type Posted = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// Serve the login site for `user` and `password`, with `login_script` inside the login page's
/// `<script>`. Returns the port and what was posted.
pub fn login_site(user: &str, password: &str, login_script: &str) -> (u16, Posted) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let posted: Posted = Arc::default();
    let record = Arc::clone(&posted);
    let (user, password) = (user.to_owned(), password.to_owned());
    let login_page = format!(
        "<html><head><meta charset=\"utf-8\"><title>Sign in</title></head><body><h1>Sign in</h1>\
         <form method=\"post\" action=\"/session\">\
         <input id=\"user\" name=\"user\"><input id=\"password\" name=\"password\" type=\"password\">\
         <button id=\"go\" type=\"submit\">Sign in</button></form><p id=\"echo\"></p>\
         <script>{login_script}</script></body></html>"
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(request) = read_request(&stream) else {
                continue;
            };
            let (body, cookie) = (request.body, request.cookie);
            let path = request.line.split(' ').nth(1).unwrap_or("/");
            let (status, headers, page) = match path {
                "/login" => ("200 OK", String::new(), login_page.clone()),
                "/session" => {
                    let form = decode_form(&body);
                    let good =
                        form.get("user") == Some(&user) && form.get("password") == Some(&password);
                    record.lock().unwrap().push(form);
                    if good {
                        (
                            "302 Found",
                            format!("set-cookie: {SESSION}; Path=/\r\nlocation: /account\r\n"),
                            String::new(),
                        )
                    } else {
                        (
                            "403 Forbidden",
                            String::new(),
                            "<p>Wrong password</p>".into(),
                        )
                    }
                }
                "/account" if cookie.split("; ").any(|c| c == SESSION) => (
                    "200 OK",
                    String::new(),
                    format!(
                        "<html><head><title>Account</title></head><body>\
                         <p id=\"welcome\">Welcome back, {user}. Your balance is 1,234 credits.</p>\
                         <p id=\"session\">Your session: {}</p></body></html>",
                        session_value()
                    ),
                ),
                "/account" => ("302 Found", "location: /login\r\n".into(), String::new()),
                _ => ("404 Not Found", String::new(), String::new()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (port, posted)
}

/// One request as the lab sites read it.
struct Request {
    /// `POST /session HTTP/1.1`.
    line: String,
    /// The `Cookie` header.
    cookie: String,
    /// The body, as long as `Content-Length` says (at most 32 MiB).
    body: Vec<u8>,
}

fn read_request(stream: &std::net::TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let (mut length, mut cookie) = (0usize, String::new());
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "cookie" => value.trim().clone_into(&mut cookie),
                _ => {}
            }
        }
        header.clear();
    }
    let mut body = vec![0u8; length.min(32 * 1024 * 1024)];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        line: line.trim().to_owned(),
        cookie,
        body,
    })
}

/// An `application/x-www-form-urlencoded` body, decoded.
fn decode_form(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (decode(name), decode(value)))
        .collect()
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(&text.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// What an upload site received: each body posted to `/upload`, as bytes.
pub type Received = Arc<Mutex<Vec<Vec<u8>>>>;

/// A site with a file form on 127.0.0.1: `/upload` shows it (`#file`, `#send`), `POST /upload`
/// keeps the raw multipart body and answers "received N bytes".
pub fn upload_site() -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received: Received = Arc::default();
    let record = Arc::clone(&received);
    let form = "<html><head><meta charset=\"utf-8\"><title>Upload</title></head><body>\
                <form method=\"post\" action=\"/upload\" enctype=\"multipart/form-data\">\
                <input id=\"file\" name=\"file\" type=\"file\"><button id=\"send\" type=\"submit\">Send</button>\
                </form></body></html>";
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(Request { line, body, .. }) = read_request(&stream) else {
                continue;
            };
            let page = if line.starts_with("POST /upload ") {
                let answer = format!(
                    "<html><head><title>Received</title></head><body><p id=\"got\">received {} bytes</p></body></html>",
                    body.len()
                );
                record.lock().unwrap().push(body);
                answer
            } else {
                form.to_owned()
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (port, received)
}

/// A scripted worker's turns that sign in on the login site at `login_url` as `member`, typing
/// the secret `secret` by placeholder, and wait for the account page. The caller adds what the
/// worker does next and its report.
pub fn sign_in_turns(login_url: &str, secret: &str) -> Vec<serde_json::Value> {
    let call = |args: serde_json::Value| serde_json::json!({"name": "agent_browser", "input": {"args": args}});
    let typed = format!("Typed secret `{secret}` into the password field.");
    vec![
        serde_json::json!({"tool_calls": [call(serde_json::json!(["open", login_url]))]}),
        serde_json::json!({"tool_calls": [call(serde_json::json!(["fill", "#user", "member"]))]}),
        serde_json::json!({"tool_calls": [call(
            serde_json::json!(["fill", "#password", format!("{{{{secret:{secret}}}}}")])
        )]}),
        serde_json::json!({"expect": {"shown_contains": [typed]},
                           "tool_calls": [call(serde_json::json!(["click", "#go"]))]}),
        serde_json::json!({"tool_calls": [call(serde_json::json!(["wait", "--url", "**/account"]))]}),
    ]
}
