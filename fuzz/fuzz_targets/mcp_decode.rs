//! The MCP decoders on any bytes: the JSON-RPC message, and every tool's
//! arguments, decode or give a 4xx naming the field, never a panic or a 5xx.
#![no_main]

use chronicle::mcp::tools::{TOOLS, decode_call};
use chronicle_model::Timestamp;
use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::Value;

fn tool_call(name: &str, args: serde_json::Map<String, Value>) {
    let now = Timestamp::from_micros(1_733_000_000_000_000).expect("valid");
    if let Err(e) = decode_call(name, args, now) {
        assert!(
            e.status.is_client_error(),
            "{name}: {}: {}",
            e.status,
            e.error
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((which, body)) = data.split_first() else {
        return;
    };
    // A whole message, as a client sends it.
    if let Ok(JsonRpcMessage::Request(request)) =
        serde_json::from_slice::<ClientJsonRpcMessage>(body)
        && let ClientRequest::CallToolRequest(call) = request.request
    {
        tool_call(&call.params.name, call.params.arguments.unwrap_or_default());
    }
    // Arguments for a tool of the table (or an unknown name).
    if let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(body) {
        let name = TOOLS
            .get(usize::from(*which) % (TOOLS.len() + 1))
            .map_or("no_such_tool", |t| t.name);
        tool_call(name, args);
    }
});
