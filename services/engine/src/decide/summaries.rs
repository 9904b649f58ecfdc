//! Stage 6: entity summaries from the episode's new facts only —
//! concatenated while short, summarized by the model in one call beyond.

use std::collections::BTreeMap;

use chronicle_model::{DecisionStats, Entity, Fact};
use uuid::Uuid;

use super::entities::{EntityPatch, ResolvedEntities};
use super::{DecideError, Decider};
use crate::ports::{PromptKind, SummaryItem, SummaryKind, SummaryRequest};
use crate::state::GroupState;

impl Decider {
    /// Stage 6 for the endpoints of `created`, written into `entities`.
    pub(super) async fn summarize_entities(
        &self,
        state: &GroupState,
        created: &[Fact],
        entities: &mut ResolvedEntities,
        stats: &mut DecisionStats,
    ) -> Result<(), DecideError> {
        let mut material: BTreeMap<Uuid, Vec<String>> = BTreeMap::new();
        for f in created {
            for end in [f.source_node_uuid, f.target_node_uuid] {
                material.entry(end).or_default().push(f.fact.clone());
            }
        }
        let mut to_summarize: Vec<(Uuid, SummaryItem)> = Vec::new();
        for (uuid, new_material) in material {
            let (name, current) = match entities.created.iter().find(|x| x.uuid == uuid) {
                Some(x) => (x.name.clone(), x.summary.clone()),
                None => match state.get_entity(&uuid) {
                    Some(x) => (x.name.clone(), x.summary.clone()),
                    None => continue,
                },
            };
            let concatenated = concat_summary(&current, &new_material);
            if concatenated.chars().count() <= self.config.summary_max_chars {
                set_summary(
                    &mut entities.created,
                    &mut entities.updates,
                    uuid,
                    concatenated,
                );
            } else {
                to_summarize.push((
                    uuid,
                    SummaryItem {
                        subject: name,
                        current,
                        new_material,
                    },
                ));
            }
        }
        if to_summarize.is_empty() {
            return Ok(());
        }
        let request = SummaryRequest {
            kind: SummaryKind::Entity,
            max_chars: self.config.summary_max_chars,
            items: to_summarize.iter().map(|(_, item)| item.clone()).collect(),
        };
        let summaries = self.extractor.summarize(&request).await?;
        self.count_call(stats, PromptKind::SummarizeEntities);
        for ((uuid, _), summary) in to_summarize.into_iter().zip(summaries) {
            set_summary(&mut entities.created, &mut entities.updates, uuid, summary);
        }
        Ok(())
    }
}

fn set_summary(
    new_entities: &mut [Entity],
    updates: &mut BTreeMap<Uuid, EntityPatch>,
    uuid: Uuid,
    summary: String,
) {
    match new_entities.iter_mut().find(|x| x.uuid == uuid) {
        Some(x) => x.summary = summary,
        None => updates.entry(uuid).or_default().summary = Some(summary),
    }
}

fn concat_summary(current: &str, new_material: &[String]) -> String {
    let mut out = current.trim().to_owned();
    for m in new_material {
        let sentence = m.trim().trim_end_matches('.');
        if sentence.is_empty() || out.contains(sentence) {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(sentence);
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concatenated_summaries_skip_repeats() {
        assert_eq!(
            concat_summary(
                "Alice lives in Beijing.",
                &[
                    "Alice moved to Shanghai".into(),
                    "Alice lives in Beijing".into()
                ]
            ),
            "Alice lives in Beijing. Alice moved to Shanghai."
        );
    }
}
