//! Without tokens the server listens on loopback only, but a web page the
//! user visits can still reach loopback: through DNS rebinding (a foreign
//! name resolving to 127.0.0.1, so a foreign `Host`) or a cross-site request
//! (a foreign `Origin`). Both are refused with 403 before any route runs;
//! with tokens a page has no token, so any Host is served.

use axum::extract::Request;
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::error::ApiError;

/// Refuses requests whose `Host` or `Origin` is not loopback.
pub async fn loopback_only(req: Request, next: Next) -> Response {
    match check(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(field) => {
            let mut e = ApiError::forbidden(format!(
                "{field} is not a loopback address; without --auth this server only answers \
                 requests addressed to localhost, 127.0.0.1 or [::1] from pages of those hosts"
            ));
            e.field = Some(field.to_owned());
            e.into_response()
        }
    }
}

/// The header at fault, if any.
fn check(headers: &HeaderMap) -> Result<(), &'static str> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .ok_or("host")?;
    if !is_loopback_authority(host) {
        return Err("host");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| "origin")?;
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .ok_or("origin")?;
        if !is_loopback_authority(authority) {
            return Err("origin");
        }
    }
    Ok(())
}

/// `localhost`, `127.x.y.z` or `[::1]`, with an optional port.
fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, port)) if port.is_empty() || valid_port(port) => return ip == "::1",
            _ => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) if valid_port(port) => host,
            Some(_) => return false,
            None => authority,
        },
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn valid_port(with_colon: &str) -> bool {
    let digits = with_colon.strip_prefix(':').unwrap_or(with_colon);
    !digits.is_empty() && digits.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_hosts_and_origins_pass_and_foreign_ones_do_not() {
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "127.1.2.3",
            "[::1]:80",
            "[::1]",
        ] {
            assert_eq!(check(&headers(Some(host), None)), Ok(()), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:8080",
            "[::2]:80",
            "localhost:99999",
            "127.0.0.1:x",
        ] {
            assert_eq!(check(&headers(Some(host), None)), Err("host"), "{host}");
        }
        assert_eq!(check(&headers(None, None)), Err("host"));
        assert_eq!(
            check(&headers(
                Some("localhost:8080"),
                Some("http://localhost:3000")
            )),
            Ok(())
        );
        for origin in [
            "http://evil.example",
            "null",
            "https://127.0.0.1.evil.example",
        ] {
            assert_eq!(
                check(&headers(Some("localhost:8080"), Some(origin))),
                Err("origin"),
                "{origin}"
            );
        }
    }
}
