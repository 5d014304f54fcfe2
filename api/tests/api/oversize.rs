//! Issue 44: an oversized body gets its 413 whatever the client's pace. A
//! raw TCP client sends a 5 MB create, fast and slowly, to a served API
//! (limit 1 MiB) and must send it whole, then read the 413 with its JSON
//! body, as Python's urllib does: before, the API
//! answered at once and closed while the body was still coming, and the
//! reset lost the answer.

use super::support::App;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY_BYTES: usize = 5 * 1024 * 1024;

/// Sends the create in chunks of `chunk` bytes, pausing `pause` between
/// them, then reads the answer; what the client got.
async fn send_oversized(
    addr: std::net::SocketAddr,
    token: &str,
    chunk: usize,
    pause: Duration,
) -> String {
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /openapi/jobs HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {BODY_BYTES}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.expect("write head");
    // A JSON string of the right length: `{"jobName":"xxx…"}`.
    let mut body = br#"{"jobName":""#.to_vec();
    body.resize(BODY_BYTES - 2, b'x');
    body.extend_from_slice(b"\"}");
    let mut write_error = None;
    for part in body.chunks(chunk) {
        if let Err(e) = conn.write_all(part).await {
            write_error = Some(e);
            break;
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("an answer within 30 s");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    // As Python's urllib does, a client that could not send its whole
    // body reports that, not the answer.
    assert!(
        write_error.is_none() && read.is_ok() && !answer.is_empty(),
        "no answer: write {write_error:?}, read {read:?}, got {answer:?}"
    );
    answer
}

pub async fn an_oversized_body_gets_its_413_at_any_pace(app: App) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let state = kairos_api::AppState::new(Arc::new(app.store.clone()), Default::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(kairos_api::serve(listener, state, async {
        let _ = stopped.await;
    }));
    let token = app.token.clone().expect("a key");
    for (chunk, pause) in [
        (BODY_BYTES, Duration::ZERO),
        (256 * 1024, Duration::ZERO),
        (64 * 1024, Duration::from_millis(5)),
    ] {
        for _ in 0..3 {
            let answer = send_oversized(addr, &token, chunk, pause).await;
            assert!(
                answer.starts_with("HTTP/1.1 413"),
                "chunks of {chunk} every {pause:?}: {answer}"
            );
            assert!(answer.contains(r#""code":"payload_too_large""#), "{answer}");
        }
    }
    assert!(app.snapshot().await.is_empty(), "nothing was created");
    stop.send(()).expect("server still running");
    server.await.expect("server task").expect("serve");
}
