//! Bearer tokens scoped to groups, loaded from a TOML file:
//!
//! ```toml
//! [[tokens]]
//! name = "acme-agent"          # optional, shows in logs
//! secret = "a long random string"
//! groups = ["acme", "acme-*"]  # exact ids, or prefixes ending in `*`
//! access = "write"             # "read" or "write" (write includes read)
//! requests_per_second = 50     # optional: a sustained rate (429 above it)
//! burst = 100                  # optional: requests allowed at once (default: the rate)
//! ```
//!
//! Secrets are kept only as SHA-256 digests; a presented token is hashed
//! and looked up, so no comparison leaks how much of a secret matched.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use chronicle_model::GroupId;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// What a route needs, or what a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Reads: status, listings, search, facts, timelines.
    Read,
    /// Reads and writes: episodes, triplets, retractions.
    Write,
}

impl Access {
    /// As the config file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// Shortest secret accepted: guessing must stay out of reach.
pub const MIN_SECRET_CHARS: usize = 16;

/// Why an auth file was refused.
#[derive(Debug, Error)]
pub enum AuthConfigError {
    /// Not TOML of the expected shape.
    #[error("not a tokens file: {0}")]
    Syntax(#[from] toml::de::Error),
    /// The file grants nothing.
    #[error("no [[tokens]] entries; add at least one")]
    Empty,
    /// A token entry is unusable.
    #[error("token {index} ({name}): {reason}")]
    Token {
        /// 1-based position in the file.
        index: usize,
        /// Its name, or `unnamed`.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    #[serde(default)]
    name: Option<String>,
    secret: String,
    groups: Vec<String>,
    access: Access,
    #[serde(default)]
    requests_per_second: Option<NonZeroU32>,
    #[serde(default)]
    burst: Option<NonZeroU32>,
}

/// Which groups a token covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupPattern {
    /// Exactly this group.
    Exact(GroupId),
    /// Every group whose id starts with this (`*` alone: every group).
    Prefix(String),
}

impl GroupPattern {
    fn parse(text: &str) -> Result<Self, String> {
        match text.strip_suffix('*') {
            Some(prefix) => {
                if prefix.contains('*') {
                    return Err(format!(
                        "group pattern `{text}`: `*` may only end a pattern"
                    ));
                }
                if !prefix.is_empty() {
                    // The prefix must itself be a plausible start of a group id.
                    GroupId::new(prefix).map_err(|e| format!("group pattern `{text}`: {e}"))?;
                }
                Ok(GroupPattern::Prefix(prefix.to_owned()))
            }
            None => GroupId::new(text)
                .map(GroupPattern::Exact)
                .map_err(|e| format!("group `{text}`: {e}")),
        }
    }

    /// Whether the pattern covers `group`.
    pub fn covers(&self, group: &GroupId) -> bool {
        match self {
            GroupPattern::Exact(g) => g == group,
            GroupPattern::Prefix(p) => group.as_str().starts_with(p.as_str()),
        }
    }
}

/// What one token may do.
#[derive(Clone, Debug)]
pub struct Grant {
    /// For logs.
    pub name: String,
    /// Covered groups.
    pub groups: Vec<GroupPattern>,
    /// Read or read-write.
    pub access: Access,
    /// The token's request budget (shared by every request carrying it, on
    /// HTTP and MCP alike), if the file sets one.
    pub limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl Grant {
    /// Takes one request from the token's budget, or says how long to wait.
    pub fn admit(&self) -> Result<(), Duration> {
        match &self.limiter {
            None => Ok(()),
            Some(limiter) => limiter
                .check()
                .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now())),
        }
    }
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Denied {
    /// No `Authorization: Bearer` header.
    #[error("missing bearer token: send `Authorization: Bearer <token>`")]
    Missing,
    /// A header that is not a bearer token, or an unknown token.
    #[error("invalid bearer token")]
    Invalid,
    /// The token does not cover the group.
    #[error("this token is not scoped to this group")]
    OutOfScope,
    /// The token covers the group read-only.
    #[error("this token may only read this group")]
    ReadOnly,
}

/// The loaded tokens.
#[derive(Clone, Debug)]
pub struct Auth {
    by_digest: HashMap<[u8; 32], Grant>,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl Auth {
    /// Reads a tokens file.
    pub fn load(path: &Path) -> anyhow::Result<Auth> {
        let text = fs_err::read_to_string(path)?;
        Auth::parse(&text).map_err(|e| anyhow::anyhow!("tokens file {}: {e}", path.display()))
    }

    /// Parses a tokens file's text.
    pub fn parse(text: &str) -> Result<Auth, AuthConfigError> {
        let file: AuthFile = toml::from_str(text)?;
        if file.tokens.is_empty() {
            return Err(AuthConfigError::Empty);
        }
        let mut by_digest = HashMap::new();
        for (i, t) in file.tokens.into_iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(|| format!("token-{}", i + 1));
            let bad = |reason: String| AuthConfigError::Token {
                index: i + 1,
                name: name.clone(),
                reason,
            };
            if t.secret.chars().count() < MIN_SECRET_CHARS || t.secret.trim() != t.secret {
                return Err(bad(format!(
                    "secret must be at least {MIN_SECRET_CHARS} characters without surrounding spaces"
                )));
            }
            if t.groups.is_empty() {
                return Err(bad("groups is empty; list exact ids or `prefix*`".into()));
            }
            let groups = t
                .groups
                .iter()
                .map(|g| GroupPattern::parse(g))
                .collect::<Result<Vec<_>, _>>()
                .map_err(bad)?;
            let limiter = match (t.requests_per_second, t.burst) {
                (Some(rate), burst) => Some(Arc::new(RateLimiter::direct(
                    Quota::per_second(rate).allow_burst(burst.unwrap_or(rate)),
                ))),
                (None, Some(_)) => {
                    return Err(bad("burst needs requests_per_second".into()));
                }
                (None, None) => None,
            };
            let grant = Grant {
                name: name.clone(),
                groups,
                access: t.access,
                limiter,
            };
            if by_digest.insert(digest(&t.secret), grant).is_some() {
                return Err(bad("the same secret appears twice".into()));
            }
        }
        Ok(Auth { by_digest })
    }

    /// The grant of a presented `Authorization` header value.
    pub fn grant(&self, authorization: Option<&str>) -> Result<&Grant, Denied> {
        let value = authorization.ok_or(Denied::Missing)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(Denied::Invalid)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Denied::Invalid);
        }
        self.token(token.trim())
    }

    /// The grant of a presented secret (a stdio MCP caller's token, which
    /// comes from the environment rather than a header).
    pub fn token(&self, secret: &str) -> Result<&Grant, Denied> {
        self.by_digest.get(&digest(secret)).ok_or(Denied::Invalid)
    }

    /// Checks a grant against a group and the access a route needs.
    pub fn check(grant: &Grant, group: &GroupId, need: Access) -> Result<(), Denied> {
        if !grant.groups.iter().any(|p| p.covers(group)) {
            return Err(Denied::OutOfScope);
        }
        if grant.access < need {
            return Err(Denied::ReadOnly);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        [[tokens]]
        name = "acme-rw"
        secret = "acme-secret-0123456789"
        groups = ["acme"]
        access = "write"

        [[tokens]]
        secret = "reader-secret-0123456789"
        groups = ["team-*", "solo"]
        access = "read"
    "#;

    fn g(id: &str) -> GroupId {
        GroupId::new(id).unwrap()
    }

    #[test]
    fn scopes_and_access() {
        let auth = Auth::parse(FILE).unwrap();
        let rw = auth.grant(Some("Bearer acme-secret-0123456789")).unwrap();
        assert_eq!(rw.name, "acme-rw");
        assert_eq!(Auth::check(rw, &g("acme"), Access::Write), Ok(()));
        assert_eq!(
            Auth::check(rw, &g("acme2"), Access::Read),
            Err(Denied::OutOfScope),
            "an exact id is not a prefix"
        );
        let ro = auth.grant(Some("bearer reader-secret-0123456789")).unwrap();
        assert_eq!(ro.name, "token-2");
        assert_eq!(Auth::check(ro, &g("team-a"), Access::Read), Ok(()));
        assert_eq!(
            Auth::check(ro, &g("team-a"), Access::Write),
            Err(Denied::ReadOnly)
        );
        assert_eq!(
            Auth::check(ro, &g("teams"), Access::Read),
            Err(Denied::OutOfScope)
        );
        assert_eq!(Auth::check(ro, &g("solo"), Access::Read), Ok(()));
        assert_eq!(auth.grant(None).unwrap_err(), Denied::Missing);
        assert_eq!(
            auth.grant(Some("Basic acme-secret-0123456789"))
                .unwrap_err(),
            Denied::Invalid
        );
        assert_eq!(
            auth.grant(Some("Bearer acme-secret-012345678"))
                .unwrap_err(),
            Denied::Invalid
        );
        assert_eq!(auth.grant(Some("Bearer")).unwrap_err(), Denied::Invalid);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let cases = [
            ("", "no [[tokens]]"),
            (
                "[[tokens]]\nsecret='short'\ngroups=['a']\naccess='read'",
                "at least 16",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=[]\naccess='read'",
                "groups is empty",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['bad id']\naccess='read'",
                "group `bad id`",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a*b*']\naccess='read'",
                "may only end",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a']\naccess='admin'",
                "not a tokens file",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a']\naccess='read'\nscope='x'",
                "not a tokens file",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a']\naccess='read'\n\
                 [[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['b']\naccess='read'",
                "appears twice",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a']\naccess='read'\nburst=3",
                "burst needs requests_per_second",
            ),
            (
                "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a']\naccess='read'\n\
                 requests_per_second=0",
                "not a tokens file",
            ),
        ];
        for (text, expected) in cases {
            let e = Auth::parse(text).unwrap_err().to_string();
            assert!(e.contains(expected), "{text:?}: {e}");
        }
        let all =
            Auth::parse("[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['*']\naccess='read'")
                .unwrap();
        let grant = all.grant(Some("Bearer 0123456789abcdefgh")).unwrap();
        assert_eq!(Auth::check(grant, &g("anything"), Access::Read), Ok(()));
    }

    #[test]
    fn a_token_over_its_rate_is_told_when_to_come_back() {
        let auth = Auth::parse(
            "[[tokens]]\nsecret='0123456789abcdefgh'\ngroups=['a']\naccess='read'\n\
             requests_per_second=1\nburst=2\n\
             [[tokens]]\nsecret='unlimited-0123456789'\ngroups=['a']\naccess='read'",
        )
        .unwrap();
        let limited = auth.grant(Some("Bearer 0123456789abcdefgh")).unwrap();
        assert_eq!(limited.admit(), Ok(()));
        assert_eq!(limited.admit(), Ok(()));
        let wait = limited.admit().unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        // The budget is the token's, whichever request presents it.
        let again = auth.grant(Some("Bearer 0123456789abcdefgh")).unwrap();
        assert!(again.admit().is_err());
        let free = auth.grant(Some("Bearer unlimited-0123456789")).unwrap();
        assert!((0..1000).all(|_| free.admit().is_ok()));
    }
}
