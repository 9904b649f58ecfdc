//! Instants and half-open time windows.
//!
//! chronicle keeps two time axes (valid time and transaction time); both use
//! the same [`Timestamp`] and [`Window`] so the temporal rules live in one place.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::TimestampError;

/// A UTC instant with microsecond precision, stored as microseconds since the
/// Unix epoch so that it encodes losslessly as Avro `timestamp-micros`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// Earliest accepted instant: 0001-01-01T00:00:00Z.
    pub const MIN: Timestamp = Timestamp(-62_135_596_800_000_000);
    /// Latest accepted instant: 9999-12-31T23:59:59.999999Z.
    pub const MAX: Timestamp = Timestamp(253_402_300_799_999_999);
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// Builds a timestamp from microseconds since the epoch, rejecting
    /// instants outside years 1..=9999 (they cannot be written as RFC 3339).
    pub fn from_micros(micros: i64) -> Result<Self, TimestampError> {
        if (Self::MIN.0..=Self::MAX.0).contains(&micros) {
            Ok(Timestamp(micros))
        } else {
            Err(TimestampError::OutOfRange(micros))
        }
    }

    /// Builds a timestamp from milliseconds since the epoch (Kafka's unit).
    pub fn from_millis(millis: i64) -> Result<Self, TimestampError> {
        Self::from_micros(millis.saturating_mul(1000))
    }

    /// Microseconds since the Unix epoch.
    pub fn as_micros(self) -> i64 {
        self.0
    }

    /// Milliseconds since the Unix epoch, rounded down.
    pub fn as_millis(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// Truncates a chrono instant to microseconds.
    pub fn from_datetime(dt: DateTime<Utc>) -> Result<Self, TimestampError> {
        Self::from_micros(dt.timestamp_micros())
    }

    /// The same instant as a chrono value.
    pub fn to_datetime(self) -> DateTime<Utc> {
        Utc.timestamp_micros(self.0)
            .single()
            .expect("range checked at construction")
    }

    /// Parses RFC 3339 (any offset, converted to UTC; finer than microseconds
    /// is truncated).
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimestampError> {
        let dt = DateTime::parse_from_rfc3339(text.trim()).map_err(|e| TimestampError::Parse {
            input: truncate_for_message(text),
            reason: e.to_string(),
        })?;
        Self::from_datetime(dt.with_timezone(&Utc))
    }

    /// RFC 3339 in UTC, with fractional seconds only when they are non-zero.
    pub fn to_rfc3339(self) -> String {
        self.to_datetime()
            .to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    /// This instant moved by a signed number of microseconds, clamped to the
    /// accepted range.
    pub fn saturating_add_micros(self, delta: i64) -> Self {
        Timestamp(self.0.saturating_add(delta).clamp(Self::MIN.0, Self::MAX.0))
    }
}

fn truncate_for_message(text: &str) -> String {
    text.chars().take(64).collect()
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339())
    }
}

impl FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_rfc3339(s)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "date-time" })
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&text).map_err(serde::de::Error::custom)
    }
}

/// A half-open interval `[start, end)`; `None` is an open end.
///
/// Valid time of a fact is `[valid_at, invalid_at)`; transaction time is
/// `[created_at, expired_at)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Inclusive start; `None` means "since forever".
    pub start: Option<Timestamp>,
    /// Exclusive end; `None` means "still holds".
    pub end: Option<Timestamp>,
}

impl Window {
    /// A window from its two (possibly open) ends.
    pub fn new(start: Option<Timestamp>, end: Option<Timestamp>) -> Self {
        Window { start, end }
    }

    /// Whether instant `t` falls inside the window.
    pub fn contains(&self, t: Timestamp) -> bool {
        self.start.is_none_or(|s| s <= t) && self.end.is_none_or(|e| t < e)
    }

    /// Whether two windows share at least one instant.
    pub fn overlaps(&self, other: &Window) -> bool {
        let starts_before_other_ends = match (self.start, other.end) {
            (Some(s), Some(e)) => s < e,
            _ => true,
        };
        let other_starts_before_self_ends = match (other.start, self.end) {
            (Some(s), Some(e)) => s < e,
            _ => true,
        };
        starts_before_other_ends
            && other_starts_before_self_ends
            && !self.is_empty()
            && !other.is_empty()
    }

    /// Whether two non-empty windows overlap or meet end to start
    /// (`[1990, 1995)` and `[1995, 2000)`): one interval once joined.
    pub fn touches(&self, other: &Window) -> bool {
        let meets = |a: &Window, b: &Window| a.end.is_some() && a.end == b.start;
        self.overlaps(other)
            || (!self.is_empty() && !other.is_empty() && (meets(self, other) || meets(other, self)))
    }

    /// A window whose end is not after its start holds no instant.
    pub fn is_empty(&self) -> bool {
        matches!((self.start, self.end), (Some(s), Some(e)) if e <= s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn rfc3339_round_trip_keeps_microseconds() {
        let t = ts("2025-03-01T12:00:00.123456+08:00");
        assert_eq!(t.to_rfc3339(), "2025-03-01T04:00:00.123456Z");
        assert_eq!(ts(&t.to_rfc3339()), t);
        assert_eq!(
            ts("2025-03-01T04:00:00.1234569Z"),
            t,
            "nanoseconds truncate"
        );
    }

    #[test]
    fn bad_and_out_of_range_timestamps_are_typed_errors() {
        assert!(matches!(
            "yesterday".parse::<Timestamp>(),
            Err(TimestampError::Parse { .. })
        ));
        assert!(matches!(
            Timestamp::from_micros(i64::MAX),
            Err(TimestampError::OutOfRange(_))
        ));
        assert!(Timestamp::from_micros(Timestamp::MAX.as_micros()).is_ok());
    }

    #[test]
    fn open_windows() {
        let jan = ts("2025-01-01T00:00:00Z");
        let mar = ts("2025-03-01T00:00:00Z");
        let feb = ts("2025-02-28T00:00:00Z");
        let w = Window::new(Some(jan), Some(mar));
        assert!(w.contains(jan) && w.contains(feb) && !w.contains(mar));
        assert!(Window::new(None, None).contains(feb));
        assert!(
            Window::new(Some(mar), None)
                .overlaps(&Window::new(None, Some(ts("2025-04-01T00:00:00Z"))))
        );
        assert!(!Window::new(Some(jan), Some(mar)).overlaps(&Window::new(Some(mar), None)));
    }

    fn opt_ts() -> impl Strategy<Value = Option<Timestamp>> {
        proptest::option::of((0i64..1_000).prop_map(Timestamp))
    }

    proptest! {
        #[test]
        fn overlap_means_a_shared_instant(a in opt_ts(), b in opt_ts(), c in opt_ts(), d in opt_ts()) {
            let w1 = Window::new(a, b);
            let w2 = Window::new(c, d);
            let shared = (-1i64..1_001).map(Timestamp).any(|t| w1.contains(t) && w2.contains(t));
            prop_assert_eq!(w1.overlaps(&w2), shared);
            prop_assert_eq!(w1.overlaps(&w2), w2.overlaps(&w1));
        }
    }
}
