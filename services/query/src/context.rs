//! A ready-to-paste memory block (graphiti's `/get-memory`): facts with
//! their validity windows, then the turns that support them, in a budget.

use std::collections::BTreeSet;

use chronicle_engine::search;
use chronicle_model::{GroupId, Timestamp};

use crate::results::{MemoryContext, SearchRequest, Turn};
use crate::{Query, QueryError};

/// Default budget of a context block, in characters (about 1,000 tokens).
pub const DEFAULT_CONTEXT_CHARS: usize = 4_000;

/// Results a context block draws from.
const CONTEXT_RESULTS: usize = 10;

impl Query<'_> {
    /// A ready-to-paste memory block for `query` within `max_chars`: the
    /// matching facts (valid at `as_of`, default now) with their validity
    /// windows, then the turns that support them, best first, each once.
    pub async fn context(
        &self,
        group: &GroupId,
        query: &str,
        max_chars: usize,
        as_of: Option<Timestamp>,
    ) -> Result<MemoryContext, QueryError> {
        let mut request = SearchRequest::recipe(query, search::MEMORY_RECIPE, CONTEXT_RESULTS)?;
        request.filters.as_of = as_of;
        let results = self.search(group, &request).await?.results;
        let mut out = MemoryContext::default();
        let (mut facts_text, mut turns_text) = (String::new(), String::new());
        let mut seen_facts = BTreeSet::new();
        let mut seen_turns = BTreeSet::new();
        let fits = |a: &str, b: &str, line: &str| a.len() + b.len() + line.len() + 32 <= max_chars;
        for r in &results {
            for f in &r.facts {
                let line = format!("- {} ({})\n", f.fact, window(f.valid_at, f.invalid_at));
                if seen_facts.insert(f.uuid) && fits(&facts_text, &turns_text, &line) {
                    facts_text.push_str(&line);
                    out.facts.push(f.clone());
                }
            }
            let turns = if r.context.is_empty() {
                r.content
                    .clone()
                    .map(|content| Turn {
                        uuid: r.uuid,
                        name: r.name.clone(),
                        content,
                        valid_at: r.valid_at.unwrap_or(r.created_at),
                    })
                    .into_iter()
                    .collect()
            } else {
                r.context.clone()
            };
            let mut block = String::new();
            let mut taken = Vec::new();
            for t in turns.into_iter().filter(|t| !seen_turns.contains(&t.uuid)) {
                block.push_str(&format!("[{} {}] {}\n", t.name, t.valid_at, t.content));
                taken.push(t);
            }
            if taken.is_empty() || !fits(&facts_text, &turns_text, &block) {
                continue;
            }
            turns_text.push_str(&block);
            turns_text.push('\n');
            seen_turns.extend(taken.iter().map(|t| t.uuid));
            out.turns.extend(taken);
        }
        if !facts_text.is_empty() {
            out.context.push_str("Facts (valid from – until):\n");
            out.context.push_str(&facts_text);
            out.context.push('\n');
        }
        if !turns_text.is_empty() {
            out.context.push_str("What was said:\n");
            out.context.push_str(&turns_text);
        }
        Ok(out)
    }
}

/// A validity window as people read it.
fn window(from: Option<Timestamp>, until: Option<Timestamp>) -> String {
    let from = from.map_or_else(|| "unknown".to_owned(), |t| t.to_string());
    let until = until.map_or_else(|| "present".to_owned(), |t| t.to_string());
    format!("{from} – {until}")
}
