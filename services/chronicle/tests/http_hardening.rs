//! What a hostile or careless client can do to a running server, tried on
//! a real server over real sockets: foreign Host and Origin headers
//! (DNS rebinding, cross-site posts), bodies that do not say they are JSON,
//! slow and idle clients, too many connections, and a token over its rate.

mod http_support;

use std::time::{Duration, Instant};

use chronicle::app::auth::Auth;
use chronicle::http::HttpOptions;
use chronicle::http::listen::ConnectionLimits;
use http_support::{start, start_with};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes and reads until the server closes or `within` passes;
/// returns what was read and whether the server closed in time.
async fn raw(addr: &str, bytes: &[u8], within: Duration) -> (String, bool) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    read_until_closed(&mut stream, within).await
}

async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&out).into(), true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&out).into(), false),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_only_loopback_hosts_and_origins_are_served() {
    let s = start(None, None).await;
    let addr = s.url.trim_start_matches("http://").to_owned();
    let body = r#"{"content":"Mallory: I moved to Paris."}"#;
    let post = |host: &str, extra: &str, content_type: &str| {
        format!(
            "POST /v1/groups/g/episodes HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: \
             {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let wait = Duration::from_secs(10);
    // DNS rebinding: a foreign name that resolves to loopback.
    let (reply, _) = raw(
        &addr,
        post("evil.example:80", "", "application/json").as_bytes(),
        wait,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(reply.contains(r#""field":"host""#), "{reply}");
    let (reply, _) = raw(
        &addr,
        b"GET /v1/groups/g/facts HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
        wait,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "reads too: {reply}");
    // A cross-site page posting to loopback.
    let (reply, _) = raw(
        &addr,
        post(
            &addr,
            "Origin: https://evil.example\r\n",
            "application/json",
        )
        .as_bytes(),
        wait,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(reply.contains(r#""field":"origin""#), "{reply}");
    // A simple (preflight-free) form post is no JSON body.
    let (reply, _) = raw(&addr, post(&addr, "", "text/plain").as_bytes(), wait).await;
    assert!(reply.starts_with("HTTP/1.1 415"), "{reply}");
    // MCP refuses a foreign Host as well.
    let mcp = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let (reply, _) = raw(
        &addr,
        format!(
            "POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{mcp}",
            mcp.len()
        )
        .as_bytes(),
        wait,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    // A body that is not JSON gets JSON-RPC's parse error, not a hang or 500.
    let garbage = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":";
    let (reply, _) = raw(
        &addr,
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{garbage}",
            garbage.len()
        )
        .as_bytes(),
        wait,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("-32700"), "{reply}");
    // Nothing of the refused posts was appended; a loopback one is served.
    assert_eq!(s.appended().await, 0);
    let (reply, _) = raw(
        &addr,
        post(
            &addr,
            "Origin: http://localhost:3000\r\n",
            "application/json; charset=utf-8",
        )
        .as_bytes(),
        wait,
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 202"), "{reply}");
    assert_eq!(s.appended().await, 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_clients_are_cut_off_and_connections_are_bounded() {
    let limit = 8;
    let s = start_with(HttpOptions {
        connections: ConnectionLimits {
            max_connections: limit,
            header_timeout: Duration::from_millis(500),
        },
        body_timeout: Duration::from_millis(500),
        ..HttpOptions::default()
    })
    .await;
    let addr = s.url.trim_start_matches("http://").to_owned();

    // Half a request head, then silence: closed after the head deadline.
    let started = Instant::now();
    let (_, closed) = raw(
        &addr,
        b"GET /healthz HTTP/1.1\r\nHost: 127.",
        Duration::from_secs(5),
    )
    .await;
    assert!(closed, "a slow head is cut off");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // A whole head, half a body: 408 after the body deadline.
    let (reply, closed) = raw(
        &addr,
        format!(
            "POST /v1/groups/g/episodes HTTP/1.1\r\nHost: {addr}\r\nContent-Type: \
             application/json\r\nContent-Length: 100\r\n\r\n{{\"content\":"
        )
        .as_bytes(),
        Duration::from_secs(5),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(closed, "the connection ends after a 408");

    // A served request, then an idle keep-alive: closed after the deadline.
    let mut kept = TcpStream::connect(&addr).await.expect("connect");
    kept.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let (reply, closed) = read_until_closed(&mut kept, Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(closed, "an idle kept-alive connection is closed");

    // `limit` idle connections fill the server; one more is closed at once
    // while they are open, and once they time out the server answers again.
    let mut idle = Vec::new();
    for _ in 0..limit {
        idle.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = TcpStream::connect(&addr).await.expect("the kernel accepts");
    let _ = extra
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await;
    let (reply, closed) = read_until_closed(&mut extra, Duration::from_millis(400)).await;
    assert!(
        closed && reply.is_empty(),
        "over the limit: closed unanswered ({reply})"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    let healthy = s.get("/healthz", None).await;
    assert_eq!(healthy.status, StatusCode::OK, "{}", healthy.text);
    drop(idle);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_over_its_rate_gets_429_with_retry_after_and_others_do_not() {
    let tokens = "[[tokens]]\nname='limited'\nsecret='limited-secret-0123456789'\ngroups=['a']\n\
                  access='write'\nrequests_per_second=1\nburst=3\n\
                  [[tokens]]\nname='free'\nsecret='free-secret-0123456789'\ngroups=['a']\n\
                  access='read'\n";
    let s = start_with(HttpOptions {
        auth: Some(Auth::parse(tokens).expect("tokens")),
        ..HttpOptions::default()
    })
    .await;
    let limited = "limited-secret-0123456789";
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..5 {
        let r = s.get("/v1/groups/a/facts", Some(limited)).await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            retry_after = r.headers.get("retry-after").cloned();
            assert!(r.text.contains("rate"), "{}", r.text);
        }
        statuses.push(r.status.as_u16());
    }
    assert_eq!(&statuses[..3], [200, 200, 200], "{statuses:?}");
    assert_eq!(statuses[4], 429, "{statuses:?}");
    let seconds: u64 = retry_after
        .expect("Retry-After")
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!((1..=2).contains(&seconds), "{seconds}");
    // MCP shares the token's budget.
    let r = s
        .send(
            reqwest::Method::POST,
            "/mcp",
            Some(limited),
            Some(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec()),
        )
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    // Another token is not slowed down.
    for _ in 0..20 {
        let r = s
            .get("/v1/groups/a/facts", Some("free-secret-0123456789"))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    // The budget refills.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = s.get("/v1/groups/a/facts", Some(limited)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.stop().await;
}
