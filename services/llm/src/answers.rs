//! Reading and checking model answers: every answer is parsed into typed
//! structs and validated against its request before anyone sees it. A
//! failure is a reason string; the caller retries with it.
//!
//! Structural errors (a type id outside the ontology, an index out of range,
//! a missing or repeated item) reject the answer. Harmless slips (a fact
//! whose endpoint was never extracted, an undeclared attribute, a summary a
//! little too long) are repaired or dropped, since a retry would cost a call
//! and the engine would drop them anyway.

use std::collections::BTreeMap;

use chronicle_engine::ontology::{AttributeKind, Ontology};
use chronicle_engine::ports::{
    EntityResolutionRequest, ExtractedEntity, ExtractedFact, Extraction, FactResolution,
    FactResolutionRequest, SummaryRequest,
};
use chronicle_model::{Attributes, normalize_name};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The JSON inside a model's answer: `<think>` blocks, code fences and any
/// prose around the object removed.
pub(crate) fn json_text(raw: &str) -> &str {
    let text = strip_think(raw).trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .map(|t| t.trim_end().strip_suffix("```").unwrap_or(t))
        .unwrap_or(text)
        .trim();
    if text.starts_with('{') {
        return text;
    }
    match (text.find('{'), text.rfind('}')) {
        (Some(a), Some(b)) if a < b => &text[a..=b],
        _ => text,
    }
}

/// Removes reasoning: text up to the last `</think>` (which also covers
/// templates that drop the opening tag) and an unclosed trailing `<think>`.
pub(crate) fn strip_think(raw: &str) -> &str {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    let after = match raw.rfind(CLOSE) {
        Some(i) => &raw[i + CLOSE.len()..],
        None => raw,
    };
    match after.find(OPEN) {
        Some(i) => &after[..i],
        None => after,
    }
}

/// Parses the JSON of an answer into `T`.
pub(crate) fn parse<T: DeserializeOwned>(raw: &str) -> Result<T, String> {
    let text = json_text(raw);
    serde_json::from_str(text).map_err(|e| {
        let start: String = text.chars().take(120).collect();
        format!("not the expected JSON ({e}); answer starts {start:?}")
    })
}

#[derive(Deserialize)]
struct ExtractionAnswer {
    #[serde(default)]
    entities: Vec<EntityAnswer>,
    #[serde(default)]
    facts: Vec<FactAnswer>,
}

#[derive(Deserialize)]
struct EntityAnswer {
    name: String,
    type_id: i64,
    #[serde(default)]
    attributes: AttributesAnswer,
}

/// `[{"name","value"}]` as asked, or a plain object as some models write it.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum AttributesAnswer {
    #[default]
    None,
    List(Vec<AttributeAnswer>),
    Map(serde_json::Map<String, Value>),
}

#[derive(Deserialize)]
struct AttributeAnswer {
    name: String,
    value: Value,
}

#[derive(Deserialize)]
struct FactAnswer {
    source: String,
    target: String,
    relation: String,
    fact: String,
    #[serde(default)]
    valid_at: Option<String>,
    #[serde(default)]
    invalid_at: Option<String>,
}

/// Checks an extraction against the ontology it was asked with.
pub(crate) fn extraction(raw: &str, ontology: &Ontology) -> Result<Extraction, String> {
    let answer: ExtractionAnswer = parse(raw)?;
    let type_count = ontology.entity_types.len().max(1);
    let mut entities = Vec::with_capacity(answer.entities.len());
    let mut names = BTreeMap::new();
    for e in answer.entities {
        let name = e.name.trim();
        if name.is_empty() {
            continue;
        }
        let Some(type_id) = u32::try_from(e.type_id)
            .ok()
            .filter(|&t| (t as usize) < type_count)
        else {
            return Err(format!(
                "entity {name:?} has type_id {}, but type ids are 0..={}",
                e.type_id,
                type_count - 1
            ));
        };
        names
            .entry(normalize_name(name))
            .or_insert_with(|| name.to_owned());
        entities.push(ExtractedEntity {
            name: name.to_owned(),
            entity_type_id: type_id,
            attributes: attributes(e.attributes, ontology, type_id),
        });
    }
    let mut facts = Vec::with_capacity(answer.facts.len());
    for f in answer.facts {
        let (Some(source), Some(target)) = (
            names.get(&normalize_name(&f.source)),
            names.get(&normalize_name(&f.target)),
        ) else {
            tracing::debug!(source = %f.source, target = %f.target, "dropping a fact whose endpoint was not extracted");
            continue;
        };
        let fact = f.fact.trim();
        if source == target || fact.is_empty() {
            continue;
        }
        facts.push(ExtractedFact {
            source: source.clone(),
            target: target.clone(),
            relation: relation_name(&f.relation),
            fact: fact.to_owned(),
            valid_at: time_expression(f.valid_at),
            invalid_at: time_expression(f.invalid_at),
        });
    }
    Ok(Extraction { entities, facts })
}

/// Keeps the declared attributes of the type, coerced to their JSON type.
fn attributes(answer: AttributesAnswer, ontology: &Ontology, type_id: u32) -> Attributes {
    let pairs: Vec<(String, Value)> = match answer {
        AttributesAnswer::None => Vec::new(),
        AttributesAnswer::List(list) => list.into_iter().map(|a| (a.name, a.value)).collect(),
        AttributesAnswer::Map(map) => map.into_iter().collect(),
    };
    let mut out = Attributes::new();
    let Some(ty) = ontology.entity_types.get(type_id as usize) else {
        return out;
    };
    for (name, value) in pairs {
        let Some(field) = ty.attributes.iter().find(|a| a.name == name.trim()) else {
            continue;
        };
        if let Some(v) = coerce(value, field.kind) {
            out.insert(field.name.clone(), v);
        }
    }
    out
}

/// A value of the given kind, converting numbers written as text and back.
fn coerce(value: Value, kind: AttributeKind) -> Option<Value> {
    if value.is_null() {
        return None;
    }
    if kind.accepts(&value) {
        return Some(value);
    }
    let text = match &value {
        Value::String(s) => s.trim().to_owned(),
        other => other.to_string(),
    };
    let v = match kind {
        AttributeKind::String => Value::String(text),
        AttributeKind::Integer => match text.parse::<i64>() {
            Ok(i) => Value::from(i),
            Err(_) => match text.parse::<f64>() {
                Ok(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
                _ => return None,
            },
        },
        AttributeKind::Number => Value::from(text.parse::<f64>().ok().filter(|f| f.is_finite())?),
        AttributeKind::Boolean => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" => Value::Bool(true),
            "false" | "no" => Value::Bool(false),
            _ => return None,
        },
    };
    kind.accepts(&v).then_some(v)
}

/// `lives in` → `LIVES_IN`; empty → `RELATES_TO`.
pub(crate) fn relation_name(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.trim().chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_uppercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() {
        "RELATES_TO".into()
    } else {
        out
    }
}

fn time_expression(raw: Option<String>) -> Option<String> {
    let t = raw?.trim().to_owned();
    let lower = t.to_ascii_lowercase();
    if t.is_empty() || matches!(lower.as_str(), "null" | "none" | "unknown" | "n/a") {
        None
    } else {
        Some(t)
    }
}

#[derive(Deserialize)]
struct Answers<T> {
    answers: Vec<T>,
}

/// Puts per-item answers in id order, insisting on exactly one per id.
fn by_id<T: HasId>(answers: Vec<T>, n: usize) -> Result<Vec<T>, String> {
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for a in answers {
        let id = a.id();
        let slot = usize::try_from(id)
            .ok()
            .and_then(|i| slots.get_mut(i))
            .ok_or_else(|| format!("answer for id {id}, but ids are 0..{n}"))?;
        if slot.is_some() {
            return Err(format!("two answers for id {id}"));
        }
        *slot = Some(a);
    }
    let missing: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!("no answer for id {}", missing.join(", ")));
    }
    Ok(slots.into_iter().flatten().collect())
}

trait HasId {
    fn id(&self) -> i64;
}

#[derive(Deserialize)]
struct EntityVerdict {
    id: i64,
    #[serde(default)]
    duplicate: Option<i64>,
}

impl HasId for EntityVerdict {
    fn id(&self) -> i64 {
        self.id
    }
}

/// One candidate index (or none) per ambiguous entity.
pub(crate) fn entity_resolution(
    raw: &str,
    req: &EntityResolutionRequest,
) -> Result<Vec<Option<usize>>, String> {
    let answer: Answers<EntityVerdict> = parse(raw)?;
    let verdicts = by_id(answer.answers, req.entities.len())?;
    verdicts
        .into_iter()
        .zip(&req.entities)
        .enumerate()
        .map(|(id, (v, e))| match v.duplicate {
            None | Some(-1) => Ok(None),
            Some(d) => usize::try_from(d)
                .ok()
                .filter(|&d| d < e.candidates.len())
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "entity #{id} duplicate {d}, but it has {} candidates (or -1)",
                        e.candidates.len()
                    )
                }),
        })
        .collect()
}

#[derive(Deserialize)]
struct FactVerdict {
    id: i64,
    #[serde(default)]
    duplicate_of: Option<i64>,
    #[serde(default)]
    contradicts: Vec<i64>,
}

impl HasId for FactVerdict {
    fn id(&self) -> i64 {
        self.id
    }
}

/// Duplicate and contradiction indexes per new fact, all in range.
pub(crate) fn fact_resolution(
    raw: &str,
    req: &FactResolutionRequest,
) -> Result<Vec<FactResolution>, String> {
    let answer: Answers<FactVerdict> = parse(raw)?;
    let verdicts = by_id(answer.answers, req.facts.len())?;
    let mut out = Vec::with_capacity(verdicts.len());
    for (id, (v, f)) in verdicts.into_iter().zip(&req.facts).enumerate() {
        let duplicate_of = match v.duplicate_of {
            None | Some(-1) => None,
            Some(d) => Some(
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d < f.duplicates.len())
                    .ok_or_else(|| {
                        format!(
                            "fact #{id} duplicate_of {d}, but it has {} duplicate candidates",
                            f.duplicates.len()
                        )
                    })?,
            ),
        };
        let mut contradicts = Vec::with_capacity(v.contradicts.len());
        for c in v.contradicts {
            let c = usize::try_from(c)
                .ok()
                .filter(|&c| c < f.contradictions.len())
                .ok_or_else(|| {
                    format!(
                        "fact #{id} contradicts {c}, but it has {} contradiction candidates",
                        f.contradictions.len()
                    )
                })?;
            contradicts.push(c);
        }
        contradicts.sort_unstable();
        contradicts.dedup();
        out.push(FactResolution {
            duplicate_of,
            contradicts,
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
struct SummaryAnswer {
    id: i64,
    summary: String,
}

impl HasId for SummaryAnswer {
    fn id(&self) -> i64 {
        self.id
    }
}

/// One summary per item, cut to the limit at a sentence or word boundary.
pub(crate) fn summaries(raw: &str, req: &SummaryRequest) -> Result<Vec<String>, String> {
    let answer: Answers<SummaryAnswer> = parse(raw)?;
    let summaries = by_id(answer.answers, req.items.len())?;
    Ok(summaries
        .into_iter()
        .zip(&req.items)
        .map(|(s, item)| {
            let text = s.summary.split_whitespace().collect::<Vec<_>>().join(" ");
            if text.is_empty() {
                item.current.clone()
            } else {
                cut(&text, req.max_chars)
            }
        })
        .collect())
}

/// At most `max` characters, ending at a sentence end or word break when one is near.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    let floor = head.len() / 3;
    if let Some(i) = head.rfind(". ").filter(|&i| i >= floor) {
        return head[..=i].to_owned();
    }
    if let Some(i) = head.rfind(' ').filter(|&i| i >= floor) {
        return head[..i].trim_end_matches([',', ';', ':']).to_owned();
    }
    head
}

#[derive(Deserialize)]
struct ScoreAnswer {
    id: i64,
    score: f64,
}

impl HasId for ScoreAnswer {
    fn id(&self) -> i64 {
        self.id
    }
}

/// One score in `[0, 1]` per passage (the model answers 0..=100).
pub(crate) fn scores(raw: &str, passages: usize) -> Result<Vec<f32>, String> {
    let answer: Answers<ScoreAnswer> = parse(raw)?;
    by_id(answer.answers, passages)?
        .into_iter()
        .map(|s| {
            if s.score.is_finite() && (0.0..=100.0).contains(&s.score) {
                Ok((s.score / 100.0) as f32)
            } else {
                Err(format!(
                    "passage #{} scored {}, outside 0..=100",
                    s.id, s.score
                ))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_engine::ports::{
        AmbiguousEntity, CandidateEntity, CandidateFact, NewFactCandidates, SummaryItem,
        SummaryKind,
    };
    use serde_json::json;

    #[test]
    fn think_blocks_fences_and_prose_are_removed() {
        assert_eq!(
            json_text("<think>{\"no\":1}\nhmm</think>\n{\"a\":1}"),
            "{\"a\":1}"
        );
        assert_eq!(
            json_text("reasoning without an opening tag</think>{\"a\":1}"),
            "{\"a\":1}"
        );
        assert_eq!(
            json_text("<think>a</think><think>b</think> {\"a\":1}"),
            "{\"a\":1}"
        );
        assert_eq!(json_text("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(
            json_text("Here you go: {\"a\":1} Hope it helps."),
            "{\"a\":1}"
        );
        assert_eq!(json_text("{\"a\":1}<think>unfinished"), "{\"a\":1}");
    }

    fn ontology_with_age() -> Ontology {
        Ontology::parse("entity_types:\n  - name: Person\n    attributes:\n      - {name: age, type: integer}\n      - {name: vegan, type: boolean}\n").unwrap()
    }

    #[test]
    fn extraction_is_checked_and_repaired() {
        let o = ontology_with_age();
        let raw = json!({
            "entities": [
                {"name": " Alice ", "type_id": 1, "attributes": [{"name": "age", "value": "41"}, {"name": "vegan", "value": "yes"}, {"name": "shoe", "value": 9}]},
                {"name": "Paris", "type_id": 0},
                {"name": "", "type_id": 0}
            ],
            "facts": [
                {"source": "alice", "target": "Paris", "relation": "lives in", "fact": "Alice lives in Paris.", "valid_at": "since March", "invalid_at": "null"},
                {"source": "Alice", "target": "Atlantis", "relation": "VISITED", "fact": "Alice visited Atlantis.", "valid_at": null, "invalid_at": null},
                {"source": "Alice", "target": "ALICE", "relation": "IS", "fact": "Alice is Alice.", "valid_at": null, "invalid_at": null}
            ]
        })
        .to_string();
        let x = extraction(&raw, &o).unwrap();
        assert_eq!(x.entities.len(), 2);
        assert_eq!(x.entities[0].name, "Alice");
        assert_eq!(
            x.entities[0].attributes,
            json!({"age": 41, "vegan": true})
                .as_object()
                .unwrap()
                .clone()
        );
        assert_eq!(x.facts.len(), 1);
        let f = &x.facts[0];
        assert_eq!(
            (f.source.as_str(), f.target.as_str(), f.relation.as_str()),
            ("Alice", "Paris", "LIVES_IN")
        );
        assert_eq!(
            (f.valid_at.as_deref(), f.invalid_at.as_deref()),
            (Some("since March"), None)
        );
    }

    #[test]
    fn extraction_rejects_type_ids_outside_the_ontology() {
        let o = ontology_with_age();
        for bad in [2, -1, 99] {
            let raw =
                json!({"entities": [{"name": "Alice", "type_id": bad}], "facts": []}).to_string();
            let e = extraction(&raw, &o).unwrap_err();
            assert!(e.contains("type_id"), "{e}");
        }
        assert!(extraction("{\"entities\": 3}", &o).is_err());
        assert!(extraction("I could not find any entities.", &o).is_err());
    }

    fn entity_request() -> EntityResolutionRequest {
        let cand = |n: &str| CandidateEntity {
            name: n.into(),
            entity_type: "Person".into(),
            summary: String::new(),
        };
        EntityResolutionRequest {
            episode_content: String::new(),
            entities: vec![
                AmbiguousEntity {
                    name: "Bob".into(),
                    entity_type: "Person".into(),
                    candidates: vec![cand("Bob Stone"), cand("Bobby")],
                },
                AmbiguousEntity {
                    name: "Al".into(),
                    entity_type: "Person".into(),
                    candidates: vec![cand("Alan")],
                },
            ],
        }
    }

    #[test]
    fn entity_verdicts_need_one_in_range_answer_per_entity() {
        let req = entity_request();
        let ok =
            json!({"answers": [{"id": 1, "duplicate": -1}, {"id": 0, "duplicate": 1}]}).to_string();
        assert_eq!(entity_resolution(&ok, &req).unwrap(), vec![Some(1), None]);
        for (bad, why) in [
            (
                json!({"answers": [{"id": 0, "duplicate": 2}, {"id": 1, "duplicate": -1}]}),
                "candidates",
            ),
            (
                json!({"answers": [{"id": 0, "duplicate": 0}]}),
                "no answer for id 1",
            ),
            (
                json!({"answers": [{"id": 0, "duplicate": 0}, {"id": 0, "duplicate": 0}]}),
                "two answers",
            ),
            (
                json!({"answers": [{"id": 0, "duplicate": 0}, {"id": 5, "duplicate": 0}]}),
                "ids are 0..2",
            ),
        ] {
            let e = entity_resolution(&bad.to_string(), &req).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn fact_verdicts_are_checked_and_sorted() {
        let cand = CandidateFact {
            relation: "R".into(),
            fact: "f".into(),
            valid_at: None,
            invalid_at: None,
        };
        let req = FactResolutionRequest {
            facts: vec![NewFactCandidates {
                relation: "R".into(),
                fact: "f".into(),
                valid_at: None,
                duplicates: vec![cand.clone()],
                contradictions: vec![cand.clone(), cand.clone(), cand],
            }],
        };
        let ok = json!({"answers": [{"id": 0, "duplicate_of": null, "contradicts": [2, 0, 2]}]})
            .to_string();
        assert_eq!(
            fact_resolution(&ok, &req).unwrap(),
            vec![FactResolution {
                duplicate_of: None,
                contradicts: vec![0, 2]
            }]
        );
        let bad = json!({"answers": [{"id": 0, "duplicate_of": 1, "contradicts": []}]}).to_string();
        assert!(
            fact_resolution(&bad, &req)
                .unwrap_err()
                .contains("duplicate_of 1")
        );
        let bad =
            json!({"answers": [{"id": 0, "duplicate_of": 0, "contradicts": [3]}]}).to_string();
        assert!(
            fact_resolution(&bad, &req)
                .unwrap_err()
                .contains("contradicts 3")
        );
    }

    #[test]
    fn summaries_are_bounded_and_scores_scaled() {
        let req = SummaryRequest {
            kind: SummaryKind::Entity,
            max_chars: 40,
            items: vec![
                SummaryItem {
                    subject: "A".into(),
                    current: "kept".into(),
                    new_material: vec![],
                },
                SummaryItem {
                    subject: "B".into(),
                    current: String::new(),
                    new_material: vec![],
                },
            ],
        };
        let raw = json!({"answers": [
            {"id": 0, "summary": "  "},
            {"id": 1, "summary": "Bob lives in Paris. He works at Acme as an engineer since 2020."}
        ]})
        .to_string();
        let s = summaries(&raw, &req).unwrap();
        assert_eq!(s, vec!["kept".to_owned(), "Bob lives in Paris.".to_owned()]);
        assert_eq!(cut("aaaa bbbb cccc", 12), "aaaa bbbb");

        let raw =
            json!({"answers": [{"id": 1, "score": 20}, {"id": 0, "score": 95.5}]}).to_string();
        assert_eq!(scores(&raw, 2).unwrap(), vec![0.955, 0.2]);
        let raw = json!({"answers": [{"id": 0, "score": 120}]}).to_string();
        assert!(scores(&raw, 1).is_err());
    }

    #[test]
    fn relation_names_are_screaming_snake_case() {
        assert_eq!(relation_name("lives in"), "LIVES_IN");
        assert_eq!(relation_name("WORKS_AT"), "WORKS_AT");
        assert_eq!(relation_name(" is-married to! "), "IS_MARRIED_TO");
        assert_eq!(relation_name("  "), "RELATES_TO");
    }
}
