//! `chronicle mcp`: MCP over stdio for a client that launches chronicle
//! (Claude Desktop, an IDE, an agent framework). Embedded like `serve`: the
//! processor and projector run in this process, so what `add_memory`
//! appends is processed here. Stdout carries only the protocol; everything
//! else (logs, notices) goes to stderr.
//!
//! With `--auth FILE`, the caller's token (`CHRONICLE_TOKEN` or `--token`)
//! must be in the file and fixes the caller's groups and access for the
//! whole connection; a missing or unknown token stops the command before
//! it serves anything. Without `--auth` the caller is single-user and
//! unrestricted, and the command says so on stderr.

use std::path::Path;

use anyhow::Context;
use rmcp::ServiceExt;
use tokio::sync::watch;

use super::{Caller, McpServer};
use crate::app::auth::{Auth, GroupPattern};
use crate::config::Settings;
use crate::node::Node;
use crate::processor::ProcessorOptions;
use crate::runtime::{self, RoleStopped};

/// The caller `--auth` and the token make.
pub fn caller(auth: Option<&Path>, token: Option<&str>) -> anyhow::Result<Caller> {
    match (auth, token) {
        (Some(path), Some(token)) => {
            let tokens = Auth::load(path)?;
            let grant = tokens.token(token.trim()).map_err(|_| {
                anyhow::anyhow!(
                    "the MCP caller's token (CHRONICLE_TOKEN or --token) is not in {}",
                    path.display()
                )
            })?;
            let groups: Vec<String> = grant
                .groups
                .iter()
                .map(|g| match g {
                    GroupPattern::Exact(id) => id.to_string(),
                    GroupPattern::Prefix(p) => format!("{p}*"),
                })
                .collect();
            eprintln!(
                "chronicle mcp: caller `{}` may {} groups {}",
                grant.name,
                grant.access.as_str(),
                groups.join(", ")
            );
            Ok(Caller::Token(grant.clone()))
        }
        (Some(path), None) => anyhow::bail!(
            "--auth {} needs the MCP caller's token: set CHRONICLE_TOKEN (or pass --token)",
            path.display()
        ),
        (None, token) => {
            if token.is_some() {
                eprintln!(
                    "chronicle mcp: a token was given without --auth; it is ignored (pass \
                     --auth FILE to scope the caller)"
                );
            }
            eprintln!(
                "chronicle mcp: single-user and UNRESTRICTED (no --auth): the caller may read \
                 and write every group"
            );
            Ok(Caller::Unrestricted)
        }
    }
}

/// Serves MCP on stdin/stdout until the client closes the connection or
/// `shutdown` turns true; the processor and projector then finish their
/// in-flight work. Fails if a role stops on its own.
pub async fn serve(
    settings: Settings,
    caller: Caller,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let node = Node::open(settings).await?;
    let running = runtime::start(&node, ProcessorOptions::default());
    let handshake = McpServer::for_caller(node.clone(), caller).serve(rmcp::transport::stdio());
    let service = tokio::select! {
        s = handshake => s.context("the MCP handshake on stdio failed")?,
        _ = shutdown.wait_for(|stop| *stop) => return running.stop().await,
    };
    tracing::info!(data = %node.settings.data.display(), "serving MCP on stdio");
    let cancel = service.cancellation_token();
    let session = async {
        tokio::select! {
            ended = service.waiting() => {
                let reason = ended.context("the MCP session failed")?;
                tracing::info!(?reason, "the MCP client closed the session");
                anyhow::Ok(())
            }
            _ = shutdown.wait_for(|stop| *stop) => Ok(()),
        }
    };
    let ended = running.supervise(session, || false).await;
    cancel.cancel();
    let stopped = running.stop().await;
    match ended {
        Ok(session) => session.and(stopped),
        Err(_) => RoleStopped::outcome(stopped, "MCP server"),
    }
}
