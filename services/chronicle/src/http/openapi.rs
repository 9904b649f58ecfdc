//! The OpenAPI 3.1 document, built from the same route table the router is
//! built from (so a route cannot exist without its entry), with the body
//! schemas generated (schemars) from the types the handlers decode and
//! encode: requests as they deserialize, replies as they serialize. Tests
//! check the request schemas against the fields the decoders accept, and
//! real responses against the response schemas.

use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::Route;
use crate::app::auth::Access;

/// A body's schema: a `$ref` to its component, registered in the generator.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of `T` (a request or reply body type).
pub const fn schema<T: JsonSchema>() -> SchemaFn {
    SchemaGenerator::subschema_for::<T>
}

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
    /// Request body type (generated with the deserialize contract).
    pub body: Option<SchemaFn>,
    /// Success status.
    pub ok: u16,
    /// Success body type (serialize contract); `None`: plain text.
    pub ok_schema: Option<SchemaFn>,
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

fn operation(route: &Route, generators: &mut Generators) -> Value {
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
            "content": { "application/json": { "schema": schema(&mut generators.replies) } },
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
            "content": { "application/json": { "schema": body(&mut generators.requests) } },
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

/// One generator per direction: a request body is described as it is
/// read (fields with defaults optional), a reply as it is written (fields
/// skipped when empty optional, every other one required).
struct Generators {
    requests: SchemaGenerator,
    replies: SchemaGenerator,
}

impl Generators {
    fn new() -> Self {
        let settings = |contract| {
            let mut s = SchemaSettings::draft2020_12();
            s.definitions_path = "/components/schemas".into();
            s.contract = contract;
            s.into_generator()
        };
        let requests = settings(Contract::Deserialize);
        let mut replies = settings(Contract::Serialize);
        // The error body is every operation's, referenced by name.
        replies.subschema_for::<crate::app::error::ErrorBody<'static>>();
        Generators { requests, replies }
    }

    /// Every component, keyed by name. A name both directions use must
    /// mean the same schema in both (a test checks it); the reply's wins.
    fn components(mut self) -> Map<String, Value> {
        let mut all = self.requests.take_definitions(true);
        all.extend(self.replies.take_definitions(true));
        all
    }
}

/// The whole document for a route table.
pub fn document(routes: &[Route]) -> Value {
    let mut generators = Generators::new();
    let mut paths = Map::new();
    for r in routes {
        let op = operation(r, &mut generators);
        let entry = paths.entry(r.path.to_owned()).or_insert_with(|| json!({}));
        entry[r.verb.as_lower()] = op;
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
            "schemas": generators.components(),
        },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde::de::DeserializeOwned;

    use super::*;
    use crate::app::decode;

    #[test]
    fn a_name_used_both_ways_is_one_schema() {
        let mut generators = Generators::new();
        for r in super::super::routes() {
            operation(&r, &mut generators);
        }
        let requests = generators.requests.take_definitions(true);
        let replies = generators.replies.take_definitions(true);
        for (name, schema) in &requests {
            if let Some(other) = replies.get(name) {
                assert_eq!(schema, other, "{name} differs between requests and replies");
            }
        }
        assert!(requests.contains_key("EpisodeInput") && replies.contains_key("Error"));
    }

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
