//! Commands over the graph's aggregates: `communities build|list`,
//! `saga summarize|show`, and `provenance`.

use std::sync::Arc;

use anyhow::{Context, bail};
use chronicle_model::{Command, GroupId};
use serde::Serialize;
use uuid::Uuid;

use crate::commands::read::fact_line;
use crate::gateway::{Gateway, parse_group};
use crate::node::Node;
use crate::processor::ProcessorOptions;
use crate::runtime;
use crate::status::CommandStatus;
use crate::style::{bold, cyan, dim};
use chronicle_query::{CommunityView, EpisodeProducts, Query, SagaView};

fn group(id: &str) -> anyhow::Result<GroupId> {
    parse_group("--group", id).map_err(|e| anyhow::anyhow!("--group: {}", e.message))
}

fn saga_name(name: &str) -> anyhow::Result<&str> {
    crate::app::decode::saga_name("--saga", name)
        .map_err(|e| anyhow::anyhow!("the saga name {}", e.error))
}

/// Appends one command, runs the processor and projector until it is
/// decided and projected, and fails with the reason if it was dead-lettered.
pub async fn submit_and_wait(node: &Arc<Node>, command: Command) -> anyhow::Result<()> {
    let (uuid, g) = (command.uuid(), command.group_id().clone());
    let name = command.name();
    let mut running = runtime::start(node, ProcessorOptions::default());
    Gateway::new(node.clone())
        .submit(vec![command])
        .await
        .with_context(|| format!("appending the {name} command"))?;
    running.wait_caught_up(node, |_, _| {}).await?;
    running.stop().await?;
    match node.status.get(&g, uuid) {
        Some(CommandStatus::Processed { .. }) => Ok(()),
        Some(CommandStatus::DeadLettered { reason }) => bail!("{name} failed: {reason}"),
        other => bail!("{name} {uuid} was not decided (status: {other:?})"),
    }
}

#[derive(Serialize)]
struct CommunitiesJson<'a> {
    group_id: &'a GroupId,
    communities: &'a [CommunityView],
}

pub(super) fn print_communities(
    g: &GroupId,
    communities: &[CommunityView],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let out = CommunitiesJson {
            group_id: g,
            communities,
        };
        println!("{}", serde_json::to_string(&out)?);
        return Ok(());
    }
    if communities.is_empty() {
        println!(
            "{}",
            dim("no communities (entities need current facts between them)")
        );
    }
    for c in communities {
        let names: Vec<&str> = c.members.iter().map(|m| m.name.as_str()).collect();
        let shown = names.len().min(12);
        let more = if names.len() > shown {
            format!(" … (+{})", names.len() - shown)
        } else {
            String::new()
        };
        println!(
            "{} {}\n  {}\n  {}",
            bold(&c.name),
            dim(&format!("({} members, {})", c.members.len(), c.uuid)),
            c.summary,
            dim(&format!("members: {}{more}", names[..shown].join(", "))),
        );
    }
    Ok(())
}

/// `chronicle communities build`.
pub async fn communities_build(node: &Arc<Node>, group_id: &str, json: bool) -> anyhow::Result<()> {
    let g = group(group_id)?;
    submit_and_wait(
        node,
        Command::BuildCommunities {
            uuid: Uuid::new_v4(),
            group_id: g.clone(),
        },
    )
    .await?;
    let communities = Query::new(node.sources()?).communities(&g).await?;
    print_communities(&g, &communities, json)
}

/// `chronicle communities list`.
pub async fn communities_list(node: &Node, group_id: &str, json: bool) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let communities = Query::new(node.sources()?).communities(&g).await?;
    print_communities(&g, &communities, json)
}

pub(super) fn print_saga(saga: &SagaView, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(saga)?);
        return Ok(());
    }
    let watermark = saga
        .last_summarized_episode_valid_at
        .map(|t| format!("summarized up to {t}"))
        .unwrap_or_else(|| "never summarized".into());
    println!(
        "{} {}",
        bold(&saga.name),
        dim(&format!("({} episodes, {watermark})", saga.episodes.len()))
    );
    if !saga.summary.is_empty() {
        println!("  {}", saga.summary);
    }
    for e in &saga.episodes {
        println!(
            "  {} {} {}",
            dim(&e.valid_at.to_string()),
            e.name,
            dim(&e.uuid.to_string())
        );
    }
    Ok(())
}

async fn saga_or_hint(node: &Node, g: &GroupId, name: &str) -> anyhow::Result<SagaView> {
    Query::new(node.sources()?)
        .saga(g, name)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no saga named `{name}` in group {g}; a saga is created by the first episode that \
             names it (`\"saga\": \"{name}\"` in an ingest line)"
            )
        })
}

/// `chronicle saga summarize`.
pub async fn saga_summarize(
    node: &Arc<Node>,
    group_id: &str,
    saga: &str,
    json: bool,
) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let name = saga_name(saga)?;
    saga_or_hint(node, &g, name).await?;
    submit_and_wait(
        node,
        Command::SummarizeSaga {
            uuid: Uuid::new_v4(),
            group_id: g.clone(),
            saga: name.to_owned(),
        },
    )
    .await?;
    print_saga(&saga_or_hint(node, &g, name).await?, json)
}

/// `chronicle saga show`.
pub async fn saga_show(node: &Node, group_id: &str, saga: &str, json: bool) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let name = saga_name(saga)?;
    print_saga(&saga_or_hint(node, &g, name).await?, json)
}

/// `chronicle provenance`.
pub async fn provenance(
    node: &Node,
    group_id: &str,
    episodes: &[String],
    json: bool,
) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let ids = episodes
        .iter()
        .map(|e| Uuid::parse_str(e).with_context(|| format!("`{e}` is not an episode uuid")))
        .collect::<anyhow::Result<Vec<Uuid>>>()?;
    let products: EpisodeProducts = Query::new(node.sources()?).produced_by(&g, &ids).await?;
    let missing: Vec<&Uuid> = ids
        .iter()
        .filter(|u| !products.episodes.contains(u))
        .collect();
    for u in &missing {
        eprintln!(
            "note: episode {u} is not in group {g}'s graph (unknown, not processed yet, or retracted)"
        );
    }
    if json {
        println!("{}", serde_json::to_string(&products)?);
        return Ok(());
    }
    println!("{}", bold(&format!("{} entities", products.entities.len())));
    for e in &products.entities {
        println!(
            "  [{}] {} — {}",
            cyan("entity"),
            bold(&e.name),
            e.summary.as_deref().unwrap_or("")
        );
    }
    println!("{}", bold(&format!("{} facts", products.facts.len())));
    for f in &products.facts {
        println!("  {}", fact_line(f));
    }
    Ok(())
}
