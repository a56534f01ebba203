//! Reading what a server or proxy answers, with every wait bounded.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bound a wait, so a broken server fails the test instead of hanging it.
pub async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no answer within 10 s")
}

/// Read one HTTP head (up to and including the blank line) from a stream.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = within(stream.read(&mut byte)).await.unwrap();
        assert!(
            n > 0,
            "stream closed inside a head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}
