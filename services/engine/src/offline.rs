//! The offline extractor: deterministic English patterns, no model.
//!
//! It is the default when no LLM endpoint is configured, and what tests, the
//! demo and the benchmarks run on. It understands one clause at a time:
//!
//! | pattern (subject = a capitalized name, or `I` = the message's speaker, or `he`/`she`/`they` = the last subject) | relation | object |
//! |---|---|---|
//! | lives in · is living in · resides in · moved to · has moved to · moved back to · relocated to · settled in | `LIVES_IN` | Location |
//! | lived in (ended: until …, else at the reference time) | `LIVES_IN` | Location |
//! | works at · works for · is working at · is employed by · joined · has joined · started at · started working at | `WORKS_AT` | Organization |
//! | worked at · worked for · left · quit · resigned from · stopped working at (ended) | `WORKS_AT` | Organization |
//! | is married to · married · got married to | `MARRIED_TO` | Person |
//! | likes · loves · enjoys · is a fan of | `LIKES` | Entity |
//! | owns · bought | `OWNS` | Entity |
//!
//! A time expression after the object, or before the clause ("In March,
//! …"), is passed on verbatim (`since March`, `last year`, `yesterday`, ISO
//! dates, …) and resolved by [`crate::temporal`]. "X moved to Y" therefore
//! means X lives in Y from then on. Clauses are split at sentence ends, `;`
//! and `, and` / ` and ` before another pattern verb (the subject carries
//! over). `json` episodes are read through their string values.

use async_trait::async_trait;
use chronicle_model::EpisodeType;

use crate::ontology::Ontology;
use crate::ports::{
    EntityResolutionRequest, ExtractedEntity, ExtractedFact, Extraction, ExtractionRequest,
    Extractor, FactResolution, FactResolutionRequest, LlmError, SummaryKind, SummaryRequest,
};

/// The deterministic pattern extractor.
#[derive(Clone, Copy, Debug, Default)]
pub struct OfflineExtractor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tense {
    /// Holds from the time expression (or the reference time) on.
    Starts,
    /// Ended at the time expression (or the reference time).
    Ended,
}

struct Verb {
    phrase: &'static str,
    relation: &'static str,
    object_type: &'static str,
    tense: Tense,
}

const fn verb(
    phrase: &'static str,
    relation: &'static str,
    object_type: &'static str,
    tense: Tense,
) -> Verb {
    Verb {
        phrase,
        relation,
        object_type,
        tense,
    }
}

/// Longest phrases first, so "has moved to" wins over "moved to".
const VERBS: &[Verb] = &[
    verb(
        "stopped working at",
        "WORKS_AT",
        "Organization",
        Tense::Ended,
    ),
    verb(
        "started working at",
        "WORKS_AT",
        "Organization",
        Tense::Starts,
    ),
    verb("got married to", "MARRIED_TO", "Person", Tense::Starts),
    verb("is employed by", "WORKS_AT", "Organization", Tense::Starts),
    verb("is working at", "WORKS_AT", "Organization", Tense::Starts),
    verb("is working for", "WORKS_AT", "Organization", Tense::Starts),
    verb("is living in", "LIVES_IN", "Location", Tense::Starts),
    verb("has moved to", "LIVES_IN", "Location", Tense::Starts),
    verb("moved back to", "LIVES_IN", "Location", Tense::Starts),
    verb("is married to", "MARRIED_TO", "Person", Tense::Starts),
    verb("am married to", "MARRIED_TO", "Person", Tense::Starts),
    verb("are married to", "MARRIED_TO", "Person", Tense::Starts),
    verb("resigned from", "WORKS_AT", "Organization", Tense::Ended),
    verb("is a fan of", "LIKES", "Entity", Tense::Starts),
    verb("relocated to", "LIVES_IN", "Location", Tense::Starts),
    verb("has joined", "WORKS_AT", "Organization", Tense::Starts),
    verb("started at", "WORKS_AT", "Organization", Tense::Starts),
    verb("resides in", "LIVES_IN", "Location", Tense::Starts),
    verb("settled in", "LIVES_IN", "Location", Tense::Starts),
    verb("works for", "WORKS_AT", "Organization", Tense::Starts),
    verb("work for", "WORKS_AT", "Organization", Tense::Starts),
    verb("worked at", "WORKS_AT", "Organization", Tense::Ended),
    verb("worked for", "WORKS_AT", "Organization", Tense::Ended),
    verb("works at", "WORKS_AT", "Organization", Tense::Starts),
    verb("work at", "WORKS_AT", "Organization", Tense::Starts),
    verb("lives in", "LIVES_IN", "Location", Tense::Starts),
    verb("live in", "LIVES_IN", "Location", Tense::Starts),
    verb("lived in", "LIVES_IN", "Location", Tense::Ended),
    verb("moved to", "LIVES_IN", "Location", Tense::Starts),
    verb("move to", "LIVES_IN", "Location", Tense::Starts),
    verb("joined", "WORKS_AT", "Organization", Tense::Starts),
    verb("married", "MARRIED_TO", "Person", Tense::Starts),
    verb("left", "WORKS_AT", "Organization", Tense::Ended),
    verb("quit", "WORKS_AT", "Organization", Tense::Ended),
    verb("likes", "LIKES", "Entity", Tense::Starts),
    verb("like", "LIKES", "Entity", Tense::Starts),
    verb("loves", "LIKES", "Entity", Tense::Starts),
    verb("love", "LIKES", "Entity", Tense::Starts),
    verb("enjoys", "LIKES", "Entity", Tense::Starts),
    verb("enjoy", "LIKES", "Entity", Tense::Starts),
    verb("owns", "OWNS", "Entity", Tense::Starts),
    verb("own", "OWNS", "Entity", Tense::Starts),
    verb("bought", "OWNS", "Entity", Tense::Starts),
];

/// Words that start a trailing time expression.
const TIME_STARTERS: &[&str] = &[
    "since",
    "in",
    "on",
    "last",
    "this",
    "yesterday",
    "today",
    "tomorrow",
    "until",
    "till",
    "from",
    "two",
    "three",
    "a",
    "an",
    "one",
    "four",
    "five",
    "six",
    "several",
    "now",
    "recently",
    "ago",
    "back",
    "earlier",
    "next",
];

/// Lower-case words allowed inside a multi-word proper name.
const NAME_CONNECTORS: &[&str] = &["of", "de", "da", "del", "van", "von", "la", "le", "du", "&"];

const PRONOUNS_SPEAKER: &[&str] = &[
    "i", "i've", "i'm", "i'd", "i'll", "we", "we've", "we're", "we'd", "we'll",
];

/// Capitalized words that start sentences in conversation but never name
/// anyone: "Sounds like fun", "It's …", "Looks like …", "You like …".
const NOT_NAMES: &[&str] = &[
    "sounds",
    "sound",
    "looks",
    "look",
    "seems",
    "feels",
    "it",
    "it's",
    "its",
    "that",
    "that's",
    "this",
    "these",
    "those",
    "there",
    "there's",
    "here",
    "what",
    "what's",
    "who",
    "so",
    "yeah",
    "yes",
    "no",
    "oh",
    "wow",
    "hey",
    "hi",
    "hello",
    "thanks",
    "thank",
    "you",
    "you're",
    "you'd",
    "you'll",
    "your",
    "my",
    "our",
    "his",
    "her",
    "their",
    "they'd",
    "they'll",
    "would",
    "could",
    "should",
    "maybe",
    "well",
    "sure",
    "great",
    "awesome",
    "cool",
    "nice",
    "lol",
    "haha",
    "ok",
    "okay",
    "totally",
    "absolutely",
    "everyone",
    "everybody",
    "someone",
    "somebody",
    "people",
];
const PRONOUNS_PREVIOUS: &[&str] = &["he", "she", "they", "he's", "she's"];

/// A clause split into words with their original spelling.
struct Clause<'a> {
    words: Vec<&'a str>,
}

fn is_capitalized(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_uppercase())
}

fn clean(word: &str) -> &str {
    word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '&' && c != '-')
}

impl OfflineExtractor {
    /// Runs the patterns over an episode's content, by source type.
    pub fn extract_content(
        &self,
        content: &str,
        source: EpisodeType,
        ontology: &Ontology,
    ) -> Extraction {
        match source {
            EpisodeType::Message => {
                let (speaker, text) = split_speaker(content);
                let speaker = speaker.map(capitalize);
                self.extract_text(text, speaker.as_deref(), ontology)
            }
            EpisodeType::Json => {
                let mut strings = Vec::new();
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(content) {
                    json_strings(&v, &mut strings);
                }
                self.extract_text(&strings.join(". "), None, ontology)
            }
            EpisodeType::Text | EpisodeType::FactTriple => {
                self.extract_text(content, None, ontology)
            }
        }
    }

    /// Runs the patterns over plain text; `speaker` stands for "I".
    pub fn extract_text(
        &self,
        text: &str,
        speaker: Option<&str>,
        ontology: &Ontology,
    ) -> Extraction {
        let mut out = Extraction::default();
        let mut last_subject: Option<String> = speaker.map(str::to_owned);
        for sentence in split_sentences(text) {
            let (lead_time, body) = leading_time(&sentence);
            for clause_text in split_clauses(body) {
                let words: Vec<&str> = clause_text.split_whitespace().collect();
                let clause = Clause { words };
                if let Some(found) = match_clause(
                    &clause,
                    speaker,
                    last_subject.as_deref(),
                    lead_time.as_deref(),
                ) {
                    last_subject = Some(found.subject.clone());
                    push_entity(&mut out, &found.subject, "Person", ontology);
                    push_entity(&mut out, &found.object, found.verb.object_type, ontology);
                    let (valid_at, invalid_at) = match found.verb.tense {
                        Tense::Starts => (found.time.clone(), found.until.clone()),
                        Tense::Ended => (
                            found.since.clone(),
                            Some(found.time.or(found.until).unwrap_or_else(|| "now".into())),
                        ),
                    };
                    out.facts.push(ExtractedFact {
                        source: found.subject,
                        target: found.object,
                        relation: found.verb.relation.into(),
                        fact: found.sentence,
                        valid_at,
                        invalid_at,
                    });
                }
            }
        }
        out
    }
}

fn push_entity(out: &mut Extraction, name: &str, type_name: &str, ontology: &Ontology) {
    let id = ontology.entity_type_id(type_name).unwrap_or(0);
    if !out.entities.iter().any(|e| e.name == name) {
        out.entities.push(ExtractedEntity {
            name: name.to_owned(),
            entity_type_id: id,
            attributes: Default::default(),
        });
    }
}

fn split_sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let next_is_space = chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        if matches!(c, '.' | '!' | '?' | ';' | '\n') && next_is_space {
            if !cur.trim().is_empty() {
                out.push(cur.trim().to_owned());
            }
            cur.clear();
        } else {
            cur.push(*c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// "In March, Alice moved to Shanghai" → ("In March", "Alice moved to Shanghai").
fn leading_time(sentence: &str) -> (Option<String>, &str) {
    if let Some((head, rest)) = sentence.split_once(',') {
        let first = head
            .split_whitespace()
            .next()
            .map(str::to_lowercase)
            .unwrap_or_default();
        if TIME_STARTERS.contains(&first.as_str()) && head.split_whitespace().count() <= 5 {
            return (Some(head.trim().to_owned()), rest.trim());
        }
    }
    (None, sentence)
}

/// Splits at ", and " / " and " when a pattern verb follows (subject carries over).
fn split_clauses(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body.to_owned();
    loop {
        // ASCII folding keeps byte offsets: `lower`'s indices slice `rest`
        // (full Unicode lower-casing can change lengths, e.g. U+212A K).
        let lower = rest.to_ascii_lowercase();
        let split = [", and ", " and ", ", then ", " then "]
            .iter()
            .filter_map(|sep| {
                lower.match_indices(sep).find_map(|(i, _)| {
                    let after = &lower[i + sep.len()..];
                    let after = PRONOUNS_SPEAKER
                        .iter()
                        .chain(PRONOUNS_PREVIOUS)
                        .find_map(|p| after.strip_prefix(p).and_then(|a| a.strip_prefix(' ')))
                        .unwrap_or(after);
                    VERBS
                        .iter()
                        .any(|v| {
                            after.starts_with(v.phrase) && after[v.phrase.len()..].starts_with(' ')
                        })
                        .then_some((i, sep.len()))
                })
            })
            .min();
        match split {
            Some((i, len)) => {
                out.push(rest[..i].to_owned());
                rest = rest[i + len..].to_owned();
            }
            None => {
                out.push(rest);
                return out;
            }
        }
    }
}

struct Found {
    subject: String,
    object: String,
    verb: &'static Verb,
    time: Option<String>,
    since: Option<String>,
    until: Option<String>,
    sentence: String,
}

fn match_clause(
    clause: &Clause<'_>,
    speaker: Option<&str>,
    last_subject: Option<&str>,
    lead_time: Option<&str>,
) -> Option<Found> {
    let lower: Vec<String> = clause
        .words
        .iter()
        .map(|w| clean(w).to_lowercase())
        .collect();
    for start in 0..lower.len() {
        for v in VERBS {
            let phrase: Vec<&str> = v.phrase.split(' ').collect();
            if start + phrase.len() > lower.len()
                || lower[start..start + phrase.len()] != phrase[..]
            {
                continue;
            }
            // Subject: the capitalized run right before the verb, or a pronoun.
            let before = &clause.words[..start];
            let (subject, consumed) = subject_of(before, speaker, last_subject)?;
            // "Last week I bought a Tesla": a time expression before the subject.
            let prefix = &before[..before.len() - consumed];
            let prefix_time = prefix
                .first()
                .filter(|w| TIME_STARTERS.contains(&clean(w).to_lowercase().as_str()))
                .map(|_| {
                    prefix
                        .iter()
                        .map(|w| clean(w))
                        .collect::<Vec<_>>()
                        .join(" ")
                });
            let after = &clause.words[start + phrase.len()..];
            let (object, tail) = object_of(after, v.object_type)?;
            let (time, since, until) = time_of(tail, lead_time.or(prefix_time.as_deref()));
            let verb_text = clause.words[start..start + phrase.len()].join(" ");
            return Some(Found {
                sentence: format!("{subject} {} {object}", third_person(&verb_text)),
                subject,
                object,
                verb: v,
                time,
                since,
                until,
            });
        }
    }
    None
}

const FILLERS: &[&str] = &[
    "also",
    "now",
    "recently",
    "just",
    "finally",
    "has",
    "have",
    "then",
    "and",
    "really",
    "still",
    "already",
    "actually",
    "always",
    "truly",
    "definitely",
    "totally",
    "officially",
];

/// The subject right before the verb, and how many words (from the end of
/// `before`) it and its fillers took.
fn subject_of(
    before: &[&str],
    speaker: Option<&str>,
    last_subject: Option<&str>,
) -> Option<(String, usize)> {
    // "…, and joined Initech": no subject of its own, so the last one carries over.
    if before
        .iter()
        .all(|w| FILLERS.contains(&clean(w).to_lowercase().as_str()))
    {
        return last_subject.map(|s| (s.to_owned(), before.len()));
    }
    let mut run: Vec<&str> = Vec::new();
    let mut consumed = 0;
    for w in before.iter().rev() {
        let c = clean(w);
        if c.is_empty() {
            break;
        }
        let lower = c.to_lowercase();
        if run.is_empty() && FILLERS.contains(&lower.as_str()) {
            consumed += 1;
            continue;
        }
        if run.is_empty() && PRONOUNS_SPEAKER.contains(&lower.as_str()) {
            return speaker.map(|s| (s.to_owned(), consumed + 1));
        }
        if run.is_empty() && PRONOUNS_PREVIOUS.contains(&lower.as_str()) {
            return last_subject.map(|s| (s.to_owned(), consumed + 1));
        }
        if is_capitalized(c) || (!run.is_empty() && NAME_CONNECTORS.contains(&lower.as_str())) {
            run.push(c);
            consumed += 1;
        } else {
            break;
        }
    }
    while run.last().is_some_and(|w| !is_capitalized(w)) {
        run.pop();
        consumed -= 1;
    }
    if run.is_empty()
        || (run.len() == 1 && NOT_NAMES.contains(&run[0].to_ascii_lowercase().as_str()))
    {
        return None;
    }
    run.reverse();
    Some((run.join(" "), consumed))
}

/// The object after the verb and the words left after it.
fn object_of<'a>(after: &'a [&'a str], object_type: &str) -> Option<(String, &'a [&'a str])> {
    let mut i = 0;
    // "moved from Paris to Berlin": the object follows the last "to".
    if let Some(pos) = after
        .iter()
        .position(|w| clean(w).eq_ignore_ascii_case("to"))
        && after
            .first()
            .is_some_and(|w| clean(w).eq_ignore_ascii_case("from"))
    {
        i = pos + 1;
    }
    let proper = object_type != "Entity";
    while i < after.len()
        && matches!(
            clean(after[i]).to_lowercase().as_str(),
            "the" | "a" | "an" | "my" | "his" | "her" | "their" | "our"
        )
    {
        if proper && is_capitalized(clean(after[i])) {
            break;
        }
        i += 1;
    }
    let mut words: Vec<&str> = Vec::new();
    let mut j = i;
    while j < after.len() {
        let raw = after[j];
        let c = clean(raw);
        if c.is_empty() {
            break;
        }
        let lower = c.to_lowercase();
        let capital = is_capitalized(c);
        let accept = if proper {
            capital
                || (!words.is_empty()
                    && NAME_CONNECTORS.contains(&lower.as_str())
                    && after.get(j + 1).is_some_and(|n| is_capitalized(clean(n))))
        } else {
            let time_word = TIME_STARTERS.contains(&lower.as_str()) && !words.is_empty();
            let stop_word = matches!(
                lower.as_str(),
                "because" | "but" | "with" | "when" | "while"
            );
            !time_word && !stop_word
        };
        if !accept {
            break;
        }
        words.push(c);
        j += 1;
        if raw.ends_with(',') {
            break;
        }
    }
    if words.is_empty() {
        return None;
    }
    Some((words.join(" "), &after[j..]))
}

/// The trailing time expression: (general, since, until).
fn time_of(tail: &[&str], lead: Option<&str>) -> (Option<String>, Option<String>, Option<String>) {
    let text = tail
        .iter()
        .map(|w| clean(w))
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    // ASCII folding keeps byte offsets (`lower`'s indices slice `text`).
    let lower = text.to_ascii_lowercase();
    let (mut time, mut since, mut until) = (None, None, None);
    if let Some(pos) = lower.find("until ").or_else(|| lower.find("till ")) {
        until = Some(
            text[pos..]
                .split_once(' ')
                .map(|x| x.1)
                .unwrap_or("")
                .to_owned(),
        );
    }
    let head = match lower.find("until ").or_else(|| lower.find("till ")) {
        Some(pos) => text[..pos].trim().to_owned(),
        None => text,
    };
    if !head.is_empty()
        && TIME_STARTERS.contains(&head.split(' ').next().unwrap_or("").to_lowercase().as_str())
    {
        if head.to_lowercase().starts_with("since ") || head.to_lowercase().starts_with("from ") {
            since = Some(head.clone());
        }
        time = Some(head);
    }
    if time.is_none()
        && let Some(l) = lead
    {
        time = Some(l.to_owned());
    }
    (time, since, until)
}

/// "live in" → "lives in", "am married to" → "is married to": the verb as
/// written after a first-person subject, in the third person.
fn third_person(verb: &str) -> String {
    let (first, rest) = verb.split_once(' ').unwrap_or((verb, ""));
    let conjugated = match first.to_lowercase().as_str() {
        "am" | "are" => "is".to_owned(),
        "have" => "has".to_owned(),
        "live" | "work" | "like" | "love" | "enjoy" | "own" | "move" => format!("{first}s"),
        _ => first.to_owned(),
    };
    if rest.is_empty() {
        conjugated
    } else {
        format!("{conjugated} {rest}")
    }
}

/// For `message` episodes, the speaker before the first colon.
pub fn split_speaker(content: &str) -> (Option<&str>, &str) {
    match content.split_once(':') {
        Some((actor, text))
            if !actor.trim().is_empty() && actor.len() <= 64 && !actor.contains('\n') =>
        {
            let actor = actor.trim();
            let speaker = actor
                .split_whitespace()
                .all(|w| w.chars().next().is_some_and(|c| c.is_alphabetic()))
                .then_some(actor);
            (speaker, text.trim())
        }
        _ => (None, content),
    }
}

fn capitalize(name: &str) -> String {
    name.split_whitespace()
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_uppercase().chain(c).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn json_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|x| json_strings(x, out)),
        serde_json::Value::Object(map) => map.values().for_each(|x| json_strings(x, out)),
        _ => {}
    }
}

#[async_trait]
impl Extractor for OfflineExtractor {
    fn describe(&self) -> String {
        "offline".into()
    }

    fn is_model(&self) -> bool {
        false
    }

    async fn extract(&self, request: &ExtractionRequest) -> Result<Extraction, LlmError> {
        Ok(self.extract_content(&request.content, request.source, &request.ontology))
    }

    async fn resolve_entities(
        &self,
        request: &EntityResolutionRequest,
    ) -> Result<Vec<Option<usize>>, LlmError> {
        // Without a model, an ambiguous entity is a new entity: a missed
        // merge is recoverable, a wrong merge is not.
        Ok(vec![None; request.entities.len()])
    }

    async fn resolve_facts(
        &self,
        request: &FactResolutionRequest,
    ) -> Result<Vec<FactResolution>, LlmError> {
        Ok(vec![FactResolution::default(); request.facts.len()])
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Vec<String>, LlmError> {
        Ok(request
            .items
            .iter()
            .map(|item| match request.kind {
                // A community's material is its most-cited facts, most cited
                // first, and describes it whole: keep the head that fits.
                SummaryKind::Community => leading_summary(&item.new_material, request.max_chars),
                SummaryKind::Entity | SummaryKind::Saga => {
                    extractive_summary(&item.current, &item.new_material, request.max_chars)
                }
            })
            .collect())
    }
}

/// The leading sentences that fit in `max_chars` (at least the first, cut).
pub fn leading_summary(sentences: &[String], max_chars: usize) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut len = 0;
    for s in sentences {
        let s = s.trim().trim_end_matches('.');
        if s.is_empty() || kept.contains(&s) {
            continue;
        }
        let add = s.len() + 2;
        if len + add > max_chars && !kept.is_empty() {
            break;
        }
        kept.push(s);
        len += add;
    }
    let mut out = kept.join(". ");
    if !out.is_empty() {
        out.push('.');
    }
    out.chars().take(max_chars).collect()
}

/// Keeps the newest sentences that fit: new material first, then the old
/// summary's sentences from the end, restored to reading order.
pub fn extractive_summary(current: &str, new_material: &[String], max_chars: usize) -> String {
    let mut sentences: Vec<String> = split_sentences(current);
    sentences.extend(
        new_material
            .iter()
            .map(|s| s.trim().trim_end_matches('.').to_owned()),
    );
    let mut kept: Vec<String> = Vec::new();
    let mut len = 0;
    for s in sentences.iter().rev() {
        let add = s.len() + 2;
        if len + add > max_chars && !kept.is_empty() {
            break;
        }
        if !kept.contains(s) {
            kept.push(s.clone());
            len += add;
        }
    }
    kept.reverse();
    let mut out = kept.join(". ");
    if !out.is_empty() {
        out.push('.');
    }
    out.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests;
