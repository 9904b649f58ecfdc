//! Time expressions resolved against an episode's reference time.
//!
//! Models and the offline extractor return either ISO dates or relative
//! expressions ("since March", "last year", "two weeks ago"); this one parser
//! turns both into instants, so every extractor gets the same semantics.

use chronicle_model::Timestamp;
use chrono::{DateTime, Datelike, Days, Duration, Months, NaiveDate, TimeZone, Utc, Weekday};

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

const NUMBER_WORDS: [&str; 13] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
];

/// Words that introduce a time expression and carry no meaning of their own.
const LEADING_WORDS: [&str; 12] = [
    "since",
    "from",
    "in",
    "on",
    "at",
    "as of",
    "starting",
    "beginning",
    "until",
    "till",
    "by",
    "of",
];

/// Resolves `expression` against `reference`; `None` when it names no time.
///
/// Dates without a time of day mean midnight UTC. A bare month ("March") is
/// the most recent such month at or before the reference; "last year" is
/// January 1st of the previous year.
pub fn resolve(expression: &str, reference: Timestamp) -> Option<Timestamp> {
    let text = expression.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(t) = Timestamp::parse_rfc3339(text) {
        return Some(t);
    }
    let lower = normalize(text);
    let mut s = lower.as_str();
    loop {
        let before = s;
        for w in LEADING_WORDS {
            if let Some(rest) = s.strip_prefix(w).and_then(|r| r.strip_prefix(' ')) {
                s = rest.trim_start();
            }
        }
        s = s.strip_prefix("the ").unwrap_or(s);
        if s == before {
            break;
        }
    }
    let now = reference.to_datetime();
    let today = now.date_naive();
    let at = |d: NaiveDate| {
        Timestamp::from_datetime(Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?)).ok()
    };
    match s {
        "now" | "today" | "currently" | "present" | "the present" | "right now" | "nowadays" => {
            return Some(reference);
        }
        "yesterday" => return at(today.checked_sub_days(Days::new(1))?),
        "tomorrow" => return at(today.checked_add_days(Days::new(1))?),
        "last week" => return at(today.checked_sub_days(Days::new(7))?),
        "next week" => return at(today.checked_add_days(Days::new(7))?),
        "this week" => {
            return at(today
                .checked_sub_days(Days::new(u64::from(today.weekday().num_days_from_monday())))?);
        }
        "last month" => return at(first_of_month(today).checked_sub_months(Months::new(1))?),
        "this month" => return at(first_of_month(today)),
        "next month" => return at(first_of_month(today).checked_add_months(Months::new(1))?),
        "last year" => return at(NaiveDate::from_ymd_opt(today.year().checked_sub(1)?, 1, 1)?),
        "this year" => return at(NaiveDate::from_ymd_opt(today.year(), 1, 1)?),
        "next year" => return at(NaiveDate::from_ymd_opt(today.year().checked_add(1)?, 1, 1)?),
        _ => {}
    }
    if let Some(t) = parse_ago(s, now) {
        return Timestamp::from_datetime(t).ok();
    }
    if let Some(d) = parse_date(s, today) {
        return at(d);
    }
    None
}

fn normalize(text: &str) -> String {
    text.to_lowercase()
        .replace([',', '.'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn first_of_month(d: NaiveDate) -> NaiveDate {
    d.with_day(1).expect("day 1 exists")
}

fn number(word: &str) -> Option<i64> {
    if let Ok(n) = word.parse::<i64>() {
        return Some(n);
    }
    if word == "a" || word == "an" {
        return Some(1);
    }
    NUMBER_WORDS
        .iter()
        .position(|w| *w == word)
        .map(|n| n as i64)
}

/// "two weeks ago", "3 days ago", "a year ago".
fn parse_ago(s: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let rest = s.strip_suffix(" ago")?;
    let (n, unit) = rest.split_once(' ')?;
    let n = number(n)?;
    let unit = unit.trim_end_matches('s');
    // Checked all the way: "300000000 days ago" is text, not a reason to panic.
    let back = |d: Option<Duration>| now.checked_sub_signed(d?);
    Some(match unit {
        "minute" => back(Duration::try_minutes(n))?,
        "hour" => back(Duration::try_hours(n))?,
        "day" => back(Duration::try_days(n))?,
        "week" => back(Duration::try_weeks(n))?,
        "month" => now.checked_sub_months(Months::new(u32::try_from(n).ok()?))?,
        "year" => now.checked_sub_months(Months::new(u32::try_from(n.checked_mul(12)?).ok()?))?,
        _ => return None,
    })
}

fn month(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('.');
    MONTHS
        .iter()
        .position(|m| *m == w || (w.len() >= 3 && m.starts_with(w) && w.len() <= m.len()))
        .map(|i| i as u32 + 1)
}

fn weekday(word: &str) -> Option<Weekday> {
    word.parse::<Weekday>().ok()
}

fn day(word: &str) -> Option<u32> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

fn year(word: &str) -> Option<i32> {
    let y: i32 = word.parse().ok()?;
    (1000..=9999).contains(&y).then_some(y)
}

/// Absolute and partial dates: "2024-01-05", "2020", "march", "march 2024",
/// "march 3", "march 3 2024", "3 march 2024", "monday", "last monday".
fn parse_date(s: &str, today: NaiveDate) -> Option<NaiveDate> {
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Some(d);
    }
    if let Ok(d) = NaiveDate::parse_from_str(&format!("{s}-01"), "%Y-%m-%d") {
        return Some(d);
    }
    let words: Vec<&str> = s.split(' ').collect();
    let most_recent = |m: u32, d: u32| {
        let this_year = NaiveDate::from_ymd_opt(today.year(), m, d)?;
        if this_year <= today {
            Some(this_year)
        } else {
            NaiveDate::from_ymd_opt(today.year().checked_sub(1)?, m, d)
        }
    };
    match words.as_slice() {
        [y] if year(y).is_some() => NaiveDate::from_ymd_opt(year(y)?, 1, 1),
        [m] if month(m).is_some() => most_recent(month(m)?, 1),
        [w] | ["last", w] if weekday(w).is_some() => {
            let target = weekday(w)?;
            (1..=7)
                .filter_map(|n| today.checked_sub_days(Days::new(n)))
                .find(|d| d.weekday() == target)
        }
        ["last", m] if month(m).is_some() => {
            let m = month(m)?;
            let this_year = NaiveDate::from_ymd_opt(today.year(), m, 1)?;
            if this_year < first_of_month(today) {
                Some(this_year)
            } else {
                NaiveDate::from_ymd_opt(today.year().checked_sub(1)?, m, 1)
            }
        }
        [m, y] if month(m).is_some() && year(y).is_some() => {
            NaiveDate::from_ymd_opt(year(y)?, month(m)?, 1)
        }
        [m, d] if month(m).is_some() && day(d).is_some() => most_recent(month(m)?, day(d)?),
        [d, m] if month(m).is_some() && day(d).is_some() => most_recent(month(m)?, day(d)?),
        [m, d, y] if month(m).is_some() && day(d).is_some() && year(y).is_some() => {
            NaiveDate::from_ymd_opt(year(y)?, month(m)?, day(d)?)
        }
        [d, m, y] if month(m).is_some() && day(d).is_some() && year(y).is_some() => {
            NaiveDate::from_ymd_opt(year(y)?, month(m)?, day(d)?)
        }
        ["early" | "mid" | "late" | "end" | "beginning", rest @ ..] if !rest.is_empty() => {
            parse_date(rest.join(" ").trim_start_matches("of "), today)
        }
        _ => None,
    }
}

/// A span of time a question names: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    /// First instant inside.
    pub start: Timestamp,
    /// First instant after.
    pub end: Timestamp,
    /// A month named without its year ("camping in June"): that month of
    /// any year. Which June the asker means is not in the words, and the
    /// most recent one before now may be long after the conversation; the
    /// text channels choose among the Junes.
    pub every_year: bool,
}

impl Period {
    /// Whether `t` falls inside.
    pub fn contains(&self, t: Timestamp) -> bool {
        if self.every_year {
            return t.to_datetime().month() == self.start.to_datetime().month();
        }
        self.start <= t && t < self.end
    }
}

/// The first span of time `text` names, for narrowing a search ("in May
/// 2023", "on October 13, 2023", "in 2022", "last year", "yesterday"),
/// resolved against `reference` like [`resolve`]. A date names its day, a
/// month its month, a year its year. A bare month counts only after "in",
/// "during" or "since" ("May I ..." names no time); a bare number only
/// when it looks like a year (1900–2100).
pub fn period_in(text: &str, reference: Timestamp) -> Option<Period> {
    let lower = normalize(&text.replace(|c: char| !c.is_alphanumeric() && c != '-', " "));
    let words: Vec<&str> = lower.split(' ').filter(|w| !w.is_empty()).collect();
    let today = reference.to_datetime().date_naive();
    let at = |d: NaiveDate| {
        Timestamp::from_datetime(Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?)).ok()
    };
    let span = |start: NaiveDate, end: Option<NaiveDate>| {
        Some(Period {
            start: at(start)?,
            end: at(end?)?,
            every_year: false,
        })
    };
    let day_span = |d: NaiveDate| span(d, d.checked_add_days(Days::new(1)));
    let month_span = |y: i32, m: u32| {
        let start = NaiveDate::from_ymd_opt(y, m, 1)?;
        span(start, start.checked_add_months(Months::new(1)))
    };
    let year_span = |y: i32| {
        span(
            NaiveDate::from_ymd_opt(y, 1, 1)?,
            NaiveDate::from_ymd_opt(y.checked_add(1)?, 1, 1),
        )
    };
    let plausible_year = |w: &str| year(w).filter(|y| (1900..=2100).contains(y));
    for i in 0..words.len() {
        let w = &words[i..];
        let found = match w {
            [m, d, y, ..] if month(m).is_some() && day(d).is_some() && year(y).is_some() => {
                day_span(NaiveDate::from_ymd_opt(year(y)?, month(m)?, day(d)?)?)
            }
            [d, m, y, ..] if month(m).is_some() && day(d).is_some() && year(y).is_some() => {
                day_span(NaiveDate::from_ymd_opt(year(y)?, month(m)?, day(d)?)?)
            }
            [m, y, ..] if month(m).is_some() && plausible_year(y).is_some() => {
                month_span(year(y)?, month(m)?)
            }
            ["last", "year", ..] => year_span(today.year().checked_sub(1)?),
            ["this", "year", ..] => year_span(today.year()),
            ["last", "month", ..] => {
                let start = first_of_month(today).checked_sub_months(Months::new(1))?;
                month_span(start.year(), start.month())
            }
            ["this", "month", ..] => month_span(today.year(), today.month()),
            ["last", "week", ..] => span(today.checked_sub_days(Days::new(7))?, Some(today)),
            ["yesterday", ..] => day_span(today.checked_sub_days(Days::new(1))?),
            // "in May" alone is May of any year, "since May" the most recent
            // May; "in May 2023" and "in May 5, 2023" are the month or the
            // day the next word starts.
            [lead @ ("in" | "during" | "since"), m, rest @ ..]
                if month(m).is_some()
                    && m.len() >= 3
                    && !rest
                        .first()
                        .is_some_and(|x| year(x).is_some() || day(x).is_some()) =>
            {
                let start = parse_date(m, today)?;
                let month = month_span(start.year(), start.month())?;
                Some(Period {
                    every_year: *lead != "since",
                    ..month
                })
            }
            [y, ..] if plausible_year(y).is_some() => year_span(year(y)?),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn huge_and_edge_amounts_are_no_dates_not_panics() {
        let r = ts("2025-01-01T00:00:00Z");
        for e in [
            "300000000 days ago",
            "9223372036854775807 weeks ago",
            "99999999999 hours ago",
            "4294967296 months ago",
            "999999999 years ago",
        ] {
            assert_eq!(resolve(e, r), None, "{e}");
        }
        for edge in ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"] {
            for e in [
                "yesterday",
                "tomorrow",
                "last week",
                "next week",
                "this week",
                "monday",
                "last year",
                "next year",
                "march 3",
                "last june",
            ] {
                let _ = resolve(e, ts(edge));
            }
        }
    }

    #[test]
    fn a_question_names_its_period() {
        let r = ts("2024-03-10T12:00:00Z");
        let p = |q: &str| period_in(q, r).map(|p| (p.start.to_string(), p.end.to_string()));
        let span = |a: &str, b: &str| Some((ts(a).to_string(), ts(b).to_string()));
        assert_eq!(
            p("What did Gina find for her store on 1 February, 2023?"),
            span("2023-02-01T00:00:00Z", "2023-02-02T00:00:00Z")
        );
        assert_eq!(
            p("What painting did she show on October 13, 2023?"),
            span("2023-10-13T00:00:00Z", "2023-10-14T00:00:00Z")
        );
        assert_eq!(
            p("What did they paint in July 2023?"),
            span("2023-07-01T00:00:00Z", "2023-08-01T00:00:00Z")
        );
        assert_eq!(
            p("How many times has she gone to the beach in 2023?"),
            span("2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z")
        );
        assert_eq!(
            p("When did Melanie go camping in June?"),
            span("2023-06-01T00:00:00Z", "2023-07-01T00:00:00Z")
        );
        // A month without its year is that month of any year; with its
        // year, or after "since", it is one month.
        let june = period_in("When did Melanie go camping in June?", r).expect("a period");
        assert!(june.every_year);
        for inside in [
            "2019-06-30T23:00:00Z",
            "2023-06-01T00:00:00Z",
            "2026-06-15T00:00:00Z",
        ] {
            assert!(june.contains(ts(inside)), "{inside}");
        }
        for outside in ["2023-05-31T23:59:59Z", "2023-07-01T00:00:00Z"] {
            assert!(!june.contains(ts(outside)), "{outside}");
        }
        assert!(!period_in("in July 2023", r).expect("a period").every_year);
        assert_eq!(
            p("What did they paint in July 2021?"),
            span("2021-07-01T00:00:00Z", "2021-08-01T00:00:00Z")
        );
        assert_eq!(
            p("Where was she in May 5, 2022?"),
            span("2022-05-05T00:00:00Z", "2022-05-06T00:00:00Z")
        );
        assert!(!period_in("since June", r).expect("a period").every_year);
        assert_eq!(
            p("what happened last year"),
            span("2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z")
        );
        assert_eq!(
            p("and yesterday?"),
            span("2024-03-09T00:00:00Z", "2024-03-10T00:00:00Z")
        );
        for none in [
            "May I ask where Alice lives?",
            "Who ran 1000 meters?",
            "What did Caroline research?",
            "",
        ] {
            assert_eq!(p(none), None, "{none}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_expression_at_any_time_never_panics(e in "\\PC{0,40}", n in proptest::num::i64::ANY, secs in -62_000_000_000i64..250_000_000_000i64) {
            let r = Timestamp::from_micros(secs.saturating_mul(1_000_000)).unwrap_or(Timestamp::EPOCH);
            let _ = resolve(&e, r);
            let _ = resolve(&format!("{n} days ago"), r);
            let _ = resolve(&format!("{} weeks ago", n.unsigned_abs()), r);
            let _ = period_in(&e, r);
            let _ = period_in(&format!("in may {n} and on {e}"), r);
        }
    }

    #[test]
    fn relative_expressions() {
        let r = ts("2025-03-15T10:30:00Z");
        let cases = [
            ("2024-01-05", "2024-01-05T00:00:00Z"),
            ("2025-03-01T09:00:00+08:00", "2025-03-01T01:00:00Z"),
            ("yesterday", "2025-03-14T00:00:00Z"),
            ("since March", "2025-03-01T00:00:00Z"),
            ("in January", "2025-01-01T00:00:00Z"),
            ("since June", "2024-06-01T00:00:00Z"),
            ("last year", "2024-01-01T00:00:00Z"),
            ("last month", "2025-02-01T00:00:00Z"),
            ("two weeks ago", "2025-03-01T10:30:00Z"),
            ("3 days ago", "2025-03-12T10:30:00Z"),
            ("a year ago", "2024-03-15T10:30:00Z"),
            ("in 2020", "2020-01-01T00:00:00Z"),
            ("March 2024", "2024-03-01T00:00:00Z"),
            ("on March 3, 2024", "2024-03-03T00:00:00Z"),
            ("3 March 2024", "2024-03-03T00:00:00Z"),
            ("March 20", "2024-03-20T00:00:00Z"),
            ("last Monday", "2025-03-10T00:00:00Z"),
            ("since the beginning of 2023", "2023-01-01T00:00:00Z"),
            ("2019-06", "2019-06-01T00:00:00Z"),
        ];
        for (expr, want) in cases {
            assert_eq!(resolve(expr, r), Some(ts(want)), "{expr}");
        }
        assert_eq!(resolve("now", r), Some(r));
        for nothing in [
            "",
            "whenever",
            "the other day",
            "march madness",
            "31 february 2024",
        ] {
            assert_eq!(resolve(nothing, r), None, "{nothing}");
        }
    }
}
