//! Tenant identity.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::GroupIdError;

/// A tenant's graph partition, validated at the edge.
///
/// It becomes a Kafka key, a ScyllaDB partition key, an index filter term and
/// a file-safe name, so it is limited to 1..=128 bytes of `[A-Za-z0-9_.-]`,
/// not starting with '.' or '-' (no `.`, `..` or flag-like ids).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema)]
#[schemars(
    inline,
    description = "The tenant: 1..=128 characters of A-Z a-z 0-9 _ . - (not starting with . or -)."
)]
#[serde(transparent)]
pub struct GroupId(String);

impl GroupId {
    /// The longest accepted group id, in bytes.
    pub const MAX_LEN: usize = 128;

    /// Validates and wraps a group id.
    pub fn new(id: impl Into<String>) -> Result<Self, GroupIdError> {
        let id = id.into();
        if id.is_empty() {
            return Err(GroupIdError::Empty);
        }
        if let Some((position, ch)) = id
            .chars()
            .enumerate()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(GroupIdError::InvalidChar { ch, position });
        }
        if let Some(first @ ('.' | '-')) = id.chars().next() {
            return Err(GroupIdError::BadStart { first });
        }
        if id.len() > Self::MAX_LEN {
            return Err(GroupIdError::TooLong {
                len: id.len(),
                max: Self::MAX_LEN,
            });
        }
        Ok(GroupId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GroupId({})", self.0)
    }
}

impl std::str::FromStr for GroupId {
    type Err = GroupIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GroupId::new(s)
    }
}

impl<'de> Deserialize<'de> for GroupId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        GroupId::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_documented_charset() {
        for ok in [
            "tenant_06",
            "conv-26",
            "a",
            "A.b-c_9",
            "_default",
            "v1.",
            &"x".repeat(128),
        ] {
            assert!(GroupId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_with_typed_errors() {
        assert_eq!(GroupId::new(""), Err(GroupIdError::Empty));
        assert_eq!(
            GroupId::new("x".repeat(129)),
            Err(GroupIdError::TooLong { len: 129, max: 128 })
        );
        assert_eq!(
            GroupId::new("a/b"),
            Err(GroupIdError::InvalidChar {
                ch: '/',
                position: 1
            })
        );
        assert!(
            GroupId::new("tenant é")
                .unwrap_err()
                .to_string()
                .contains("position 6")
        );
        assert!(serde_json::from_str::<GroupId>("\"bad id\"").is_err());
        for (bad, first) in [
            (".", '.'),
            ("..", '.'),
            ("-", '-'),
            ("-rf", '-'),
            (".git", '.'),
        ] {
            assert_eq!(GroupId::new(bad), Err(GroupIdError::BadStart { first }));
        }
    }
}
