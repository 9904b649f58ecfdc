//! The tool catalogue: one table ([`TOOLS`]) of names, descriptions, access
//! and input schemas, which `tools/list` shows and the dispatcher
//! ([`super::tools::call`]) looks a call up in.
//!
//! Every schema is an argument type of [`super::tools`] with `group_id`
//! added by [`input_schema`]: no tool body can run for a group the caller
//! has not been checked against.

use std::sync::Arc;

use rmcp::handler::server::tool::schema_for_type;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde_json::{Value, json};

use super::tools::{
    AddMemory, BuildCommunities, DeleteEpisode, GetContext, GetEntityEdge, GetEpisodeEntities,
    GetEpisodes, GetStatus, SearchFacts, SearchMemory, SearchNodes, SummarizeSaga,
};
use crate::app::auth::Access::{self, Read, Write};
use crate::app::decode::TripletInput;

/// One tool of the table.
pub struct ToolSpec {
    /// Its name (graphiti's, where graphiti has the tool).
    pub name: &'static str,
    /// What it does, for the model that calls it.
    pub description: &'static str,
    /// What the caller's token needs on the group.
    pub access: Access,
    /// Whether repeating the call with the same arguments changes nothing more.
    pub idempotent: bool,
    /// Whether it withdraws information (hint for clients that ask to confirm).
    pub destructive: bool,
    /// Its input schema, `group_id` included.
    pub schema: fn() -> Arc<JsonObject>,
}

impl ToolSpec {
    /// The tool as `tools/list` describes it.
    pub fn tool(&self) -> Tool {
        Tool::new(self.name, self.description, (self.schema)()).annotate(
            ToolAnnotations::new()
                .read_only(self.access == Read)
                .destructive(self.destructive)
                .idempotent(self.idempotent)
                .open_world(false),
        )
    }
}

/// What `group_id` is, in every schema.
const GROUP_ID_DOC: &str = "The group (tenant) id: 1-128 characters of letters, digits, `_`, `-`, \
`.`. Every call reads or writes this group only.";

/// `T`'s JSON schema (as the SDK generates it for tool inputs) with the
/// `group_id` property added and required.
pub fn input_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = (*schema_for_type::<T>()).clone();
    // The type's own name and doc are noise next to the tool's description.
    schema.remove("title");
    schema.remove("description");
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    if let Value::Object(p) = properties {
        p.insert(
            "group_id".into(),
            json!({ "type": "string", "description": GROUP_ID_DOC }),
        );
    }
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(r) = required {
        r.insert(0, json!("group_id"));
    }
    Arc::new(schema)
}

/// Every tool.
pub const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "add_memory",
        description: "Add an episode (a message, a text or a JSON document) to the group's memory. \
            It is appended durably to the log and processed asynchronously: the result is its uuid \
            and status (pending, with its log position). Poll get_status with the uuid until it is \
            processed (or dead_lettered, with the reason). An append that fails is an error, never \
            a success. Giving the same uuid (or the same content, name and reference_time) again \
            is decided once.",
        access: Write,
        idempotent: false,
        destructive: false,
        schema: input_schema::<AddMemory>,
    },
    ToolSpec {
        name: "search_memory",
        description: "Search what was said in the group: each result is one episode (a turn, a \
            text) found by its words, its meaning and the facts extracted from it, with those \
            facts (and their validity windows) and the neighbouring turns as context. The \
            default for recalling conversations; max_results counts results.",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<SearchMemory>,
    },
    ToolSpec {
        name: "get_context",
        description: "A ready-to-paste memory block for a query or the latest messages: the \
            matching facts with their validity windows, then the turns that support them, \
            within max_chars (default 4000).",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<GetContext>,
    },
    ToolSpec {
        name: "search_nodes",
        description: "Search the group's entities (people, places, things) by hybrid search \
            (BM25 + embeddings, fused), optionally ranked by graph distance from a center entity. \
            Each result has the entity's name, labels, summary and the episodes that mention it.",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<SearchNodes>,
    },
    ToolSpec {
        name: "search_memory_facts",
        description: "Search the group's facts (relations between entities, as sentences) by \
            hybrid search. By default only facts current now; as_of asks what was true in the \
            world at an instant (valid time), known_at what the system knew at an instant \
            (transaction time), include_history adds ended and invalidated facts. Each fact has \
            valid_at / invalid_at, created_at / expired_at and the episodes that assert it.",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<SearchFacts>,
    },
    ToolSpec {
        name: "get_episodes",
        description: "The group's most recent episodes (by reference time), newest first.",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<GetEpisodes>,
    },
    ToolSpec {
        name: "get_episode_entities",
        description: "What one episode produced: the entities it mentions and the facts it \
            created, restated or invalidated.",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<GetEpisodeEntities>,
    },
    ToolSpec {
        name: "get_entity_edge",
        description: "One fact (entity edge) by uuid, with its time windows, its endpoints' names \
            and its provenance.",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<GetEntityEdge>,
    },
    ToolSpec {
        name: "delete_episode",
        description: "Retract an episode: once processed, facts asserted only by it disappear and \
            others lose it from their provenance. Asynchronous like add_memory (poll get_status \
            with the returned uuid); retrying is safe.",
        access: Write,
        idempotent: true,
        destructive: true,
        schema: input_schema::<DeleteEpisode>,
    },
    ToolSpec {
        name: "add_triplet",
        description: "Add a fact given as a triple (source entity, relation, target entity), with \
            optional validity times. It becomes a fact_triple episode: no model call, processed \
            like add_memory (poll get_status with the returned uuid).",
        access: Write,
        idempotent: false,
        destructive: false,
        schema: input_schema::<TripletInput>,
    },
    ToolSpec {
        name: "build_communities",
        description: "Recompute the group's communities (clusters of related entities, with \
            summaries). Asynchronous: poll get_status with the returned uuid.",
        access: Write,
        idempotent: false,
        destructive: false,
        schema: input_schema::<BuildCommunities>,
    },
    ToolSpec {
        name: "summarize_saga",
        description: "Fold a saga's (storyline's) episodes that are newer than its summary into \
            its summary (a saga is created by the first add_memory that names it). \
            Asynchronous: poll get_status with the returned uuid.",
        access: Write,
        idempotent: false,
        destructive: false,
        schema: input_schema::<SummarizeSaga>,
    },
    ToolSpec {
        name: "get_status",
        description: "With uuid: the status of a submitted episode or command — pending, \
            processed (with counts, and projected: true once search sees it) or dead_lettered \
            (with the reason). Without: the group's processing status (commands pending, \
            processed, dead-lettered; processor and projector lag).",
        access: Read,
        idempotent: true,
        destructive: false,
        schema: input_schema::<GetStatus>,
    },
];
