//! `chronicle bench ingest`: a workload end to end through the embedded
//! log, the processor and the projector.
//!
//! With `--extractor openai` and no endpoint configured, a local
//! OpenAI-compatible server answers instantly (with the offline extractor's
//! reading of the episode, so the graph is realistic) and counts every call
//! and prompt character (cargo feature `bench-fakes`; the default build has
//! no fake in it).

use std::path::Path;
use std::time::{Duration, Instant};

use chronicle_model::{Command, GroupId};
use serde_json::json;
use uuid::Uuid;

use chronicle::config::{ExtractorKind, LogUri, Settings, StoreUri};
use chronicle::gateway::Gateway;
use chronicle::node::Node;
use chronicle::processor::ProcessorOptions;
use chronicle::runtime;

/// What a model would answer to an extraction request if it read like the
/// offline extractor: the fake endpoints' reply to `Extract` prompts.
#[cfg(feature = "bench-fakes")]
pub(crate) fn offline_extraction(
    req: &chronicle_llm::fake::ChatRequestSeen,
    ontology: &chronicle_engine::ontology::Ontology,
) -> chronicle_llm::fake::FakeReply {
    let content = req.current_episode().unwrap_or_default();
    let x = chronicle_engine::OfflineExtractor.extract_content(
        content,
        chronicle_model::EpisodeType::Message,
        ontology,
    );
    chronicle_llm::fake::FakeReply::Json(json!({
        "entities": x.entities.iter().map(|e| json!({"name": e.name, "type_id": e.entity_type_id})).collect::<Vec<_>>(),
        "facts": x.facts.iter().map(|f| json!({
            "source": f.source, "target": f.target, "relation": f.relation, "fact": f.fact,
            "valid_at": f.valid_at, "invalid_at": f.invalid_at,
        })).collect::<Vec<_>>(),
    }))
}

/// Starts a fake endpoint whose extraction answers are the offline extractor's.
#[cfg(feature = "bench-fakes")]
async fn instant_llm() -> anyhow::Result<chronicle_llm::fake::FakeOpenAi> {
    use std::sync::Arc;

    use chronicle_engine::ontology::Ontology;
    use chronicle_engine::ports::PromptKind;
    use chronicle_llm::fake::{FakeOpenAi, minimal_reply};
    let ontology = Ontology::default();
    let fake = FakeOpenAi::start().await?;
    fake.set_responder(Arc::new(move |req| match req.kind() {
        Some(PromptKind::Extract) => offline_extraction(req, &ontology),
        _ => minimal_reply(req),
    }));
    Ok(fake)
}

/// The workload again under fresh ids and group names (`-rN`), so the graph grows.
fn repeated(commands: &[Command], round: usize) -> Vec<Command> {
    commands
        .iter()
        .map(|c| match c {
            Command::AddEpisode(ep) if round > 0 => {
                let mut ep = ep.clone();
                ep.uuid = Uuid::new_v5(&ep.uuid, &round.to_le_bytes());
                ep.group_id = GroupId::new(format!("{}-r{round}", ep.group_id))
                    .expect("suffix keeps it valid");
                Command::AddEpisode(ep)
            }
            other => other.clone(),
        })
        .collect()
}

/// Runs the benchmark.
pub async fn run(settings: &Settings, workload: &Path, repeat: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = settings.clone();
    s.data = dir.path().to_path_buf();
    s.log = LogUri::Embedded;
    s.store = StoreUri::Embedded;
    #[cfg(feature = "bench-fakes")]
    let fake = match (s.extractor, &s.llm_base_url) {
        (ExtractorKind::Openai, None) => {
            let f = instant_llm().await?;
            s.llm_base_url = Some(f.base_url());
            Some(f)
        }
        _ => None,
    };
    #[cfg(not(feature = "bench-fakes"))]
    anyhow::ensure!(
        !matches!(
            (s.extractor, &s.llm_base_url),
            (ExtractorKind::Openai, None)
        ),
        "--fake-llm (the OpenAI adapter without an endpoint) needs an instant fake model: build with --features bench-fakes, or give --llm-base-url"
    );
    let node = Node::open(s).await?;
    let (commands, errors) = chronicle::commands::parse_jsonl(&fs_err::read_to_string(workload)?);
    anyhow::ensure!(
        errors.is_empty(),
        "workload has {} invalid lines, first: line {}: {}",
        errors.len(),
        errors[0].0,
        errors[0].1
    );
    let mut running = runtime::start(&node, ProcessorOptions::default());
    let gateway = Gateway::new(node.clone());
    let started = Instant::now();
    let mut rss = Vec::new();
    for round in 0..repeat.max(1) {
        for chunk in repeated(&commands, round).chunks(1000) {
            gateway.submit(chunk.to_vec()).await?;
        }
        running.wait_caught_up(&node, |_, _| {}).await?;
        rss.push(super::memory().1);
    }
    let elapsed = started.elapsed();
    running.stop().await?;

    let episodes = commands.len() * repeat.max(1);
    let mut latencies = Vec::new();
    let topic = &node.topics.graph_events;
    for p in 0..node.log.partition_count(topic).await? {
        for r in node
            .log
            .read(topic, p, 0, usize::MAX, Duration::ZERO)
            .await?
        {
            if let Ok(b) = node.events.decode(&r.payload)
                && let Some(st) = b.stats
            {
                latencies.push(Duration::from_micros(st.decide_micros));
            }
        }
    }
    let (p50, p99) = super::percentiles(&mut latencies);
    let stats = chronicle::commands::log_stats(&node, None).await?;
    let counts = node.store()?.counts(None).await?;
    let calls: u64 = stats.llm_calls.values().sum();
    #[cfg(feature = "bench-fakes")]
    let (http_calls, prompt_chars) = fake
        .as_ref()
        .map(|f| {
            let st = f.stats();
            (Some(st.chat_requests), Some(st.chat_prompt_chars))
        })
        .unwrap_or((None, None));
    #[cfg(not(feature = "bench-fakes"))]
    let (http_calls, prompt_chars): (Option<usize>, Option<usize>) = (None, None);
    let per = |x: usize| x as f64 / episodes as f64;
    println!(
        "{}",
        json!({
            "bench": "ingest",
            "workload": workload.display().to_string(),
            "extractor": node.decider()?.extractor().describe(),
            "embedder": node.decider()?.embedder().describe(),
            "episodes": episodes,
            "seconds": elapsed.as_secs_f64(),
            "episodes_per_s": episodes as f64 / elapsed.as_secs_f64(),
            "decide_p50_ms": p50,
            "decide_p99_ms": p99,
            "llm_calls_per_episode": calls as f64 / episodes as f64,
            "llm_calls_by_kind": stats.llm_calls,
            "llm_http_requests_per_episode": http_calls.map(per),
            "prompt_chars_per_episode": prompt_chars.map(per),
            "embedded_texts_per_episode": stats.embeddings as f64 / episodes as f64,
            "resolutions": stats.resolutions,
            "entities": counts.entities,
            "facts": counts.facts,
            "facts_invalidated": counts.facts_invalidated,
            "dead_lettered": stats.dead_lettered,
            "peak_rss_bytes": super::memory().0,
            "rss_after_each_round_bytes": rss,
        })
    );
    Ok(())
}
