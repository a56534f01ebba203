//! A lab site on 127.0.0.1: fixed pages by path, every path asked recorded.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

/// One request a site heard: the `Host` header it named (lower case), the path, and the
/// languages the browser asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The `Host` header, such as `alt.lab:8080`.
    pub host: String,
    /// The request path, such as `/a.png`.
    pub path: String,
    /// The `Accept-Language` header, if any, such as `fr-FR,fr;q=0.9`.
    pub accept_language: Option<String>,
}

/// The requests a site heard, in order.
pub type Seen = Arc<Mutex<Vec<Heard>>>;

/// A page: (status line, extra headers, body).
pub type Page = (&'static str, String, String);

/// An HTTP server on 127.0.0.1 serving the pages `pages(port)` returns, by path (404 otherwise);
/// it records every request's host and path. Pages get the port so they can link to themselves.
pub fn site(pages: impl FnOnce(u16) -> HashMap<&'static str, Page>) -> (u16, Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pages = pages(port);
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let pages = Arc::new(pages);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let pages = Arc::clone(&pages);
            let record = Arc::clone(&record);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    return;
                }
                let mut host = String::new();
                let mut accept_language = None;
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("host") {
                            host = value.trim().to_ascii_lowercase();
                        } else if name.eq_ignore_ascii_case("accept-language") {
                            accept_language = Some(value.trim().to_owned());
                        }
                    }
                    line.clear();
                }
                let path = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
                record.lock().unwrap().push(Heard {
                    host,
                    path: path.clone(),
                    accept_language,
                });
                let (status, extra, body) = pages.get(path.as_str()).cloned().unwrap_or((
                    "404 Not Found",
                    String::new(),
                    String::new(),
                ));
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    (port, seen)
}

/// A one-page site for tests that only need something to open.
pub fn simple_site(title: &'static str, text: &'static str) -> u16 {
    site(move |_| {
        HashMap::from([(
            "/",
            (
                "200 OK",
                String::new(),
                format!(
                    "<html><head><title>{title}</title></head><body><p>{text}</p></body></html>"
                ),
            ),
        )])
    })
    .0
}
