//! Driving chronicle's MCP server with the SDK's own client (rmcp): calls
//! that return the tool's JSON, errors as (code, HTTP-equivalent status,
//! field), and waiting for a command to be processed and searchable.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ErrorData, ServiceError};
use serde_json::Value;

/// A connected MCP client (the unit client handler: no sampling, no roots).
pub type Client = RunningService<RoleClient, ()>;

/// JSON-RPC codes the server uses.
pub const INVALID_PARAMS: i32 = -32602;
/// The caller's token does not allow the call.
pub const FORBIDDEN: i32 = -32003;
/// No such record in the group.
pub const NOT_FOUND: i32 = -32002;

/// An MCP error, taken apart.
#[derive(Debug)]
pub struct McpFailure {
    /// JSON-RPC code.
    pub code: i32,
    /// The HTTP-equivalent status in `data`.
    pub status: u64,
    /// The field at fault in `data`, when one is.
    pub field: Option<String>,
    /// The message.
    pub message: String,
}

fn failure(e: ErrorData) -> McpFailure {
    let data = e.data.unwrap_or(Value::Null);
    McpFailure {
        code: e.code.0,
        status: data["status"].as_u64().unwrap_or(0),
        field: data["field"].as_str().map(str::to_owned),
        message: e.message.into_owned(),
    }
}

/// Calls a tool; `Ok` is the JSON object of its single text content.
pub async fn try_call(client: &Client, tool: &str, args: Value) -> Result<Value, McpFailure> {
    let Value::Object(arguments) = args else {
        panic!("tool arguments must be an object: {args}");
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    match client.peer().call_tool(params).await {
        Ok(result) => {
            assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
            assert_eq!(result.content.len(), 1, "{tool}: one content block");
            let ContentBlock::Text(text) = &result.content[0] else {
                panic!("{tool}: not text content: {result:?}");
            };
            Ok(serde_json::from_str(&text.text)
                .unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {}", text.text)))
        }
        Err(ServiceError::McpError(e)) => Err(failure(e)),
        Err(e) => panic!("{tool}: transport failure: {e}"),
    }
}

/// Calls a tool that must succeed.
pub async fn call(client: &Client, tool: &str, args: Value) -> Value {
    try_call(client, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool} failed: {e:?}"))
}

/// Calls a tool that must fail.
pub async fn fail(client: &Client, tool: &str, args: Value) -> McpFailure {
    match try_call(client, tool, args).await {
        Ok(v) => panic!("{tool} succeeded but should have failed: {v}"),
        Err(e) => e,
    }
}

/// Polls `get_status` until the command is decided (and, when processed,
/// projected: search sees it); returns the final status object.
pub async fn settled(client: &Client, group: &str, uuid: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = call(
            client,
            "get_status",
            serde_json::json!({"group_id": group, "uuid": uuid}),
        )
        .await;
        let done = match s["status"].as_str() {
            Some("processed") => s["projected"] == true,
            Some("dead_lettered") => true,
            Some("pending") => false,
            other => panic!("unexpected status {other:?}: {s}"),
        };
        if done {
            return s;
        }
        assert!(Instant::now() < deadline, "{uuid} not settled in time: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The tokens file the scoped tests use: acme read-write, globex
/// read-write, and a read-only token on acme.
pub const TOKENS: &str = r#"
    [[tokens]]
    name = "acme-agent"
    secret = "acme-secret-0123456789"
    groups = ["acme"]
    access = "write"

    [[tokens]]
    name = "globex-agent"
    secret = "globex-secret-0123456789"
    groups = ["globex"]
    access = "write"

    [[tokens]]
    name = "acme-reader"
    secret = "acme-reader-0123456789"
    groups = ["acme"]
    access = "read"
"#;
/// acme, read-write.
pub const ACME: &str = "acme-secret-0123456789";
/// globex, read-write.
pub const GLOBEX: &str = "globex-secret-0123456789";
/// acme, read-only.
pub const ACME_READER: &str = "acme-reader-0123456789";

/// Checks that every tool of `group` is refused to a caller scoped
/// elsewhere, with the forbidden error and nothing of the group's data.
pub async fn every_tool_forbidden(client: &Client, group: &str, some_uuid: &str) {
    let calls = [
        (
            "add_memory",
            serde_json::json!({"episode_body": "Mallory: I own acme now."}),
        ),
        ("search_nodes", serde_json::json!({"query": "Ada"})),
        ("search_memory_facts", serde_json::json!({"query": "Ada"})),
        ("get_episodes", serde_json::json!({})),
        (
            "get_episode_entities",
            serde_json::json!({"episode_uuid": some_uuid}),
        ),
        ("get_entity_edge", serde_json::json!({"uuid": some_uuid})),
        ("delete_episode", serde_json::json!({"uuid": some_uuid})),
        (
            "add_triplet",
            serde_json::json!({"source": "A", "relation": "R", "target": "B"}),
        ),
        ("build_communities", serde_json::json!({})),
        ("summarize_saga", serde_json::json!({"saga": "s"})),
        ("get_status", serde_json::json!({"uuid": some_uuid})),
        ("get_status", serde_json::json!({})),
    ];
    for (tool, mut args) in calls {
        args["group_id"] = Value::String(group.to_owned());
        let e = fail(client, tool, args).await;
        assert_eq!(e.code, FORBIDDEN, "{tool}: {e:?}");
        assert_eq!(e.status, 403, "{tool}: {e:?}");
        assert_eq!(e.field.as_deref(), Some("group_id"), "{tool}: {e:?}");
        assert!(
            e.message.contains("not scoped to this group"),
            "{tool}: {e:?}"
        );
    }
}
