//! A group's running totals, kept by the store as it applies records, so
//! `stats` reads one row per group instead of the group's rows or the log.
//!
//! Each store calls [`Totals::record`] once per record it applies and the
//! row counters with what a put or remove found before and leaves after;
//! the totals are written in the same commit as the rows and the position,
//! so a record applied twice (skipped by its position) counts once.

use std::collections::BTreeMap;

use chronicle_model::EventBatch;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Counts;

/// What a group holds and what deciding its commands cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Totals {
    /// The projection's sizes.
    #[serde(flatten)]
    pub counts: Counts,
    /// Decisions applied (graph-events records, dead letters included).
    pub decisions: u64,
    /// Events those decisions carried.
    pub events: u64,
    /// Commands dead-lettered instead of decided.
    pub dead_lettered: u64,
    /// Texts embedded.
    pub embeddings: u64,
    /// Model calls by prompt kind.
    pub llm_calls: BTreeMap<String, u64>,
    /// Entity resolutions by tier.
    pub resolutions: BTreeMap<String, u64>,
}

/// Moves a counter by a row that was (`was`) and is (`is`) there.
fn count(counter: &mut u64, was: bool, is: bool) {
    match (was, is) {
        (false, true) => *counter += 1,
        (true, false) => *counter = counter.saturating_sub(1),
        _ => {}
    }
}

impl Totals {
    /// Counts one applied record's decision and its cost.
    pub fn record(&mut self, batch: &EventBatch) {
        self.decisions += 1;
        self.events += batch.events.len() as u64;
        if batch.dead_letter.is_some() {
            self.dead_lettered += 1;
        }
        if let Some(s) = &batch.stats {
            self.embeddings += s.embeddings;
            add(&mut self.llm_calls, &s.llm_calls);
            add(&mut self.resolutions, &s.resolutions);
        }
    }

    /// An episode row that was and is there.
    pub fn episode(&mut self, was: bool, is: bool) {
        count(&mut self.counts.episodes, was, is);
    }

    /// An entity row that was and is there.
    pub fn entity(&mut self, was: bool, is: bool) {
        count(&mut self.counts.entities, was, is);
    }

    /// A saga row that was and is there.
    pub fn saga(&mut self, was: bool, is: bool) {
        count(&mut self.counts.sagas, was, is);
    }

    /// A community row that was and is there.
    pub fn community(&mut self, was: bool, is: bool) {
        count(&mut self.counts.communities, was, is);
    }

    /// A fact row before and after: `None` when absent, else whether it
    /// is current (neither ended nor invalidated).
    pub fn fact(&mut self, was: Option<bool>, is: Option<bool>) {
        let c = &mut self.counts;
        count(&mut c.facts, was.is_some(), is.is_some());
        count(&mut c.facts_valid, was == Some(true), is == Some(true));
        count(
            &mut c.facts_invalidated,
            was == Some(false),
            is == Some(false),
        );
    }

    /// Adds another group's totals (for the totals of several groups).
    pub fn merge(&mut self, other: &Totals) {
        let (c, o) = (&mut self.counts, &other.counts);
        c.episodes += o.episodes;
        c.entities += o.entities;
        c.facts += o.facts;
        c.facts_valid += o.facts_valid;
        c.facts_invalidated += o.facts_invalidated;
        c.communities += o.communities;
        c.sagas += o.sagas;
        self.decisions += other.decisions;
        self.events += other.events;
        self.dead_lettered += other.dead_lettered;
        self.embeddings += other.embeddings;
        add(&mut self.llm_calls, &other.llm_calls);
        add(&mut self.resolutions, &other.resolutions);
    }
}

fn add(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_moves_between_current_and_history_and_out() {
        let mut t = Totals::default();
        t.fact(None, Some(true));
        t.fact(None, Some(true));
        t.fact(Some(true), Some(false));
        t.fact(Some(false), Some(false));
        assert_eq!(
            (
                t.counts.facts,
                t.counts.facts_valid,
                t.counts.facts_invalidated
            ),
            (2, 1, 1)
        );
        t.fact(Some(false), None);
        t.fact(Some(true), Some(true));
        assert_eq!(
            (
                t.counts.facts,
                t.counts.facts_valid,
                t.counts.facts_invalidated
            ),
            (1, 1, 0)
        );
    }

    #[test]
    fn rows_count_once_however_often_they_are_put() {
        let mut t = Totals::default();
        t.episode(false, true);
        t.episode(true, true);
        t.entity(false, true);
        t.entity(true, false);
        t.entity(false, false);
        assert_eq!((t.counts.episodes, t.counts.entities), (1, 0));
        let mut sum = t.clone();
        sum.merge(&t);
        assert_eq!(sum.counts.episodes, 2);
    }
}
