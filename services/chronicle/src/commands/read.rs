//! Read commands: facts, search, timeline, stats, status.

use std::collections::HashSet;

use anyhow::Context;
use chronicle_engine::search::SearchFilters;
use chronicle_model::{EventBatch, GroupId, Timestamp};
use serde::Serialize;
use uuid::Uuid;

use crate::cli::TimeArgs;
use crate::gateway::{parse_group, parse_time};
use crate::node::Node;
use crate::style::{bold, cyan, dim, green, yellow};
use chronicle_query::{MemoryContext, Query, QueryError, ResultItem, SearchRequest, SearchResults};
use chronicle_store::{StateStore, Totals};

/// The `--group` argument, checked like every group id.
pub fn group(id: &str) -> anyhow::Result<GroupId> {
    parse_group("--group", id).map_err(|e| anyhow::anyhow!("--group: {}", e.message))
}

fn time(flag: &str, value: &Option<String>) -> anyhow::Result<Option<Timestamp>> {
    value
        .as_deref()
        .map(|v| parse_time(flag, v).map_err(|e| anyhow::anyhow!("{flag}: {}", e.message)))
        .transpose()
}

/// The filters of `--as-of`, `--known-at` and `--include-history`.
pub fn time_filters(t: &TimeArgs) -> anyhow::Result<SearchFilters> {
    Ok(SearchFilters {
        as_of: time("--as-of", &t.as_of)?,
        known_at: time("--known-at", &t.known_at)?,
        include_history: t.include_history,
        ..Default::default()
    })
}

fn short(t: Option<Timestamp>) -> String {
    t.map(|t| t.to_rfc3339()).unwrap_or_else(|| "…".into())
}

/// One fact as a line of text.
pub fn fact_line(f: &ResultItem) -> String {
    let current = f.invalid_at.is_none() && f.expired_at.is_none();
    let mark = if current {
        green("current")
    } else {
        yellow("history")
    };
    let provenance: Vec<&str> = f.episodes.iter().map(|p| p.name.as_str()).collect();
    format!(
        "[{mark}] {} {} {}  {}\n          valid {} → {}   known {} → {}   {}",
        bold(f.source.as_deref().unwrap_or("?")),
        f.name,
        bold(f.target.as_deref().unwrap_or("?")),
        dim(&format!("\"{}\"", f.fact.as_deref().unwrap_or(""))),
        short(f.valid_at),
        short(f.invalid_at),
        f.created_at,
        short(f.expired_at),
        dim(&format!("from: {}", provenance.join(", "))),
    )
}

#[derive(Serialize)]
struct FactsJson<'a> {
    facts: &'a [ResultItem],
}

/// An unknown entity name, with how to find the right one.
fn unknown_entity_hint(e: QueryError, g: &GroupId) -> anyhow::Error {
    match e {
        QueryError::UnknownEntity(name) => anyhow::anyhow!(
            "no entity named `{name}` in group {g}; names match exactly (case and spacing \
             aside): `chronicle search --group {g} --recipe NODE_HYBRID_SEARCH_RRF \"{name}\"` \
             lists similar ones"
        ),
        e => e.into(),
    }
}

/// Says on stderr when the data directory holds no episodes at all: an
/// empty answer then more likely means a wrong `--data` than no match.
async fn hint_if_empty(node: &Node) {
    if let Ok(ends) = node.end_offsets(&node.topics.episodes).await
        && ends.values().all(|e| *e == 0)
    {
        eprintln!(
            "note: {} holds no episodes; ingest some with `chronicle --data {} ingest FILE.jsonl`, \
             or point --data (or CHRONICLE_DATA) at an existing data directory",
            node.settings.data.display(),
            node.settings.data.display()
        );
    }
}

/// `chronicle facts`.
pub async fn facts(
    node: &Node,
    group_id: &str,
    entity: Option<&str>,
    t: &TimeArgs,
    json: bool,
) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let filters = time_filters(t)?;
    let facts = Query::new(node.sources()?)
        .facts(&g, entity, &filters)
        .await
        .map_err(|e| unknown_entity_hint(e, &g))?;
    if facts.is_empty() {
        hint_if_empty(node).await;
    }
    print_facts(&facts, json)
}

/// Prints facts as `chronicle facts` does (JSON or lines).
pub fn print_facts(facts: &[ResultItem], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&FactsJson { facts })?);
    } else if facts.is_empty() {
        println!("{}", dim("no facts match"));
    } else {
        for f in facts {
            println!("{}", fact_line(f));
        }
    }
    Ok(())
}

/// Arguments of `chronicle search`.
pub struct SearchArgs<'a> {
    /// Group.
    pub group: &'a str,
    /// Query text.
    pub query: &'a str,
    /// Recipe name.
    pub recipe: &'a str,
    /// Center entity name.
    pub center: Option<&'a str>,
    /// Results per scope.
    pub limit: usize,
    /// Relation filter.
    pub edge_types: Vec<String>,
    /// Label filter.
    pub labels: Vec<String>,
    /// Time options.
    pub time: &'a TimeArgs,
}

/// `chronicle search`.
pub async fn search(node: &Node, a: SearchArgs<'_>, json: bool) -> anyhow::Result<()> {
    let g = group(a.group)?;
    let query = Query::new(node.sources()?);
    let mut request = SearchRequest::recipe(a.query, a.recipe, a.limit)?;
    request.filters = SearchFilters {
        edge_types: (!a.edge_types.is_empty()).then_some(a.edge_types),
        node_labels: (!a.labels.is_empty()).then_some(a.labels),
        ..time_filters(a.time)?
    };
    if let Some(name) = a.center {
        request.center = Some(
            query
                .entity_named(&g, name)
                .await
                .map_err(|e| unknown_entity_hint(e, &g))
                .context("--center")?
                .uuid,
        );
    }
    let results = query.search(&g, &request).await?;
    if results.results.is_empty() {
        hint_if_empty(node).await;
    }
    print_results(&results, json)
}

/// Prints results as `chronicle search` does (JSON or lines).
pub fn print_results(results: &SearchResults, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(results)?);
        return Ok(());
    }
    if results.results.is_empty() {
        println!("{}", dim("no results"));
    }
    for r in &results.results {
        let score = dim(&format!("{:.3}", r.score));
        match r.kind {
            chronicle_engine::search::Scope::Fact => println!("{score} {}", fact_line(r)),
            chronicle_engine::search::Scope::Entity
            | chronicle_engine::search::Scope::Community => println!(
                "{score} [{}] {} — {}",
                cyan(r.kind.as_str()),
                bold(&r.name),
                r.summary.as_deref().unwrap_or("")
            ),
            chronicle_engine::search::Scope::Episode => {
                println!(
                    "{score} [{}] {} ({}) {}",
                    cyan("episode"),
                    bold(&r.name),
                    short(r.valid_at),
                    r.content.as_deref().unwrap_or("")
                );
                for f in &r.facts {
                    println!("      {} {}", dim("fact"), f.fact);
                }
                for t in r.context.iter().filter(|t| t.uuid != r.uuid) {
                    println!("      {} {} {}", dim("turn"), t.name, t.content);
                }
            }
        }
    }
    Ok(())
}

/// `chronicle context`: the memory block an agent would paste.
pub async fn context(
    node: &Node,
    group_id: &str,
    query: &str,
    max_chars: usize,
    time: &TimeArgs,
    json: bool,
) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let spec = crate::app::decode::context_spec(
        Some(query.to_owned()),
        None,
        Some(max_chars),
        time_filters(time)?.as_of,
    )
    .map_err(|e| {
        let flag = e
            .field
            .as_deref()
            .map(|f| format!("--{}", f.replace('_', "-")));
        anyhow::anyhow!("{}: {}", flag.unwrap_or_else(|| "query".into()), e.error)
    })?;
    let block = Query::new(node.sources()?)
        .context(&g, &spec.query, spec.max_chars, spec.as_of)
        .await?;
    print_context(&block, json)
}

/// Prints a context block as `chronicle context` does.
pub fn print_context(block: &MemoryContext, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(block)?);
    } else {
        print!("{}", block.context);
    }
    Ok(())
}

/// `chronicle timeline`.
pub async fn timeline(node: &Node, group_id: &str, entity: &str, json: bool) -> anyhow::Result<()> {
    let g = group(group_id)?;
    let (e, facts) = Query::new(node.sources()?)
        .timeline(&g, entity)
        .await
        .map_err(|e| unknown_entity_hint(e, &g))?;
    print_timeline(e, &facts, json)
}

/// Prints an entity's timeline as `chronicle timeline` does.
pub fn print_timeline(
    mut e: chronicle_model::Entity,
    facts: &[ResultItem],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        #[derive(Serialize)]
        struct Timeline<'a> {
            entity: &'a chronicle_model::Entity,
            facts: &'a [ResultItem],
        }
        e.name_embedding = None;
        println!(
            "{}",
            serde_json::to_string(&Timeline { entity: &e, facts })?
        );
        return Ok(());
    }
    println!(
        "{} {}",
        bold(&e.name),
        dim(&format!("({}) {}", e.entity_type(), e.summary))
    );
    for f in facts {
        println!("  {}", fact_line(f));
    }
    Ok(())
}

/// Hands every decision on the graph-events log (of one group, or all) to
/// `visit`; undecodable records are skipped (they are the processor's to
/// report).
pub async fn for_each_decision(
    node: &Node,
    group: Option<&GroupId>,
    mut visit: impl FnMut(EventBatch) + Send,
) -> anyhow::Result<()> {
    let topic = &node.topics.graph_events;
    for p in 0..node.log.partition_count(topic).await? {
        chronicle_log::scan(node.log.as_ref(), topic, p, 0, |r| {
            if let Ok(batch) = node.events.decode(&r.payload)
                && group.is_none_or(|g| g == &batch.group_id)
            {
                visit(batch);
            }
        })
        .await?;
    }
    Ok(())
}

/// What deciding cost, read off the graph-events log itself (for one
/// group, or all): the audit of the store's running totals, whose sizes
/// it leaves at zero. Reads the whole log; `stats` reads the totals.
pub async fn log_stats(node: &Node, group: Option<&GroupId>) -> anyhow::Result<Totals> {
    let mut t = Totals::default();
    for_each_decision(node, group, |batch| t.record(&batch)).await?;
    Ok(t)
}

/// `chronicle stats`: the store's running totals (one row a group, so
/// it answers in milliseconds whatever the history).
pub async fn stats(node: &Node, group_id: Option<&str>, json: bool) -> anyhow::Result<()> {
    let g = group_id.map(group).transpose()?;
    let out = node.store()?.totals(g.as_ref()).await?;
    if out.counts.episodes == 0 {
        hint_if_empty(node).await;
    }
    print_stats(&out, json)
}

/// Prints totals as `chronicle stats` does.
pub fn print_stats(out: &Totals, json: bool) -> anyhow::Result<()> {
    let c = &out.counts;
    if json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!(
            "{} episodes, {} entities, {} facts ({} current, {} history), {} events, {} dead-lettered",
            c.episodes,
            c.entities,
            c.facts,
            c.facts_valid,
            c.facts_invalidated,
            out.events,
            out.dead_lettered
        );
        println!(
            "llm calls: {:?}   resolutions: {:?}",
            out.llm_calls, out.resolutions
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct PartitionStatus {
    partition: u32,
    episodes_end: u64,
    processor_committed: Option<u64>,
    processor_lag: u64,
    graph_events_end: u64,
    projected: u64,
    projector_lag: u64,
}

#[derive(Serialize)]
struct StatusJson {
    /// The group asked about, if any.
    group: Option<String>,
    partitions: Vec<PartitionStatus>,
    /// Commands on the episodes log (of the group, with --group) not decided yet.
    pending: u64,
    dead_lettered: u64,
    decisions: u64,
}

/// Which commands are decided. The processor's state store knows every
/// decision below its checkpoints, the graph-events tail after them the
/// rest, so only the tail is read; without a state store to open (none yet,
/// or a processor holds it) the whole log is.
enum DecidedSet {
    Stored {
        state: StateStore,
        tail: HashSet<(GroupId, Uuid)>,
    },
    Scanned(HashSet<(GroupId, Uuid)>),
}

impl DecidedSet {
    async fn read(node: &Node, group: Option<&GroupId>) -> anyhow::Result<Self> {
        let path = node.settings.path("processor-state.redb");
        let state = match path.exists().then(|| StateStore::open(&path)) {
            Some(Ok(state)) => state,
            _ => {
                let mut all = HashSet::new();
                for_each_decision(node, group, |batch| {
                    all.insert((batch.group_id, batch.command_uuid));
                })
                .await?;
                return Ok(DecidedSet::Scanned(all));
            }
        };
        let topic = &node.topics.graph_events;
        let episodes = node.log.partition_count(&node.topics.episodes).await?;
        let mut tail = HashSet::new();
        for q in 0..node.log.partition_count(topic).await? {
            let mut from = u64::MAX;
            for p in 0..episodes {
                from = from.min(state.checkpoint(p, q)?);
            }
            chronicle_log::scan(node.log.as_ref(), topic, q, from, |r| {
                if let Ok(batch) = node.events.decode(&r.payload)
                    && group.is_none_or(|g| g == &batch.group_id)
                {
                    tail.insert((batch.group_id, batch.command_uuid));
                }
            })
            .await?;
        }
        Ok(DecidedSet::Stored { state, tail })
    }

    /// How many of `commands` are not decided: one state-store read for all
    /// of them that the tail does not answer.
    fn count_undecided(&self, commands: &[(GroupId, Uuid)]) -> anyhow::Result<u64> {
        let (known, state) = match self {
            DecidedSet::Scanned(all) => (all, None),
            DecidedSet::Stored { state, tail } => (tail, Some(state)),
        };
        let unknown: Vec<(&GroupId, Uuid)> = commands
            .iter()
            .filter(|c| !known.contains(*c))
            .map(|(g, c)| (g, *c))
            .collect();
        let stored = match state {
            Some(state) => state.decided(&unknown)?.into_iter().filter(|d| *d).count(),
            None => 0,
        };
        Ok((unknown.len() - stored) as u64)
    }
}

/// Commands in `[from, end)` of an episodes partition (of one group, or
/// all) that are not decided.
async fn undecided(
    node: &Node,
    partition: u32,
    from: u64,
    group: Option<&GroupId>,
    decided: &DecidedSet,
) -> anyhow::Result<u64> {
    let mut commands = Vec::new();
    chronicle_log::scan(
        node.log.as_ref(),
        &node.topics.episodes,
        partition,
        from,
        |r| {
            if group.is_some_and(|g| g.as_str().as_bytes() != r.key.as_slice()) {
                return;
            }
            // An undecodable record is dead-lettered, not pending.
            if let Ok(c) = node.commands.decode(&r.payload) {
                commands.push((c.group_id().clone(), c.uuid()));
            }
        },
    )
    .await?;
    decided.count_undecided(&commands)
}

/// Prints a running server's status of one group.
pub fn print_group_status(s: &crate::app::GroupStatus, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(s)?);
    } else {
        println!(
            "group {}: {} pending, {} processed, {} dead-lettered (recent commands)\n  \
             processor lag {}   projector lag {}",
            s.group_id, s.pending, s.processed, s.dead_lettered, s.processor_lag, s.projector_lag
        );
    }
    Ok(())
}

/// `chronicle status`: lag per partition, and the commands pending and
/// dead-lettered (of one group with `--group`).
pub async fn status(node: &Node, group_id: Option<&str>, json: bool) -> anyhow::Result<()> {
    let g = group_id.map(group).transpose()?;
    let positions = node.store()?.positions().await?;
    let count = node.log.partition_count(&node.topics.episodes).await?;
    let only = g
        .as_ref()
        .map(|g| chronicle_log::partition_for(g.as_str().as_bytes(), count));
    let decided = DecidedSet::read(node, g.as_ref()).await?;
    let mut partitions = Vec::new();
    let mut pending = 0;
    for p in (0..count).filter(|p| only.is_none_or(|o| o == *p)) {
        let end = node.log.end_offset(&node.topics.episodes, p).await?;
        let committed = node
            .log
            .committed_offset("chronicle-processor", &node.topics.episodes, p)
            .await?;
        let ge_end = node.log.end_offset(&node.topics.graph_events, p).await?;
        let projected = positions.get(&p).copied().unwrap_or(0);
        let lag = end.saturating_sub(committed.unwrap_or(0));
        pending += undecided(node, p, committed.unwrap_or(0), g.as_ref(), &decided).await?;
        partitions.push(PartitionStatus {
            partition: p,
            episodes_end: end,
            processor_committed: committed,
            processor_lag: lag,
            graph_events_end: ge_end,
            projected,
            projector_lag: ge_end.saturating_sub(projected),
        });
    }
    // Decisions as projected (the store's totals, not a log scan).
    let l = node.store()?.totals(g.as_ref()).await?;
    let out = StatusJson {
        group: g.as_ref().map(|g| g.to_string()),
        partitions,
        pending,
        dead_lettered: l.dead_lettered,
        decisions: l.decisions,
    };
    if json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        let whose = g
            .as_ref()
            .map(|g| format!("group {g}: "))
            .unwrap_or_default();
        println!(
            "{whose}{} decisions, {} dead-lettered, {} pending",
            out.decisions, out.dead_lettered, out.pending
        );
        for p in &out.partitions {
            println!(
                "  partition {:>3}: processor lag {:>6}   projector lag {:>6}",
                p.partition, p.processor_lag, p.projector_lag
            );
        }
        if out.pending > 0 {
            println!(
                "{}",
                dim(
                    "pending commands are decided while a processor runs (`chronicle serve`, `chronicle ingest`, or `chronicle processor`)"
                )
            );
        }
    }
    Ok(())
}
