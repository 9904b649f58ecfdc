//! The OpenAPI 3.1 document, built from the same route table the router is
//! built from (so a route cannot exist without its entry), plus hand-written
//! JSON schemas of the bodies. Tests check the schemas' property lists
//! against the fields the decoders accept, and real responses against the
//! response schemas.

use serde_json::{Map, Value, json};

use super::Route;
use crate::app::auth::Access;
use crate::app::decode;

/// Documentation of one operation.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// `operationId`.
    pub id: &'static str,
    /// One line.
    pub summary: &'static str,
    /// More words, when useful.
    pub description: &'static str,
    /// Query parameters (path parameters come from the template).
    pub query: &'static [Param],
    /// Request body schema (a component name).
    pub body: Option<&'static str>,
    /// Success status.
    pub ok: u16,
    /// Success body schema (a component name); `None`: plain text.
    pub ok_schema: Option<&'static str>,
}

/// A query parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// JSON-schema type: `string`, `integer`, `boolean`.
    pub kind: &'static str,
    /// JSON-schema format (`date-time`), when any.
    pub format: Option<&'static str>,
    /// May it repeat.
    pub repeatable: bool,
    /// What it does.
    pub description: &'static str,
}

const fn param(name: &'static str, kind: &'static str, description: &'static str) -> Param {
    Param {
        name,
        kind,
        format: None,
        repeatable: false,
        description,
    }
}

const fn time_param(name: &'static str, description: &'static str) -> Param {
    Param {
        name,
        kind: "string",
        format: Some("date-time"),
        repeatable: false,
        description,
    }
}

/// Query parameters of `GET /episodes`, in [`decode::LIST_PARAMS`] order.
pub const LIST_QUERY: &[Param] = &[
    param(
        "last_n",
        "integer",
        "Most episodes returned, newest reference time first (1..=1000, default 20).",
    ),
    time_param(
        "before",
        "Only episodes whose reference time is at or before this instant.",
    ),
];

/// Query parameters of `GET /facts`, in [`decode::FACTS_PARAMS`] order.
pub const FACTS_QUERY: &[Param] = &[
    time_param(
        "as_of",
        "Valid time: facts true in the world at this instant.",
    ),
    time_param(
        "known_at",
        "Transaction time: the facts as the system knew them at this instant.",
    ),
    param(
        "entity",
        "string",
        "Only facts about this entity (uuid or name).",
    ),
    param(
        "include_history",
        "boolean",
        "Include ended and invalidated facts.",
    ),
    Param {
        name: "edge_type",
        kind: "string",
        format: None,
        repeatable: true,
        description: "Only facts with this relation name; repeat for several.",
    },
    param(
        "limit",
        "integer",
        "Most facts returned (1..=1000, default 100); `truncated` says whether more matched.",
    ),
];

fn path_param(name: &str) -> Value {
    let (description, format) = match name {
        "group_id" => (
            "The tenant: 1..=128 characters of A-Z a-z 0-9 _ . -",
            Value::Null,
        ),
        "name" => (
            "A saga's name, percent-encoded (1..=512 characters).",
            Value::Null,
        ),
        _ => ("A uuid.", json!("uuid")),
    };
    let mut schema = json!({ "type": "string" });
    if !format.is_null() {
        schema["format"] = format;
    }
    json!({
        "name": name,
        "in": "path",
        "required": true,
        "description": description,
        "schema": schema,
    })
}

fn query_param(p: &Param) -> Value {
    let mut schema = json!({ "type": p.kind });
    if let Some(f) = p.format {
        schema["format"] = json!(f);
    }
    if p.repeatable {
        schema = json!({ "type": "array", "items": schema });
    }
    json!({
        "name": p.name,
        "in": "query",
        "required": false,
        "description": p.description,
        "schema": schema,
        "explode": true,
    })
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": reference("Error") } },
    })
}

fn operation(route: &Route) -> Value {
    let op = &route.doc;
    let mut parameters: Vec<Value> = route
        .path
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(path_param)
        .collect();
    parameters.extend(op.query.iter().map(query_param));
    let ok = match op.ok_schema {
        Some(schema) => json!({
            "description": op.summary,
            "content": { "application/json": { "schema": reference(schema) } },
        }),
        None => json!({
            "description": op.summary,
            "content": { "text/plain": { "schema": { "type": "string" } } },
        }),
    };
    let mut responses = Map::new();
    responses.insert(op.ok.to_string(), ok);
    if route.path.starts_with("/v1/") {
        responses.insert(
            "400".into(),
            error_response("Invalid input; `field` names what to fix."),
        );
        responses.insert(
            "401".into(),
            error_response("Missing or unknown bearer token (when the server uses --auth)."),
        );
        responses.insert(
            "403".into(),
            error_response(
                "The token does not cover this group, or only reads it; without --auth, a \
                 Host or Origin that is not loopback.",
            ),
        );
        responses.insert(
            "429".into(),
            error_response(
                "The token's request rate (requests_per_second in the tokens file) is spent; \
                 Retry-After says when to come back.",
            ),
        );
        if route.path.contains("{uuid}") || route.path.contains("{name}") || op.id == "listFacts" {
            responses.insert(
                "404".into(),
                error_response("Nothing with this id (or name) in this group."),
            );
        }
        if op.body.is_some() {
            responses.insert(
                "413".into(),
                error_response("Body over --max-body-bytes, or a batch over 1000 items."),
            );
            responses.insert(
                "408".into(),
                error_response("The body did not arrive within --body-timeout-ms."),
            );
            responses.insert(
                "415".into(),
                error_response("A body without `Content-Type: application/json`."),
            );
        }
        responses.insert(
            "500".into(),
            error_response("A server fault (logged); not the caller's."),
        );
        if route.access == Some(Access::Write) {
            responses.insert(
                "503".into(),
                error_response("The log did not accept the write; retry."),
            );
        }
    }
    if op.id == "readyz" {
        responses.insert(
            "503".into(),
            json!({
                "description": "Not ready; the body says which check failed.",
                "content": { "application/json": { "schema": reference("Readiness") } },
            }),
        );
    }
    let mut out = json!({
        "operationId": op.id,
        "summary": op.summary,
        "parameters": parameters,
        "responses": responses,
    });
    if !op.description.is_empty() {
        out["description"] = json!(op.description);
    }
    if let Some(body) = op.body {
        out["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": reference(body) } },
        });
    }
    out["security"] = match route.access {
        Some(_) => json!([{ "bearer": [] }]),
        None => json!([]),
    };
    if let Some(a) = route.access {
        out["x-chronicle-access"] = json!(a.as_str());
    }
    out
}

/// The whole document for a route table.
pub fn document(routes: &[Route]) -> Value {
    let mut paths = Map::new();
    for r in routes {
        let entry = paths.entry(r.path.to_owned()).or_insert_with(|| json!({}));
        entry[r.verb.as_lower()] = operation(r);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "chronicle",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A temporal context graph for agent memory. Every route under /v1 is \
                scoped to one group (tenant); with --auth, a bearer token must cover that group \
                (read, or write for episodes, triplets, retractions, community builds and saga \
                summaries).",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" },
            },
            "schemas": schemas(),
        },
    })
}

fn nullable(t: &str) -> Value {
    json!({ "type": [t, "null"] })
}

fn time() -> Value {
    json!({ "type": "string", "format": "date-time" })
}

fn nullable_time() -> Value {
    json!({ "type": ["string", "null"], "format": "date-time" })
}

fn uuid() -> Value {
    json!({ "type": "string", "format": "uuid" })
}

fn strings() -> Value {
    json!({ "type": "array", "items": { "type": "string" } })
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": false,
    })
}

/// A map of named schemas (one `json!` each: the whole set in one macro
/// call would exceed the recursion limit).
macro_rules! schemas {
    ($($name:literal => $value:expr),* $(,)?) => {{
        let mut m = Map::new();
        $( m.insert($name.to_owned(), $value); )*
        Value::Object(m)
    }};
}

fn schemas() -> Value {
    let operators = json!(["=", "<>", ">", "<", ">=", "<=", "IS NULL", "IS NOT NULL"]);
    let date_groups = json!({
        "type": ["array", "null"],
        "description": "OR of AND groups: the outer list is OR, each inner list AND.",
        "items": { "type": "array", "items": reference("DateFilter") },
    });
    let scope = json!({ "oneOf": [reference("ScopeConfig"), { "type": "null" }] });
    schemas! {
        "Error" => object(&["error", "field"], json!({
            "error": { "type": "string", "description": "What is wrong and what to do." },
            "field": { "type": ["string", "null"], "description": "The field to fix: a JSON path (`episodes[2].content`), a query parameter or a path segment." },
        })),
        "EpisodeInput" => object(&["content"], json!({
            "group_id": { "type": ["string", "null"], "description": "Optional; must equal the group in the path." },
            "name": nullable("string"),
            "content": { "type": "string", "description": "`actor: text` for messages; at most 256 KiB." },
            "reference_time": { "type": ["string", "null"], "format": "date-time", "description": "When the original document was created; now by default. Give it (or `uuid`) to make retries idempotent." },
            "source": { "type": ["string", "null"], "enum": ["message", "text", "json", "fact_triple", null] },
            "source_description": nullable("string"),
            "uuid": { "type": ["string", "null"], "format": "uuid", "description": "Caller-chosen id; derived from the content otherwise." },
            "previous_episode_uuids": { "type": ["array", "null"], "items": uuid() },
            "saga": nullable("string"),
            "metadata": nullable("object"),
        })),
        "EpisodeBatch" => object(&["episodes"], json!({
            "episodes": { "type": "array", "minItems": 1, "maxItems": decode::MAX_BATCH, "items": reference("EpisodeInput") },
        })),
        "EpisodeSubmission" => json!({ "oneOf": [reference("EpisodeInput"), reference("EpisodeBatch")] }),
        "LogPosition" => object(&["partition", "offset"], json!({
            "partition": { "type": "integer" },
            "offset": { "type": "integer" },
        })),
        "Accepted" => object(&["uuid", "status", "position"], json!({
            "uuid": uuid(),
            "status": { "const": "pending" },
            "position": reference("LogPosition"),
        })),
        "AcceptedBatch" => object(&["episodes"], json!({
            "episodes": { "type": "array", "items": reference("Accepted") },
        })),
        "Acceptance" => json!({ "oneOf": [reference("Accepted"), reference("AcceptedBatch")] }),
        "Retraction" => object(&["uuid", "status", "position", "episode_uuid"], json!({
            "uuid": { "type": "string", "format": "uuid", "description": "The retraction command's id (track it with GET /episodes/{uuid})." },
            "status": { "const": "pending" },
            "position": reference("LogPosition"),
            "episode_uuid": uuid(),
        })),
        "DecisionCounts" => object(&["events", "entities_created", "facts_created", "facts_restated", "facts_invalidated"], json!({
            "events": { "type": "integer" },
            "entities_created": { "type": "integer" },
            "facts_created": { "type": "integer" },
            "facts_restated": { "type": "integer" },
            "facts_invalidated": { "type": "integer" },
        })),
        "EpisodeStatus" => object(&["uuid", "group_id", "status"], json!({
            "uuid": uuid(),
            "group_id": { "type": "string" },
            "status": { "enum": ["pending", "processed", "dead_lettered"] },
            "position": { "$ref": "#/components/schemas/LogPosition", "description": "pending: where it waits on the episodes log." },
            "counts": { "$ref": "#/components/schemas/DecisionCounts", "description": "processed: what the decision changed." },
            "reason": { "type": "string", "description": "dead_lettered: why." },
        })),
        "Episode" => object(&["uuid", "name", "group_id", "source", "source_description", "content", "valid_at", "created_at", "entity_edges", "metadata"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
            "group_id": { "type": "string" },
            "source": { "enum": ["message", "text", "json", "fact_triple"] },
            "source_description": { "type": "string" },
            "content": { "type": "string" },
            "valid_at": time(),
            "created_at": time(),
            "entity_edges": { "type": "array", "items": uuid() },
            "metadata": { "type": "object" },
        })),
        "EpisodeList" => object(&["episodes"], json!({
            "episodes": { "type": "array", "items": reference("Episode") },
        })),
        "TripletInput" => object(&["source", "relation", "target"], json!({
            "source": { "type": "string" },
            "relation": { "type": "string", "description": "e.g. LIVES_IN" },
            "target": { "type": "string" },
            "fact": nullable("string"),
            "source_labels": strings(),
            "target_labels": strings(),
            "valid_at": nullable_time(),
            "invalid_at": nullable_time(),
            "reference_time": nullable_time(),
            "name": nullable("string"),
            "source_description": nullable("string"),
            "uuid": { "type": ["string", "null"], "format": "uuid" },
            "saga": nullable("string"),
            "metadata": nullable("object"),
        })),
        "TripletBatch" => object(&["triplets"], json!({
            "triplets": { "type": "array", "minItems": 1, "maxItems": decode::MAX_BATCH, "items": reference("TripletInput") },
        })),
        "TripletSubmission" => json!({ "oneOf": [reference("TripletInput"), reference("TripletBatch")] }),
        "SearchRequest" => object(&["query"], json!({
            "query": { "type": "string", "minLength": 1 },
            "recipe": { "type": ["string", "null"], "enum": chronicle_engine::search::RECIPES.iter().map(|r| json!(r)).chain([Value::Null]).collect::<Vec<_>>(), "description": "Default MEMORY_HYBRID_SEARCH_RRF (turns with their facts and context); give this or `config`." },
            "config": { "oneOf": [reference("SearchConfig"), { "type": "null" }] },
            "filters": { "oneOf": [reference("SearchFilters"), { "type": "null" }] },
            "as_of": nullable_time(),
            "known_at": nullable_time(),
            "center": { "type": ["string", "null"], "description": "Entity uuid or name, for BFS and node-distance ranking." },
            "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": decode::MAX_SEARCH_LIMIT },
            "include_history": nullable("boolean"),
        })),
        "SearchConfig" => object(&[], json!({
            "facts": scope,
            "entities": scope,
            "episodes": scope,
            "communities": scope,
            "limit": { "type": "integer", "minimum": 1, "maximum": decode::MAX_SEARCH_LIMIT },
            "bfs_max_depth": { "type": "integer", "minimum": 0, "maximum": decode::MAX_BFS_DEPTH },
            "mmr_lambda": { "type": "number", "minimum": 0, "maximum": 1 },
            "mixed": { "type": "boolean", "description": "One list of episodes found by their own channels and by the facts extracted from them; limit counts results." },
            "context_turns": { "type": "integer", "minimum": 0, "maximum": decode::MAX_CONTEXT_TURNS },
        })),
        "ScopeConfig" => object(&["channels", "reranker"], json!({
            "channels": { "type": "array", "minItems": 1, "items": { "enum": ["bm25", "cosine", "bfs"] } },
            "reranker": { "enum": ["rrf", "mmr", "node_distance", "episode_mentions", "cross_encoder"] },
        })),
        "DateFilter" => object(&["comparison_operator"], json!({
            "date": nullable_time(),
            "comparison_operator": { "enum": operators },
        })),
        "PropertyFilter" => object(&["property_name", "comparison_operator"], json!({
            "property_name": { "type": "string" },
            "property_value": {},
            "comparison_operator": { "enum": operators },
        })),
        "SearchFilters" => object(&[], json!({
            "node_labels": { "type": ["array", "null"], "items": { "type": "string" } },
            "edge_types": { "type": ["array", "null"], "items": { "type": "string" } },
            "valid_at": date_groups,
            "invalid_at": date_groups,
            "created_at": date_groups,
            "expired_at": date_groups,
            "edge_uuids": { "type": ["array", "null"], "items": uuid() },
            "property_filters": { "type": ["array", "null"], "items": reference("PropertyFilter") },
            "as_of": nullable_time(),
            "known_at": nullable_time(),
            "include_history": { "type": "boolean" },
        })),
        "Provenance" => object(&["uuid", "name"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
        })),
        "ResultItem" => object(&["kind", "uuid", "score", "name", "created_at", "episodes"], json!({
            "kind": { "enum": ["fact", "entity", "episode", "community"] },
            "uuid": uuid(),
            "score": { "type": "number" },
            "name": { "type": "string", "description": "Relation (facts) or name." },
            "fact": { "type": "string" },
            "source": { "type": "string" },
            "target": { "type": "string" },
            "summary": { "type": "string" },
            "content": { "type": "string" },
            "labels": strings(),
            "valid_at": nullable_time(),
            "invalid_at": nullable_time(),
            "created_at": time(),
            "expired_at": nullable_time(),
            "episodes": { "type": "array", "items": reference("Provenance"), "description": "Provenance: the episodes that assert it." },
            "facts": { "type": "array", "items": reference("SupportingFact"), "description": "Mixed search: the matching facts extracted from this episode." },
            "context": { "type": "array", "items": reference("Turn"), "description": "Mixed search: the turns this result spans, in order, itself included." },
        })),
        "SupportingFact" => object(&["uuid", "fact"], json!({
            "uuid": uuid(),
            "fact": { "type": "string" },
            "valid_at": nullable_time(),
            "invalid_at": nullable_time(),
            "expired_at": nullable_time(),
        })),
        "Turn" => object(&["uuid", "name", "content", "valid_at"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
            "content": { "type": "string" },
            "valid_at": time(),
        })),
        "ContextRequest" => object(&[], json!({
            "query": { "type": ["string", "null"], "description": "What the agent needs context for; give this or `messages`." },
            "messages": { "type": ["array", "null"], "items": { "type": "string" }, "description": "Recent messages; the last ones form the query." },
            "max_chars": { "type": ["integer", "null"], "minimum": 1, "maximum": decode::MAX_CONTEXT_CHARS, "description": "Budget of the block (default 4000)." },
            "as_of": nullable_time(),
        })),
        "Context" => object(&["context", "facts", "turns"], json!({
            "context": { "type": "string", "description": "Ready to paste: facts with validity windows, then the turns that support them." },
            "facts": { "type": "array", "items": reference("SupportingFact") },
            "turns": { "type": "array", "items": reference("Turn") },
        })),
        "SearchResults" => object(&["results"], json!({
            "results": { "type": "array", "items": reference("ResultItem") },
        })),
        "Entity" => object(&["uuid", "name", "group_id", "labels", "created_at", "summary", "attributes"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
            "group_id": { "type": "string" },
            "labels": strings(),
            "created_at": time(),
            "name_embedding": { "type": "null", "description": "Never returned." },
            "summary": { "type": "string" },
            "attributes": { "type": "object" },
        })),
        "Timeline" => object(&["entity", "facts"], json!({
            "entity": reference("Entity"),
            "facts": { "type": "array", "items": reference("ResultItem") },
        })),
        "FactList" => object(&["facts", "truncated"], json!({
            "facts": { "type": "array", "items": reference("ResultItem") },
            "truncated": { "type": "boolean" },
        })),
        "EpisodeProducts" => object(&["episodes", "entities", "facts"], json!({
            "episodes": { "type": "array", "items": uuid(), "description": "The episodes asked about that are in the group's graph." },
            "entities": { "type": "array", "items": reference("ResultItem"), "description": "Entities they mention." },
            "facts": { "type": "array", "items": reference("ResultItem"), "description": "Facts they created, restated or invalidated." },
        })),
        "Member" => object(&["uuid", "name"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
        })),
        "Community" => object(&["uuid", "name", "summary", "members", "created_at"], json!({
            "uuid": uuid(),
            "name": { "type": "string", "description": "Its most central members." },
            "summary": { "type": "string" },
            "members": { "type": "array", "items": reference("Member") },
            "created_at": time(),
        })),
        "CommunityList" => object(&["communities"], json!({
            "communities": { "type": "array", "items": reference("Community") },
        })),
        "SagaEpisode" => object(&["uuid", "name", "valid_at"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
            "valid_at": time(),
        })),
        "Saga" => object(&["uuid", "name", "summary", "last_summarized_episode_valid_at", "episodes", "created_at"], json!({
            "uuid": uuid(),
            "name": { "type": "string" },
            "summary": { "type": "string", "description": "Of the episodes absorbed so far." },
            "last_summarized_episode_valid_at": { "type": ["string", "null"], "format": "date-time", "description": "The watermark: a summary absorbs only episodes with a later reference time." },
            "episodes": { "type": "array", "items": reference("SagaEpisode"), "description": "In link order (HAS_EPISODE; consecutive ones are NEXT_EPISODE)." },
            "created_at": time(),
        })),
        "Health" => object(&["status"], json!({ "status": { "const": "ok" } })),
        "Readiness" => object(&["ready", "log", "processor", "projector_lag", "max_projector_lag"], json!({
            "ready": { "type": "boolean" },
            "log": { "type": "boolean", "description": "The log answered." },
            "store": { "type": "boolean", "description": "The store answered (absent on a gateway, which opens none)." },
            "processor": { "type": "boolean", "description": "The processor recovered its state." },
            "projector_lag": { "type": ["integer", "null"], "description": "Graph-event records not yet projected." },
            "max_projector_lag": { "type": "integer" },
        })),
        "OpenApi" => json!({ "type": "object" }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde::de::DeserializeOwned;

    use super::*;

    /// The fields a `deny_unknown_fields` type accepts, read off serde's
    /// "unknown field" message.
    fn accepted_fields<T: DeserializeOwned>() -> BTreeSet<String> {
        let e = match serde_json::from_str::<T>(r#"{"\u0001": 0}"#) {
            Ok(_) => panic!("an unknown field was accepted"),
            Err(e) => e.to_string(),
        };
        let expected = e.split("expected").nth(1).unwrap_or_else(|| panic!("{e}"));
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    fn documented(doc: &Value, schema: &str) -> BTreeSet<String> {
        doc["components"]["schemas"][schema]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{schema} has no properties"))
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn request_schemas_list_exactly_the_accepted_fields() {
        let doc = document(&super::super::routes());
        use chronicle_engine::search as s;
        let checks: Vec<(&str, BTreeSet<String>)> = vec![
            (
                "EpisodeInput",
                accepted_fields::<crate::gateway::EpisodeInput>(),
            ),
            ("TripletInput", accepted_fields::<decode::TripletInput>()),
            ("SearchRequest", accepted_fields::<decode::SearchBody>()),
            ("SearchConfig", accepted_fields::<s::SearchConfig>()),
            ("ScopeConfig", accepted_fields::<s::ScopeConfig>()),
            ("SearchFilters", accepted_fields::<s::SearchFilters>()),
            ("DateFilter", accepted_fields::<s::DateFilter>()),
            ("PropertyFilter", accepted_fields::<s::PropertyFilter>()),
        ];
        for (schema, fields) in checks {
            assert_eq!(documented(&doc, schema), fields, "{schema}");
        }
    }

    #[test]
    fn query_parameters_match_the_decoders() {
        let names = |ps: &[Param]| ps.iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(LIST_QUERY), decode::LIST_PARAMS);
        assert_eq!(names(FACTS_QUERY), decode::FACTS_PARAMS);
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document(&super::super::routes());
        let text = doc.to_string();
        for part in text.split("\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap_or_default();
            assert!(
                doc["components"]["schemas"].get(name).is_some(),
                "dangling reference to {name}"
            );
        }
    }
}
