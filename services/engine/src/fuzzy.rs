//! The fuzzy tier of entity resolution: character shingles, MinHash
//! signatures and LSH buckets, with an entropy guard so short or repetitive
//! names ("Al", "Bob", "aaaa") never fuzzy-match, and a distinguishing-token
//! guard so near-identical names of different things ("FC Barcelona" /
//! "FC Barcelona B", "Henry V" / "Henry VI", "J. Smith" / "K. Smith") never
//! merge however similar their characters are.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Signature length: `BANDS * ROWS` hash functions.
const BANDS: usize = 8;
const ROWS: usize = 4;
const SIGNATURE: usize = BANDS * ROWS;
/// Names with less character entropy than this are too plain to fuzzy-match.
const MIN_ENTROPY: f64 = 1.5;
/// Single-token names shorter than this are too short to fuzzy-match.
const MIN_SINGLE_TOKEN_LEN: usize = 6;

/// The key fuzzy matching works on: lower-case alphanumerics and single spaces.
pub fn fuzzy_key(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a name carries enough information for fuzzy matching.
pub fn has_enough_entropy(key: &str) -> bool {
    let compact: Vec<char> = key.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return false;
    }
    let tokens = key.split_whitespace().count();
    if tokens < 2 && compact.len() < MIN_SINGLE_TOKEN_LEN {
        return false;
    }
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    for c in &compact {
        *counts.entry(*c).or_default() += 1;
    }
    let n = compact.len() as f64;
    let entropy: f64 = counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum();
    entropy >= MIN_ENTROPY
}

/// Words that mark a different team, edition or generation of the same name.
const MARKER_WORDS: &[&str] = &[
    "academy", "amateur", "amateurs", "junior", "juniors", "jr", "ladies", "reserve", "reserves",
    "senior", "seniors", "sr", "women", "womens", "youth",
];

/// Whether a token can tell two otherwise equal names apart: an initial or
/// other one- or two-letter token, anything with a digit ("2", "U21",
/// "2nd"), a roman numeral, or a marker word ("Reserves", "Jr").
fn is_distinguishing(token: &str) -> bool {
    token.chars().count() <= 2
        || token.chars().any(|c| c.is_numeric())
        || is_roman_numeral(token)
        || MARKER_WORDS.contains(&token)
}

/// `i`..`xxxix` written the usual way (longer letter runs are words: "mix", "civil").
fn is_roman_numeral(token: &str) -> bool {
    let rest = token.trim_start_matches('x');
    if token.len() - rest.len() > 3 {
        return false;
    }
    matches!(
        rest,
        "" | "i" | "ii" | "iii" | "iv" | "v" | "vi" | "vii" | "viii" | "ix"
    ) && !token.is_empty()
}

/// Whether two names differ by a token that makes them different things.
///
/// Names equal once spaces and punctuation are gone ("F.C. Barcelona" /
/// "FC Barcelona") do not differ; otherwise any distinguishing token present
/// in one name and not the other does, unless it is an initial of a word
/// only the other name has ("J. Smith" / "John Smith").
pub fn differ_by_distinguishing_token(a: &str, b: &str) -> bool {
    let (ka, kb) = (fuzzy_key(a), fuzzy_key(b));
    let compact = |k: &str| k.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    if compact(&ka) == compact(&kb) {
        return false;
    }
    let count = |k: &str| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for t in k.split_whitespace() {
            *m.entry(t.to_owned()).or_default() += 1;
        }
        m
    };
    let (ta, tb) = (count(&ka), count(&kb));
    let unmatched = |x: &BTreeMap<String, usize>, y: &BTreeMap<String, usize>| -> Vec<String> {
        x.iter()
            .filter(|(t, n)| y.get(*t).copied().unwrap_or(0) < **n)
            .map(|(t, _)| t.clone())
            .collect()
    };
    let (ua, ub) = (unmatched(&ta, &tb), unmatched(&tb, &ta));
    // A short token that starts an unmatched word of the other name is its
    // abbreviation ("Rob P" / "Robert Paulson"), not a different thing.
    let tells_apart = |token: &String, others: &[String]| {
        let abbreviates = token.chars().count() <= 2
            && !is_roman_numeral(token)
            && token.chars().all(char::is_alphabetic)
            && others
                .iter()
                .any(|o| o.starts_with(token.as_str()) && o != token);
        is_distinguishing(token) && !abbreviates
    };
    ua.iter().any(|t| tells_apart(t, &ub)) || ub.iter().any(|t| tells_apart(t, &ua))
}

/// 3-character shingles of the key with spaces removed.
pub fn shingles(key: &str) -> BTreeSet<String> {
    let compact: Vec<char> = key.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.len() < 3 {
        return BTreeSet::from([compact.iter().collect()]);
    }
    compact.windows(3).map(|w| w.iter().collect()).collect()
}

/// Jaccard similarity of two shingle sets.
pub fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count() as f64;
    let union = a.union(b).count() as f64;
    inter / union
}

/// A stable 64-bit hash (FNV-1a then a splitmix finalizer); stable across
/// runs and platforms, unlike `std`'s hasher.
fn hash(text: &str, seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in text.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The MinHash signature of a shingle set.
pub fn signature(shingles: &BTreeSet<String>) -> [u64; SIGNATURE] {
    let mut sig = [u64::MAX; SIGNATURE];
    for s in shingles {
        for (i, slot) in sig.iter_mut().enumerate() {
            *slot = (*slot).min(hash(s, i as u64));
        }
    }
    sig
}

fn band_keys(sig: &[u64; SIGNATURE]) -> impl Iterator<Item = (u8, u64)> + '_ {
    (0..BANDS).map(move |b| {
        let mut h = b as u64;
        for v in &sig[b * ROWS..(b + 1) * ROWS] {
            h = hash(&v.to_string(), h);
        }
        (b as u8, h)
    })
}

/// LSH buckets over the entities of one group.
#[derive(Clone, Debug, Default)]
pub struct LshIndex {
    buckets: BTreeMap<(u8, u64), BTreeSet<Uuid>>,
    keys: BTreeMap<Uuid, String>,
}

impl LshIndex {
    /// Adds (or re-adds) an entity's name.
    pub fn insert(&mut self, uuid: Uuid, name: &str) {
        self.remove(uuid);
        let key = fuzzy_key(name);
        if !has_enough_entropy(&key) {
            return;
        }
        let sig = signature(&shingles(&key));
        for band in band_keys(&sig) {
            self.buckets.entry(band).or_default().insert(uuid);
        }
        self.keys.insert(uuid, key);
    }

    /// Forgets an entity.
    pub fn remove(&mut self, uuid: Uuid) {
        if let Some(key) = self.keys.remove(&uuid) {
            let sig = signature(&shingles(&key));
            for band in band_keys(&sig) {
                if let Some(set) = self.buckets.get_mut(&band) {
                    set.remove(&uuid);
                    if set.is_empty() {
                        self.buckets.remove(&band);
                    }
                }
            }
        }
    }

    /// Entities whose names have shingle Jaccard ≥ `threshold` with `name`
    /// and no distinguishing token between them, best first (ties by id, so the answer is deterministic).
    pub fn matches(&self, name: &str, threshold: f64) -> Vec<(Uuid, f64)> {
        let key = fuzzy_key(name);
        if !has_enough_entropy(&key) {
            return Vec::new();
        }
        let sh = shingles(&key);
        let sig = signature(&sh);
        let mut candidates = BTreeSet::new();
        for band in band_keys(&sig) {
            if let Some(set) = self.buckets.get(&band) {
                candidates.extend(set.iter().copied());
            }
        }
        let mut out: Vec<(Uuid, f64)> = candidates
            .into_iter()
            .filter_map(|u| {
                let other = self.keys.get(&u)?;
                let j = jaccard(&sh, &shingles(other));
                (j >= threshold && !differ_by_distinguishing_token(&key, other)).then_some((u, j))
            })
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_guard() {
        assert!(!has_enough_entropy(&fuzzy_key("Al")));
        assert!(!has_enough_entropy(&fuzzy_key("Bob")));
        assert!(!has_enough_entropy(&fuzzy_key("aaaaaaaa")));
        assert!(has_enough_entropy(&fuzzy_key("Maya Whitfield")));
        assert!(has_enough_entropy(&fuzzy_key("Kowalski")));
    }

    #[test]
    fn near_duplicates_match_and_others_do_not() {
        let mut idx = LshIndex::default();
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        idx.insert(a, "International Business Machines Corporation");
        idx.insert(b, "Maya Whitfield");
        idx.insert(c, "Maya Bauer");
        let m = idx.matches("International Business Machines Corporatio", 0.9);
        assert_eq!(m.first().map(|x| x.0), Some(a));
        assert!(idx.matches("Maya Whitfield-Jones", 0.9).is_empty());
        assert!(idx.matches("Maya Bauer", 0.9).iter().all(|x| x.0 == c));
        idx.remove(a);
        assert!(
            idx.matches("International Business Machines Corporation", 0.9)
                .is_empty()
        );
    }

    #[test]
    fn distinguishing_tokens_keep_names_apart() {
        for (a, b) in [
            ("FC Barcelona", "FC Barcelona B"),
            ("Real Madrid C", "Real Madrid C.F."),
            ("Villarreal CF", "Villarreal CF B"),
            ("Manchester United", "Manchester United Reserves"),
            ("Henry V", "Henry VI"),
            ("Apollo 11", "Apollo 12"),
            ("John A. Smithson", "John B. Smithson"),
            ("Borussia Dortmund II", "Borussia Dortmund"),
            ("Ajax U21", "Ajax"),
        ] {
            assert!(differ_by_distinguishing_token(a, b), "{a} / {b}");
            assert!(differ_by_distinguishing_token(b, a), "{b} / {a}");
        }
        for (a, b) in [
            ("F.C. Barcelona", "FC Barcelona"),
            (
                "International Business Machines Corporation",
                "International Business Machines Corporatio",
            ),
            ("Maya Whitfield", "maya  whitfield"),
            ("Civil Engineering Society", "Civil Engineering Societies"),
            ("Rob P", "Robert Paulson"),
            ("J. Smithson", "John Smithson"),
        ] {
            assert!(!differ_by_distinguishing_token(a, b), "{a} / {b}");
        }
    }

    #[test]
    fn reserve_teams_never_fuzzy_match_their_club_in_either_order() {
        let (first, second) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for (a, b) in [
            ("FC Barcelona", "FC Barcelona B"),
            ("Villarreal CF B", "Villarreal CF"),
        ] {
            let mut idx = LshIndex::default();
            idx.insert(first, a);
            assert!(idx.matches(b, 0.5).is_empty(), "{b} must not match {a}");
            idx.insert(second, b);
            assert_eq!(idx.matches(a, 0.5).first().map(|m| m.0), Some(first));
        }
    }
}
