//! Every prompt chronicle sends to a chat model, in one place, versioned.
//!
//! Each builder returns a [`Prompt`]: a static system message (instructions
//! and, for extraction, the ontology, so that providers can cache the prefix),
//! a user message with the data, and the JSON schema of the answer. Prompts
//! are kept compact on purpose: a short chat episode costs a few thousand
//! prompt characters in all, where graphiti spends about 25k.
//!
//! Conventions the answer parsers and [`crate::fake`] rely on:
//! * the current episode sits between [`CURRENT_EPISODE_OPEN`] and
//!   [`CURRENT_EPISODE_CLOSE`];
//! * every item the model must answer for starts a line with `#<id> `
//!   (ids `0..n`), and no other line outside the episode does;
//! * the schema's name is the prompt kind ([`PromptKind::as_str`]); in
//!   `json_object` mode the schema is written into the system message after
//!   [`SCHEMA_MARKER`].

use std::fmt::Write as _;

use chronicle_engine::ontology::Ontology;
use chronicle_engine::ports::{
    CandidateFact, EntityResolutionRequest, ExtractionRequest, FactResolutionRequest, PromptKind,
    SummaryKind, SummaryRequest,
};
use chronicle_model::{EpisodeType, Timestamp};
use serde_json::{Value, json};

/// Version of the prompt texts and schemas; part of every cache key, so a
/// change here never serves answers to the old prompts.
pub const PROMPT_VERSION: &str = "2025-06.1";

/// Opening tag of the current episode's content.
pub const CURRENT_EPISODE_OPEN: &str = "<CURRENT_EPISODE>";
/// Closing tag of the current episode's content.
pub const CURRENT_EPISODE_CLOSE: &str = "</CURRENT_EPISODE>";

/// Precedes the schema name and schema in `json_object` mode.
pub const SCHEMA_MARKER: &str = "Answer with one JSON object only, no prose, matching JSON schema";

/// Longest context episode shown, in characters.
const CONTEXT_EPISODE_CHARS: usize = 600;
/// Longest block of context episodes, in characters (newest kept).
const CONTEXT_TOTAL_CHARS: usize = 3_000;
/// Longest candidate summary shown in entity resolution.
const CANDIDATE_SUMMARY_CHARS: usize = 200;
/// Longest fact sentence shown in fact resolution.
const FACT_CHARS: usize = 300;
/// Longest passage shown to the reranker.
const PASSAGE_CHARS: usize = 1_000;
/// Longest piece of new material shown for a summary.
const MATERIAL_CHARS: usize = 400;

/// One chat request: instructions, data, and the schema of the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    /// What it is for (metrics, cache key, schema name).
    pub kind: PromptKind,
    /// Instructions (and the ontology, for extraction).
    pub system: String,
    /// The data.
    pub user: String,
    /// JSON schema of the answer (strict-mode compatible).
    pub schema: Value,
}

impl Prompt {
    /// The schema's name: the prompt kind.
    pub fn schema_name(&self) -> &'static str {
        self.kind.as_str()
    }

    /// Characters of both messages (the figure the compactness target is about).
    pub fn chars(&self) -> usize {
        self.system.chars().count() + self.user.chars().count()
    }

    /// The system message for servers without `json_schema`: the schema
    /// written into the instructions.
    pub fn system_with_schema(&self) -> String {
        format!(
            "{}\n\n{SCHEMA_MARKER} \"{}\": {}",
            self.system,
            self.schema_name(),
            self.schema
        )
    }
}

/// Entities and facts of one episode, in one call.
pub fn extraction(req: &ExtractionRequest) -> Prompt {
    let ontology = &req.ontology;
    let with_attributes = ontology
        .entity_types
        .iter()
        .any(|t| !t.attributes.is_empty());
    let mut system = String::from(EXTRACT_INTRO);
    system.push_str(match req.source {
        EpisodeType::Message => EXTRACT_MESSAGE,
        EpisodeType::Json => EXTRACT_JSON,
        EpisodeType::Text | EpisodeType::FactTriple => EXTRACT_TEXT,
    });
    system.push_str(EXTRACT_ENTITIES);
    if with_attributes {
        system.push_str(EXTRACT_ATTRIBUTES);
    }
    system.push_str(EXTRACT_FACTS);
    write_ontology(&mut system, ontology);

    let mut user = String::new();
    write_context(&mut user, &req.previous_episodes);
    let _ = writeln!(user, "REFERENCE TIME: {}", req.reference_time);
    let description = one_line(&req.source_description, 200);
    if description.is_empty() {
        let _ = writeln!(user, "SOURCE: {}", req.source.as_str());
    } else {
        let _ = writeln!(user, "SOURCE: {} ({description})", req.source.as_str());
    }
    write_episode(&mut user, &req.content);

    Prompt {
        kind: PromptKind::Extract,
        system,
        user,
        schema: extraction_schema(ontology, with_attributes),
    }
}

const EXTRACT_INTRO: &str = "You build a knowledge graph from the current episode: extract the entities it mentions and the facts it states about them.\n";
const EXTRACT_MESSAGE: &str =
    "The episode is a chat message, `speaker: text`; the speaker is an entity.\n";
const EXTRACT_TEXT: &str = "The episode is a text.\n";
const EXTRACT_JSON: &str = "The episode is a JSON document: extract the entity it describes and the entities named in its values; its properties give facts.\n";
const EXTRACT_ENTITIES: &str = "\
ENTITIES
- People, organizations, places, products, events, concepts and other things the episode says something about.
- name: the most complete name used (\"Alice Smith\", never a pronoun); resolve I/you/she/it from the context.
- type_id: id of the best-fitting entity type; 0 if none fits.
- Not entities: dates, times, amounts, actions, feelings, generic words (user, assistant, someone).
- List each entity once.
";
const EXTRACT_ATTRIBUTES: &str = "- attributes: for types with attributes, the values the episode states, as [{\"name\",\"value\"}]; [] otherwise.\n";
const EXTRACT_FACTS: &str = "\
FACTS
- Relations the current episode states between two different extracted entities.
- source, target: names exactly as in your entity list.
- relation: SCREAMING_SNAKE_CASE verb phrase; use a listed relation type when one fits.
- fact: one self-contained sentence naming both entities, with its details.
- valid_at: when it became true; invalid_at: when it stopped. Resolve times against the reference time and write ISO 8601 (2024-05-01, 2024-05-01T14:00:00Z); if you cannot, copy the time expression verbatim (\"since March\"). An ongoing fact in the present tense is valid from the reference time. Else null.
Previous episodes are context only: extract nothing from them alone.
";

fn write_ontology(out: &mut String, ontology: &Ontology) {
    out.push_str("\nENTITY TYPES (type_id name: description)\n");
    if ontology.entity_types.is_empty() {
        out.push_str("0 Entity: anything worth remembering.\n");
    }
    for (id, t) in ontology.entity_types.iter().enumerate() {
        let _ = write!(out, "{id} {}", t.name);
        let description = one_line(&t.description, 200);
        if !description.is_empty() {
            let _ = write!(out, ": {description}");
        }
        if !t.attributes.is_empty() {
            out.push_str(" Attributes:");
            for (i, a) in t.attributes.iter().enumerate() {
                let sep = if i == 0 { " " } else { "; " };
                let _ = write!(out, "{sep}{} ({})", a.name, attribute_kind(a.kind));
                let d = one_line(&a.description, 120);
                if !d.is_empty() {
                    let _ = write!(out, " {d}");
                }
            }
        }
        out.push('\n');
    }
    if !ontology.excluded_entity_types.is_empty() {
        let _ = writeln!(
            out,
            "Do not extract entities of types: {}",
            ontology.excluded_entity_types.join(", ")
        );
    }
    if !ontology.edge_types.is_empty() {
        out.push_str("RELATION TYPES\n");
        for e in &ontology.edge_types {
            let description = one_line(&e.description, 200);
            if description.is_empty() {
                let _ = writeln!(out, "{}", e.name);
            } else {
                let _ = writeln!(out, "{}: {description}", e.name);
            }
        }
    }
    if let Some(instructions) = ontology.custom_instructions.as_deref().map(str::trim)
        && !instructions.is_empty()
    {
        let _ = writeln!(out, "INSTRUCTIONS\n{instructions}");
    }
}

fn attribute_kind(kind: chronicle_engine::ontology::AttributeKind) -> &'static str {
    use chronicle_engine::ontology::AttributeKind as K;
    match kind {
        K::String => "string",
        K::Integer => "integer",
        K::Number => "number",
        K::Boolean => "boolean",
    }
}

fn write_context(out: &mut String, previous: &[chronicle_engine::ports::ContextEpisode]) {
    let mut lines = Vec::new();
    let mut total = 0;
    for e in previous.iter().rev() {
        let line = format!(
            "[{}] {}\n",
            e.valid_at,
            one_line(&e.content, CONTEXT_EPISODE_CHARS)
        );
        total += line.len();
        if total > CONTEXT_TOTAL_CHARS && !lines.is_empty() {
            break;
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return;
    }
    out.push_str("PREVIOUS EPISODES (oldest first)\n");
    for line in lines.iter().rev() {
        out.push_str(line);
    }
}

fn write_episode(out: &mut String, content: &str) {
    let _ = writeln!(
        out,
        "{CURRENT_EPISODE_OPEN}\n{}\n{CURRENT_EPISODE_CLOSE}",
        content.trim()
    );
}

fn extraction_schema(ontology: &Ontology, with_attributes: bool) -> Value {
    let type_ids: Vec<u32> = (0..ontology.entity_types.len().max(1) as u32).collect();
    let mut entity_props = json!({
        "name": {"type": "string"},
        "type_id": {"type": "integer", "enum": type_ids},
    });
    let mut entity_required = vec!["name", "type_id"];
    if with_attributes {
        entity_props["attributes"] = json!({
            "type": "array",
            "items": object(json!({
                "name": {"type": "string"},
                "value": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]},
            })),
        });
        entity_required.push("attributes");
    }
    object(json!({
        "entities": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": false,
            "required": entity_required,
            "properties": entity_props,
        }},
        "facts": {"type": "array", "items": object(json!({
            "source": {"type": "string"},
            "target": {"type": "string"},
            "relation": {"type": "string"},
            "fact": {"type": "string"},
            "valid_at": {"type": ["string", "null"]},
            "invalid_at": {"type": ["string", "null"]},
        }))},
    }))
}

/// Which existing entity each ambiguous entity is, for one episode.
pub fn entity_resolution(req: &EntityResolutionRequest) -> Prompt {
    let mut user = String::new();
    write_episode(&mut user, &req.episode_content);
    user.push_str("ENTITIES\n");
    for (id, e) in req.entities.iter().enumerate() {
        let _ = writeln!(
            user,
            "#{id} {} ({})",
            one_line(&e.name, 200),
            one_line(&e.entity_type, 60)
        );
        for (i, c) in e.candidates.iter().enumerate() {
            let _ = write!(
                user,
                "  {i}: {} ({})",
                one_line(&c.name, 200),
                one_line(&c.entity_type, 60)
            );
            let summary = one_line(&c.summary, CANDIDATE_SUMMARY_CHARS);
            if !summary.is_empty() {
                let _ = write!(user, " - {summary}");
            }
            user.push('\n');
        }
    }
    Prompt {
        kind: PromptKind::ResolveEntities,
        system: RESOLVE_ENTITIES.into(),
        user,
        schema: answers_schema(json!({
            "id": {"type": "integer"},
            "duplicate": {"type": "integer"},
        })),
    }
}

const RESOLVE_ENTITIES: &str = "\
You decide whether entities extracted from the current episode are entities already known. For each entity #id, answer `duplicate`: the index of the candidate that is the same real-world thing, or -1 if none is.
Same thing: the same person, place, organization or object, possibly named differently (\"NYC\" and \"New York City\"; \"Bob\" and \"Robert Smith\" when the episode shows it is him). Related or similar things are not the same. When unsure, answer -1.
Answer every entity id exactly once.";

/// Which existing facts each new fact restates or contradicts, for one episode.
pub fn fact_resolution(req: &FactResolutionRequest) -> Prompt {
    let mut user = String::from("NEW FACTS\n");
    for (id, f) in req.facts.iter().enumerate() {
        let _ = writeln!(
            user,
            "#{id} {}: {} [valid {}]",
            one_line(&f.relation, 60),
            one_line(&f.fact, FACT_CHARS),
            window(f.valid_at, None)
        );
        write_candidates(&mut user, "duplicate candidates", &f.duplicates);
        write_candidates(&mut user, "contradiction candidates", &f.contradictions);
    }
    Prompt {
        kind: PromptKind::ResolveFacts,
        system: RESOLVE_FACTS.into(),
        user,
        schema: answers_schema(json!({
            "id": {"type": "integer"},
            "duplicate_of": {"type": ["integer", "null"]},
            "contradicts": {"type": "array", "items": {"type": "integer"}},
        })),
    }
}

const RESOLVE_FACTS: &str = "\
You compare new facts with existing facts of a knowledge graph. For each new fact #id answer:
- duplicate_of: index of the duplicate candidate that states the same thing (same relation between the same entities, same meaning, maybe other words), or null.
- contradicts: indexes of the contradiction candidates the new fact makes no longer true. A contradiction needs a shared entity and an incompatible relation: \"Alice lives in Paris\" contradicts \"Alice lives in Berlin\"; \"Alice likes tea\" does not contradict \"Alice likes coffee\". Facts whose validity windows do not overlap never contradict. When unsure, leave it out.
Answer every new fact id exactly once.";

fn write_candidates(out: &mut String, title: &str, facts: &[CandidateFact]) {
    if facts.is_empty() {
        return;
    }
    let _ = writeln!(out, " {title}:");
    for (i, c) in facts.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {i}: {}: {} [valid {}]",
            one_line(&c.relation, 60),
            one_line(&c.fact, FACT_CHARS),
            window(c.valid_at, c.invalid_at)
        );
    }
}

/// `2024-03-01 to present`, `unknown to 2024-05-01T10:00:00Z`.
fn window(from: Option<Timestamp>, to: Option<Timestamp>) -> String {
    let from = from.map(short_time).unwrap_or_else(|| "unknown".into());
    let to = to.map(short_time).unwrap_or_else(|| "present".into());
    format!("{from} to {to}")
}

/// A timestamp, as a bare date when it is midnight UTC.
fn short_time(t: Timestamp) -> String {
    let s = t.to_rfc3339();
    match s.strip_suffix("T00:00:00Z") {
        Some(date) => date.to_owned(),
        None => s,
    }
}

/// Summaries of entities, communities or sagas (one call for many items).
pub fn summary(req: &SummaryRequest) -> Prompt {
    let max = req.max_chars;
    let system = match req.kind {
        SummaryKind::Entity => format!(
            "You maintain short summaries of the entities of a knowledge graph. For each entity #id, rewrite its current summary to include the new facts: keep what is still true, prefer newer information when facts conflict, drop repetition. Use only the information given. Plain sentences, at most {max} characters.\nAnswer every id exactly once."
        ),
        SummaryKind::Community => format!(
            "You summarize communities: clusters of related entities of a knowledge graph. For each community #id, say what its members are and what connects them, from its current summary and the member information given. Use only that information. Plain sentences, at most {max} characters.\nAnswer every id exactly once."
        ),
        SummaryKind::Saga => format!(
            "You maintain summaries of sagas: storylines of episodes in time order. For each saga #id, extend its current summary with the new episodes: what happened, who was involved, how things stand now. Use only the information given. Plain sentences, at most {max} characters.\nAnswer every id exactly once."
        ),
    };
    let mut user = String::new();
    for (id, item) in req.items.iter().enumerate() {
        let _ = writeln!(user, "#{id} {}", one_line(&item.subject, 200));
        let current = one_line(&item.current, max.max(200) * 2);
        if !current.is_empty() {
            let _ = writeln!(user, " current: {current}");
        }
        if !item.new_material.is_empty() {
            user.push_str(" new:\n");
            for m in &item.new_material {
                let _ = writeln!(user, " - {}", one_line(m, MATERIAL_CHARS));
            }
        }
    }
    let kind = match req.kind {
        SummaryKind::Entity => PromptKind::SummarizeEntities,
        SummaryKind::Community => PromptKind::SummarizeCommunities,
        SummaryKind::Saga => PromptKind::SummarizeSaga,
    };
    Prompt {
        kind,
        system,
        user,
        schema: answers_schema(json!({
            "id": {"type": "integer"},
            "summary": {"type": "string"},
        })),
    }
}

/// Relevance of passages to a query (a cross-encoder by prompt).
pub fn rerank(query: &str, passages: &[String]) -> Prompt {
    let mut user = format!("QUERY: {}\nPASSAGES\n", one_line(query, 1_000));
    for (id, p) in passages.iter().enumerate() {
        let _ = writeln!(user, "#{id} {}", one_line(p, PASSAGE_CHARS));
    }
    Prompt {
        kind: PromptKind::Rerank,
        system: RERANK.into(),
        user,
        schema: answers_schema(json!({
            "id": {"type": "integer"},
            "score": {"type": "number"},
        })),
    }
}

const RERANK: &str = "\
Rate how relevant each passage #id is to the query: 0 = unrelated, 100 = answers it directly.
Answer every passage id exactly once.";

/// `{"answers": [ {props...} ]}`, the shape of every per-item answer.
fn answers_schema(props: Value) -> Value {
    object(json!({"answers": {"type": "array", "items": object(props)}}))
}

/// A strict-mode object schema: every property required, nothing else allowed.
fn object(props: Value) -> Value {
    let required: Vec<String> = props
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": props,
    })
}

/// Collapses whitespace to single spaces and cuts at `max` characters (with `…`).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut count = 0;
    for word in text.split_whitespace() {
        if count > 0 {
            out.push(' ');
            count += 1;
        }
        for c in word.chars() {
            if count >= max {
                out.push('…');
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

/// The current episode's content inside a prompt.
pub fn current_episode(text: &str) -> Option<&str> {
    let start = text.find(CURRENT_EPISODE_OPEN)? + CURRENT_EPISODE_OPEN.len();
    let len = text[start..].find(CURRENT_EPISODE_CLOSE)?;
    Some(text[start..start + len].trim())
}

/// Number of `#<id>` items a user message asks about (outside the episode).
pub fn item_count(user: &str) -> usize {
    let outside = match (
        user.find(CURRENT_EPISODE_OPEN),
        user.find(CURRENT_EPISODE_CLOSE),
    ) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &user[..a], &user[b..]),
        _ => user.to_owned(),
    };
    outside
        .lines()
        .filter(|l| {
            l.strip_prefix('#')
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count()
}

/// The schema name written by [`Prompt::system_with_schema`], if any.
pub fn schema_name_in(system: &str) -> Option<&str> {
    let rest = &system[system.find(SCHEMA_MARKER)? + SCHEMA_MARKER.len()..];
    let rest = rest.trim_start().strip_prefix('"')?;
    Some(&rest[..rest.find('"')?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_engine::ports::{
        AmbiguousEntity, CandidateEntity, ContextEpisode, NewFactCandidates, SummaryItem,
    };

    pub(crate) fn ts(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap()
    }

    fn chat_request(content: &str) -> ExtractionRequest {
        let previous = [
            "alice: Hi! I just moved to Berlin for a new job.",
            "assistant: Congratulations! Where are you working now?",
            "alice: At Acme Corp, as a data engineer. My manager is Bob Stone.",
            "assistant: Sounds exciting. How is the city treating you?",
            "alice: Great so far, though I miss my sister Carol in Paris.",
            "assistant: Do you plan to visit her soon?",
            "alice: Maybe next month, for her birthday on the 14th.",
            "assistant: That sounds lovely. Anything else new?",
            "alice: I adopted a cat named Miso last weekend!",
            "assistant: How wonderful! How is Miso settling in?",
        ];
        ExtractionRequest {
            name: "msg-11".into(),
            content: content.into(),
            source: EpisodeType::Message,
            source_description: "support chat".into(),
            reference_time: ts("2024-05-02T10:00:00Z"),
            previous_episodes: previous
                .iter()
                .enumerate()
                .map(|(i, c)| ContextEpisode {
                    content: (*c).into(),
                    valid_at: ts("2024-05-01T09:00:00Z")
                        .saturating_add_micros(i as i64 * 60_000_000),
                })
                .collect(),
            ontology: Ontology::default(),
        }
    }

    #[test]
    fn extraction_prompt_is_compact_and_marks_the_episode() {
        let content = "alice: Miso is doing great, she already sleeps on my desk. Bob says I can bring her to the office on Fridays.";
        let p = extraction(&chat_request(content));
        assert!(
            p.chars() < 4_500,
            "extraction prompt is {} chars:\n{}\n{}",
            p.chars(),
            p.system,
            p.user
        );
        assert_eq!(current_episode(&p.user), Some(content));
        assert!(p.system.contains("1 Person: A human being."));
        assert!(p.system.contains("LIVES_IN: The person's current home."));
        assert!(p.user.contains("REFERENCE TIME: 2024-05-02T10:00:00Z"));
        assert!(p.user.contains("[2024-05-01T09:00:00Z] alice: Hi!"));
        assert_eq!(
            p.schema["properties"]["entities"]["items"]["properties"]["type_id"]["enum"],
            json!([0, 1, 2, 3])
        );
        // No attribute fields declared: no attributes in the schema or the instructions.
        assert!(
            p.schema["properties"]["entities"]["items"]["properties"]
                .get("attributes")
                .is_none()
        );
        assert_eq!(item_count(&p.user), 0);
    }

    #[test]
    fn extraction_prompt_carries_the_whole_ontology() {
        let mut req = chat_request("bob: I am 41.");
        req.ontology = Ontology::parse(
            "entity_types:\n  - name: Person\n    description: A human.\n    attributes:\n      - {name: age, type: integer, description: Age in years}\n  - name: Secret\n\
             edge_types:\n  - {name: KNOWS, description: Acquaintance.}\nexcluded_entity_types: [Secret]\ncustom_instructions: Prefer full names.\n",
        )
        .unwrap();
        let p = extraction(&req);
        assert!(
            p.system
                .contains("1 Person: A human. Attributes: age (integer) Age in years"),
            "{}",
            p.system
        );
        assert!(
            p.system
                .contains("Do not extract entities of types: Secret")
        );
        assert!(p.system.contains("KNOWS: Acquaintance."));
        assert!(p.system.contains("INSTRUCTIONS\nPrefer full names."));
        assert!(p.system.contains("attributes:"));
        assert!(
            p.schema["properties"]["entities"]["items"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("attributes"))
        );
    }

    #[test]
    fn context_is_bounded_and_keeps_the_newest() {
        let mut req = chat_request("x: y");
        req.previous_episodes = (0..50)
            .map(|i| ContextEpisode {
                content: format!("episode {i} {}", "word ".repeat(200)),
                valid_at: ts("2024-01-01T00:00:00Z"),
            })
            .collect();
        let p = extraction(&req);
        assert!(
            p.user.len() < CONTEXT_TOTAL_CHARS + 1_000,
            "{}",
            p.user.len()
        );
        assert!(p.user.contains("episode 49 "));
        assert!(!p.user.contains("episode 0 "));
    }

    #[test]
    fn resolution_prompts_number_their_items() {
        let er = EntityResolutionRequest {
            episode_content: "alice: #1 fan of NYC".into(),
            entities: vec![
                AmbiguousEntity {
                    name: "NYC".into(),
                    entity_type: "Location".into(),
                    candidates: vec![CandidateEntity {
                        name: "New York City".into(),
                        entity_type: "Location".into(),
                        summary: "A city.".into(),
                    }],
                },
                AmbiguousEntity {
                    name: "Alice".into(),
                    entity_type: "Person".into(),
                    candidates: vec![],
                },
            ],
        };
        let p = entity_resolution(&er);
        assert_eq!(item_count(&p.user), 2, "{}", p.user);
        assert!(
            p.user
                .contains("#0 NYC (Location)\n  0: New York City (Location) - A city.\n")
        );

        let cand = |f: &str| CandidateFact {
            relation: "LIVES_IN".into(),
            fact: f.into(),
            valid_at: Some(ts("2020-01-01T00:00:00Z")),
            invalid_at: None,
        };
        let fr = FactResolutionRequest {
            facts: vec![NewFactCandidates {
                relation: "LIVES_IN".into(),
                fact: "Alice lives in Paris.".into(),
                valid_at: Some(ts("2024-03-01T12:30:00Z")),
                duplicates: vec![cand("Alice lives in Paris.")],
                contradictions: vec![cand("Alice lives in Berlin.")],
            }],
        };
        let p = fact_resolution(&fr);
        assert_eq!(item_count(&p.user), 1);
        assert!(
            p.user.contains(
                "#0 LIVES_IN: Alice lives in Paris. [valid 2024-03-01T12:30:00Z to present]"
            ),
            "{}",
            p.user
        );
        assert!(
            p.user
                .contains("  0: LIVES_IN: Alice lives in Berlin. [valid 2020-01-01 to present]")
        );
        assert!(
            p.system.contains("shared entity")
                && p.system.contains("do not overlap never contradict")
        );

        let sr = SummaryRequest {
            kind: SummaryKind::Entity,
            max_chars: 250,
            items: vec![SummaryItem {
                subject: "Alice".into(),
                current: String::new(),
                new_material: vec!["Alice moved\nto Paris.".into()],
            }],
        };
        let p = summary(&sr);
        assert!(p.system.contains("at most 250 characters"));
        assert!(p.user.contains(" - Alice moved to Paris.\n"));
        assert_eq!(item_count(&p.user), 1);

        let p = rerank(
            "where does alice live",
            &["Alice lives in\n#2 Paris".into(), "Bob".into()],
        );
        assert_eq!(item_count(&p.user), 2);
    }

    #[test]
    fn json_object_mode_writes_the_schema_into_the_instructions() {
        let p = rerank("q", &["a".into()]);
        let system = p.system_with_schema();
        assert_eq!(schema_name_in(&system), Some("rerank"));
        assert_eq!(schema_name_in(&p.system), None);
        assert!(system.contains("\"additionalProperties\":false"));
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("  a \n\t b  ", 10), "a b");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("ab cd", 4), "ab c…");
    }
}
