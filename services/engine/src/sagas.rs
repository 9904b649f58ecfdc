//! Saga summaries: graphiti's `summarize_saga`, with its watermark.
//!
//! A saga's summary absorbs only the saga's episodes whose reference time is
//! after `last_summarized_episode_valid_at`, oldest first, and the watermark
//! advances to the newest one absorbed; summarizing again with nothing new
//! decides nothing. (As in graphiti, an episode that arrives late with a
//! reference time at or before the watermark is not absorbed.) The new
//! episodes are folded into the summary in bounded chunks — one model call
//! per chunk — so a long backlog never becomes one unbounded prompt.
//!
//! A model reads the episodes themselves; offline, the summary is extractive
//! over the facts each episode asserted (third-person sentences), falling
//! back to the episode's content when it asserted none.

use chronicle_model::{DecisionStats, Episode, EventKind};

use crate::decide::{DecideError, Decider};
use crate::ports::{LlmError, PromptKind, SummaryItem, SummaryKind, SummaryRequest};
use crate::state::GroupState;

/// Episodes folded into a saga's summary per model call.
const EPISODES_PER_CALL: usize = 16;

impl Decider {
    /// `SummarizeSaga`: a `SagaSummarized` event when the saga has episodes
    /// newer than its watermark; nothing otherwise (also for an unknown saga).
    pub(crate) async fn summarize_saga(
        &self,
        state: &GroupState,
        name: &str,
        stats: &mut DecisionStats,
    ) -> Result<Vec<EventKind>, DecideError> {
        let Some(saga) = state.saga_by_name(name) else {
            return Ok(Vec::new());
        };
        let watermark = saga.last_summarized_episode_valid_at;
        let mut fresh: Vec<&Episode> = saga
            .episodes
            .iter()
            .filter_map(|u| state.get_episode(u))
            .filter(|e| watermark.is_none_or(|w| e.valid_at > w))
            .collect();
        fresh.sort_by_key(|e| (e.valid_at, e.uuid));
        let Some(newest) = fresh.last().map(|e| e.valid_at) else {
            return Ok(Vec::new());
        };
        let model = self.extractor().is_model();
        let mut summary = saga.summary.clone();
        for chunk in fresh.chunks(EPISODES_PER_CALL) {
            let new_material = chunk
                .iter()
                .flat_map(|e| material(state, e, model))
                .collect();
            let request = SummaryRequest {
                kind: SummaryKind::Saga,
                max_chars: self.config().saga_summary_max_chars,
                items: vec![SummaryItem {
                    subject: saga.name.clone(),
                    current: summary,
                    new_material,
                }],
            };
            let mut answers = self.extractor().summarize(&request).await?;
            self.count_call(stats, PromptKind::SummarizeSaga);
            if answers.len() != 1 {
                return Err(LlmError::InvalidOutput {
                    kind: PromptKind::SummarizeSaga.as_str(),
                    reason: format!("{} summaries for one saga", answers.len()),
                }
                .into());
            }
            summary = answers.remove(0);
        }
        Ok(vec![EventKind::SagaSummarized {
            saga_uuid: saga.uuid,
            summary,
            last_summarized_episode_valid_at: newest,
        }])
    }
}

/// What one episode contributes to its saga's summary.
fn material(state: &GroupState, e: &Episode, model: bool) -> Vec<String> {
    if !model {
        let asserted: Vec<String> = e
            .entity_edges
            .iter()
            .filter_map(|u| state.get_fact(u))
            .filter(|f| f.episodes.contains(&e.uuid))
            .map(|f| f.fact.clone())
            .collect();
        if !asserted.is_empty() {
            return asserted;
        }
    }
    let content = e.content.split_whitespace().collect::<Vec<_>>().join(" ");
    if model {
        vec![format!("[{}] {content}", e.valid_at.to_rfc3339())]
    } else {
        vec![content]
    }
}
