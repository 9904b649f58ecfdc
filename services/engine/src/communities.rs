//! Communities: label-propagation clusters of a group's entities, each with a
//! name, a summary and a name embedding — graphiti's `build_communities`,
//! decided as events and without its costs.
//!
//! graphiti writes a community's summary by merging member summaries
//! pairwise, one model call per merge: O(total entities) calls and round
//! trips for a rebuild (upstream #1401: minutes for ~20k entities). Here:
//!
//! * clustering is pure and deterministic: asynchronous label propagation
//!   over the current facts (an edge's weight is the number of current facts
//!   between its two entities), nodes visited in uuid order, ties broken
//!   towards the current label and then the smallest one, at most
//!   [`CommunityConfig::max_iterations`] sweeps;
//! * a summary is written from a bounded input — the most-cited internal
//!   facts and, for a model, the summaries of the most central members — and
//!   up to [`CommunityConfig::summary_batch`] communities share one call, so
//!   a rebuild costs model calls per *changed community*, never per entity;
//! * a rebuild keeps the identity of a community that persists (greedy
//!   matching by member overlap) and re-summarizes it only when its members
//!   or its internal current facts changed: the fold keeps a fingerprint of
//!   those facts for every community ([`facts_fingerprint`]);
//! * incremental maintenance (optional) runs inside an episode's decision:
//!   the episode's unassigned entities join their neighbours' majority
//!   community (or form a new one with their unassigned neighbours), and only
//!   the communities of the episode's entities are re-summarized. Splits and
//!   merges are left to the next full build.
//!
//! Without a model, a summary is extractive: the most-cited internal facts
//! that fit (see [`crate::offline`]).

use std::collections::{BTreeMap, BTreeSet};

use chronicle_model::{
    Community, DecisionStats, Entity, EventKind, Fact, GroupId, IdKind, Timestamp, derive_id,
};
use uuid::Uuid;

use crate::decide::{DecideError, Decider};
use crate::ports::{LlmError, PromptKind, SummaryItem, SummaryKind, SummaryRequest};
use crate::state::GroupState;

/// Tunables of community detection and maintenance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommunityConfig {
    /// Maintain communities as episodes arrive (inside each episode's
    /// decision), besides explicit builds.
    pub incremental: bool,
    /// Label-propagation sweeps at most (it usually settles in a few).
    pub max_iterations: usize,
    /// Smallest cluster that becomes a community (an isolated entity is none).
    pub min_size: usize,
    /// Communities summarized per model call. Keep it at or below the
    /// adapter's own chunk size so one request is one call.
    pub summary_batch: usize,
    /// Internal facts (most cited first) given to a summary.
    pub material_facts: usize,
    /// Central members whose summaries a model is given.
    pub material_members: usize,
    /// Central members whose names make the community's name.
    pub name_members: usize,
}

impl Default for CommunityConfig {
    fn default() -> Self {
        CommunityConfig {
            incremental: false,
            max_iterations: 20,
            min_size: 2,
            summary_batch: 16,
            material_facts: 12,
            material_members: 6,
            name_members: 3,
        }
    }
}

/// A fingerprint (FNV-1a) of the current facts with both ends among
/// `members`, as a set: equal fingerprints mean the community's internal
/// facts did not change. `facts` may repeat facts and hold any others.
pub fn facts_fingerprint<'f>(
    members: &BTreeSet<Uuid>,
    facts: impl IntoIterator<Item = &'f Fact>,
) -> u64 {
    let mut ids: Vec<Uuid> = facts
        .into_iter()
        .filter(|f| {
            f.is_current()
                && members.contains(&f.source_node_uuid)
                && members.contains(&f.target_node_uuid)
        })
        .map(|f| f.uuid)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for id in ids {
        for b in id.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Asynchronous label propagation over nodes `0..adjacency.len()` (each
/// node's `(neighbour, weight)` list, symmetric). Every node starts with
/// its own label; in each sweep, in index order, a node takes the label of
/// greatest total weight among its neighbours, keeping its own on a tie and
/// otherwise preferring the smallest label. Stops when a sweep changes
/// nothing, or after `max_iterations` sweeps. Returns each node's label
/// (the index of a node of its cluster).
pub fn label_propagation(adjacency: &[Vec<(usize, u32)>], max_iterations: usize) -> Vec<usize> {
    let mut labels: Vec<usize> = (0..adjacency.len()).collect();
    let mut scores: Vec<(usize, u64)> = Vec::new();
    for _ in 0..max_iterations {
        let mut changed = false;
        for (i, neighbours) in adjacency.iter().enumerate() {
            if neighbours.is_empty() {
                continue;
            }
            scores.clear();
            scores.extend(neighbours.iter().map(|&(j, w)| (labels[j], u64::from(w))));
            scores.sort_unstable_by_key(|s| s.0);
            let mut best: Option<(usize, u64)> = None;
            let mut own = 0;
            let mut k = 0;
            while k < scores.len() {
                let label = scores[k].0;
                let mut total = 0;
                while k < scores.len() && scores[k].0 == label {
                    total += scores[k].1;
                    k += 1;
                }
                if label == labels[i] {
                    own = total;
                }
                // Ascending labels: a strictly greater total wins, so ties keep the smallest.
                if best.is_none_or(|(_, b)| total > b) {
                    best = Some((label, total));
                }
            }
            if let Some((label, total)) = best
                && label != labels[i]
                && total > own
            {
                labels[i] = label;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    labels
}

/// What one episode's decision changes, before its events are folded:
/// incremental maintenance sees the graph as it will be after the episode
/// without copying the group's state.
#[derive(Debug)]
pub(crate) struct EpisodeDelta<'a> {
    /// Entities the episode mentions.
    pub mentioned: &'a [Uuid],
    /// Facts the episode creates.
    pub created: &'a [Fact],
    /// Existing facts the episode ends or invalidates.
    pub ended: BTreeSet<Uuid>,
    /// Entities the episode creates.
    pub new_entities: &'a [Entity],
    /// New summaries of existing entities.
    pub summaries: BTreeMap<Uuid, &'a str>,
}

/// The group's graph as community detection reads it: entities and their
/// current facts, optionally with an episode's pending changes on top.
#[derive(Clone, Copy)]
pub(crate) struct GraphView<'a> {
    state: &'a GroupState,
    delta: Option<&'a EpisodeDelta<'a>>,
}

impl<'a> GraphView<'a> {
    /// The state as it is.
    pub fn of(state: &'a GroupState) -> Self {
        GraphView { state, delta: None }
    }

    /// The state as it will be after an episode's events.
    pub fn after(state: &'a GroupState, delta: &'a EpisodeDelta<'a>) -> Self {
        GraphView {
            state,
            delta: Some(delta),
        }
    }

    fn new_entity(&self, e: Uuid) -> Option<&'a Entity> {
        self.delta
            .and_then(|d| d.new_entities.iter().find(|x| x.uuid == e))
    }

    fn exists(&self, e: Uuid) -> bool {
        self.state.get_entity(&e).is_some() || self.new_entity(e).is_some()
    }

    fn name(&self, e: Uuid) -> &'a str {
        match self.state.get_entity(&e) {
            Some(x) => &x.name,
            None => self.new_entity(e).map_or("", |x| x.name.as_str()),
        }
    }

    fn summary(&self, e: Uuid) -> &'a str {
        if let Some(s) = self.delta.and_then(|d| d.summaries.get(&e)) {
            return s;
        }
        match self.state.get_entity(&e) {
            Some(x) => &x.summary,
            None => self.new_entity(e).map_or("", |x| x.summary.as_str()),
        }
    }

    /// Current facts with `e` at one end and an existing entity at the other.
    fn current_facts_of(&self, e: Uuid) -> Vec<&'a Fact> {
        let ended = self.delta.map(|d| &d.ended);
        let mut out: Vec<&'a Fact> = self
            .state
            .facts_of(&e)
            .filter(|f| f.is_current() && ended.is_none_or(|x| !x.contains(&f.uuid)))
            .collect();
        if let Some(d) = self.delta {
            out.extend(d.created.iter().filter(|f| {
                f.is_current() && (f.source_node_uuid == e || f.target_node_uuid == e)
            }));
        }
        out.retain(|f| f.source_node_uuid != f.target_node_uuid && self.exists(other_end(f, e)));
        out
    }
}

fn other_end(f: &Fact, e: Uuid) -> Uuid {
    if f.source_node_uuid == e {
        f.target_node_uuid
    } else {
        f.source_node_uuid
    }
}

/// Weighted adjacency of `nodes` (sorted) over their current facts.
fn adjacency(view: GraphView<'_>, nodes: &[Uuid]) -> Vec<Vec<(usize, u32)>> {
    let index: BTreeMap<Uuid, usize> = nodes.iter().enumerate().map(|(i, u)| (*u, i)).collect();
    nodes
        .iter()
        .map(|e| {
            let mut weights: BTreeMap<usize, u32> = BTreeMap::new();
            for f in view.current_facts_of(*e) {
                if let Some(j) = index.get(&other_end(f, *e)) {
                    *weights.entry(*j).or_default() += 1;
                }
            }
            weights.into_iter().collect()
        })
        .collect()
}

/// The clusters of at least `min_size` nodes, ordered by their smallest member.
fn clusters(nodes: &[Uuid], labels: &[usize], min_size: usize) -> Vec<BTreeSet<Uuid>> {
    let mut by_label: BTreeMap<usize, BTreeSet<Uuid>> = BTreeMap::new();
    for (node, label) in nodes.iter().zip(labels) {
        by_label.entry(*label).or_default().insert(*node);
    }
    let mut out: Vec<BTreeSet<Uuid>> = by_label
        .into_values()
        .filter(|c| c.len() >= min_size.max(1))
        .collect();
    out.sort_by_key(|c| c.first().copied());
    out
}

/// Existing communities carried over by new clusters: pairs by decreasing
/// member overlap (Jaccard), each community and cluster matched at most once.
fn match_existing(state: &GroupState, clusters: &[BTreeSet<Uuid>]) -> Vec<Option<Uuid>> {
    // (overlap, union, community, cluster)
    let mut pairs: Vec<(u64, u64, Uuid, usize)> = Vec::new();
    for (ci, cluster) in clusters.iter().enumerate() {
        let mut overlap: BTreeMap<Uuid, u64> = BTreeMap::new();
        for m in cluster {
            if let Some(c) = state.community_of(m) {
                *overlap.entry(c).or_default() += 1;
            }
        }
        for (c, o) in overlap {
            if let Some(old) = state.get_community(&c) {
                let union = (cluster.len() + old.members.len()) as u64 - o;
                pairs.push((o, union.max(1), c, ci));
            }
        }
    }
    pairs.sort_by(|a, b| {
        (b.0 * a.1)
            .cmp(&(a.0 * b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let mut out = vec![None; clusters.len()];
    let mut taken = BTreeSet::new();
    for (_, _, c, ci) in pairs {
        if out[ci].is_none() && !taken.contains(&c) {
            out[ci] = Some(c);
            taken.insert(c);
        }
    }
    out
}

/// What a summary and a name are made from.
struct Profile {
    name: String,
    fingerprint: u64,
    material: Vec<String>,
}

/// Name, fingerprint and bounded summary material of a member set.
fn profile(
    view: GraphView<'_>,
    members: &BTreeSet<Uuid>,
    config: &CommunityConfig,
    with_member_summaries: bool,
) -> Profile {
    let mut internal: BTreeMap<Uuid, &Fact> = BTreeMap::new();
    let mut degree: BTreeMap<Uuid, u32> = members.iter().map(|m| (*m, 0)).collect();
    for m in members {
        for f in view.current_facts_of(*m) {
            if members.contains(&other_end(f, *m)) {
                internal.insert(f.uuid, f);
                *degree.entry(*m).or_default() += 1;
            }
        }
    }
    let fingerprint = facts_fingerprint(members, internal.values().copied());
    // Most central first: internal weighted degree, then name, then id.
    let mut central: Vec<(Uuid, u32)> = degree.into_iter().collect();
    central.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then_with(|| view.name(a.0).cmp(view.name(b.0)))
            .then(a.0.cmp(&b.0))
    });
    let name = central
        .iter()
        .map(|(u, _)| view.name(*u))
        .filter(|n| !n.is_empty())
        .take(config.name_members.max(1))
        .collect::<Vec<_>>()
        .join(", ");
    let mut material: Vec<String> = Vec::new();
    if with_member_summaries {
        material.extend(
            central
                .iter()
                .filter(|(u, _)| !view.summary(*u).trim().is_empty())
                .take(config.material_members)
                .map(|(u, _)| format!("{}: {}", view.name(*u), view.summary(*u).trim())),
        );
    }
    // Most cited first, then newest, then by id.
    let mut facts: Vec<&Fact> = internal.into_values().collect();
    facts.sort_by(|a, b| {
        b.episodes
            .len()
            .cmp(&a.episodes.len())
            .then(b.created_at.cmp(&a.created_at))
            .then(a.uuid.cmp(&b.uuid))
    });
    let mut sentences: Vec<String> = Vec::new();
    for f in facts {
        let s = f.fact.trim().to_owned();
        if !s.is_empty() && !sentences.contains(&s) {
            sentences.push(s);
            if sentences.len() >= config.material_facts {
                break;
            }
        }
    }
    material.extend(sentences);
    Profile {
        name,
        fingerprint,
        material,
    }
}

/// A community to (re)write: its identity, members and summary input.
struct Draft<'s> {
    uuid: Uuid,
    created_at: Timestamp,
    members: Vec<Uuid>,
    previous: Option<&'s Community>,
    item: SummaryItem,
}

impl<'s> Draft<'s> {
    fn new(
        uuid: Uuid,
        created_at: Timestamp,
        members: &BTreeSet<Uuid>,
        previous: Option<&'s Community>,
        profile: Profile,
    ) -> Self {
        Draft {
            uuid,
            created_at,
            members: members.iter().copied().collect(),
            previous,
            item: SummaryItem {
                subject: profile.name,
                current: previous.map(|p| p.summary.clone()).unwrap_or_default(),
                new_material: profile.material,
            },
        }
    }
}

/// The community an entity belongs to, with this decision's assignments on top.
fn community_of(state: &GroupState, overlay: &BTreeMap<Uuid, Uuid>, e: Uuid) -> Option<Uuid> {
    overlay.get(&e).copied().or_else(|| {
        state
            .community_of(&e)
            .filter(|c| state.get_community(c).is_some())
    })
}

impl Decider {
    /// `BuildCommunities`: recomputes the group's communities and emits
    /// what changed — new clusters built, persisting ones updated when their
    /// members or internal facts changed, vanished ones dissolved. New
    /// communities take ids derived from the command.
    pub(crate) async fn build_communities(
        &self,
        state: &GroupState,
        group: &GroupId,
        command: Uuid,
        tx: Timestamp,
        stats: &mut DecisionStats,
    ) -> Result<Vec<EventKind>, DecideError> {
        let config = &self.config().communities;
        let view = GraphView::of(state);
        let nodes: Vec<Uuid> = state.entities().map(|e| e.uuid).collect();
        let labels = label_propagation(&adjacency(view, &nodes), config.max_iterations);
        let clusters = clusters(&nodes, &labels, config.min_size);
        let matched = match_existing(state, &clusters);
        let with_summaries = self.extractor().is_model();
        let mut drafts = Vec::new();
        let mut fresh = 0u32;
        for (cluster, previous) in clusters.iter().zip(&matched) {
            let p = profile(view, cluster, config, with_summaries);
            match previous.and_then(|u| state.get_community(&u)) {
                Some(old) => {
                    let same_members =
                        old.members.iter().copied().collect::<BTreeSet<_>>() == *cluster;
                    if same_members
                        && state.community_facts_fingerprint(&old.uuid) == Some(p.fingerprint)
                    {
                        continue;
                    }
                    drafts.push(Draft::new(old.uuid, old.created_at, cluster, Some(old), p));
                }
                None => {
                    let uuid = derive_id(command, IdKind::Community, fresh);
                    fresh += 1;
                    drafts.push(Draft::new(uuid, tx, cluster, None, p));
                }
            }
        }
        let kept: BTreeSet<Uuid> = matched.iter().flatten().copied().collect();
        let mut kinds: Vec<EventKind> = state
            .communities()
            .filter(|c| !kept.contains(&c.uuid))
            .map(|c| EventKind::CommunityDissolved {
                community_uuid: c.uuid,
            })
            .collect();
        kinds.extend(self.realize(group, drafts, stats).await?);
        Ok(kinds)
    }

    /// Incremental maintenance after one episode: its entities without a
    /// community join the community most of their neighbours are in (by
    /// fact weight; ties to the smallest id), those left form new
    /// communities with their unassigned neighbours, and the communities of
    /// the episode's entities are re-summarized if their members or internal
    /// facts changed. Nothing else is read or written.
    pub(crate) async fn maintain_communities(
        &self,
        state: &GroupState,
        group: &GroupId,
        episode: Uuid,
        tx: Timestamp,
        delta: &EpisodeDelta<'_>,
        stats: &mut DecisionStats,
    ) -> Result<Vec<EventKind>, DecideError> {
        let config = &self.config().communities;
        let view = GraphView::after(state, delta);
        let touched: BTreeSet<Uuid> = delta
            .mentioned
            .iter()
            .copied()
            .filter(|e| view.exists(*e))
            .collect();
        let mut overlay: BTreeMap<Uuid, Uuid> = BTreeMap::new();
        let mut joined: BTreeMap<Uuid, BTreeSet<Uuid>> = BTreeMap::new();
        for &e in &touched {
            if community_of(state, &overlay, e).is_some() {
                continue;
            }
            let mut scores: BTreeMap<Uuid, u32> = BTreeMap::new();
            for f in view.current_facts_of(e) {
                if let Some(c) = community_of(state, &overlay, other_end(f, e)) {
                    *scores.entry(c).or_default() += 1;
                }
            }
            // Greatest weight; on a tie the smallest id (max_by keeps the last maximum).
            if let Some((c, _)) = scores.iter().rev().max_by_key(|(_, w)| **w) {
                overlay.insert(e, *c);
                joined.entry(*c).or_default().insert(e);
            }
        }
        // The rest form new communities with their unassigned neighbours.
        let mut placed: BTreeSet<Uuid> = BTreeSet::new();
        let mut fresh: Vec<BTreeSet<Uuid>> = Vec::new();
        for &e in &touched {
            if placed.contains(&e) || community_of(state, &overlay, e).is_some() {
                continue;
            }
            let mut component = BTreeSet::new();
            let mut stack = vec![e];
            while let Some(x) = stack.pop() {
                if placed.contains(&x) || !component.insert(x) || !touched.contains(&x) {
                    continue;
                }
                for f in view.current_facts_of(x) {
                    let o = other_end(f, x);
                    if community_of(state, &overlay, o).is_none() && !component.contains(&o) {
                        stack.push(o);
                    }
                }
            }
            placed.extend(component.iter().copied());
            if component.len() >= config.min_size.max(1) {
                fresh.push(component);
            }
        }

        let with_summaries = self.extractor().is_model();
        let mut drafts = Vec::new();
        let affected: BTreeSet<Uuid> = touched
            .iter()
            .filter_map(|e| community_of(state, &overlay, *e))
            .collect();
        for c in affected {
            let Some(old) = state.get_community(&c) else {
                continue;
            };
            let before: BTreeSet<Uuid> = old.members.iter().copied().collect();
            let mut members: BTreeSet<Uuid> =
                before.iter().copied().filter(|m| view.exists(*m)).collect();
            members.extend(joined.get(&c).into_iter().flatten().copied());
            let p = profile(view, &members, config, with_summaries);
            if members == before && state.community_facts_fingerprint(&c) == Some(p.fingerprint) {
                continue;
            }
            drafts.push(Draft::new(c, old.created_at, &members, Some(old), p));
        }
        for (k, members) in fresh.iter().enumerate() {
            let p = profile(view, members, config, with_summaries);
            let uuid = derive_id(episode, IdKind::Community, k as u32);
            drafts.push(Draft::new(uuid, tx, members, None, p));
        }
        self.realize(group, drafts, stats).await
    }

    /// Summarizes and names the drafts (model calls in batches, one
    /// embedding call for the names that are new or changed) into
    /// `CommunityBuilt` / `CommunityUpdated` events.
    async fn realize(
        &self,
        group: &GroupId,
        drafts: Vec<Draft<'_>>,
        stats: &mut DecisionStats,
    ) -> Result<Vec<EventKind>, DecideError> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let config = self.config();
        // The batches are independent: ask concurrently (the adapter bounds
        // concurrency), keep the answers in draft order.
        let requests: Vec<SummaryRequest> = drafts
            .chunks(config.communities.summary_batch.max(1))
            .map(|chunk| SummaryRequest {
                kind: SummaryKind::Community,
                max_chars: config.summary_max_chars,
                items: chunk.iter().map(|d| d.item.clone()).collect(),
            })
            .collect();
        let answered =
            futures::future::join_all(requests.iter().map(|r| self.extractor().summarize(r))).await;
        let mut summaries: Vec<String> = Vec::with_capacity(drafts.len());
        for (request, answers) in requests.iter().zip(answered) {
            let answers = answers?;
            self.count_call(stats, PromptKind::SummarizeCommunities);
            let chunk = &request.items;
            if answers.len() != chunk.len() {
                return Err(LlmError::InvalidOutput {
                    kind: PromptKind::SummarizeCommunities.as_str(),
                    reason: format!(
                        "{} summaries for {} communities",
                        answers.len(),
                        chunk.len()
                    ),
                }
                .into());
            }
            summaries.extend(answers);
        }
        let renamed: Vec<usize> = drafts
            .iter()
            .enumerate()
            .filter(|(_, d)| {
                d.previous
                    .is_none_or(|p| p.name != d.item.subject || p.name_embedding.is_none())
            })
            .map(|(i, _)| i)
            .collect();
        let vectors = self
            .embed(
                renamed
                    .iter()
                    .map(|i| drafts[*i].item.subject.clone())
                    .collect(),
                stats,
            )
            .await?;
        let mut embedding: BTreeMap<usize, Vec<f32>> = renamed.into_iter().zip(vectors).collect();
        Ok(drafts
            .into_iter()
            .zip(summaries)
            .enumerate()
            .map(|(i, (d, summary))| {
                let community = Community {
                    uuid: d.uuid,
                    group_id: group.clone(),
                    name: d.item.subject,
                    summary,
                    members: d.members,
                    name_embedding: embedding
                        .remove(&i)
                        .or_else(|| d.previous.and_then(|p| p.name_embedding.clone())),
                    created_at: d.created_at,
                };
                match d.previous {
                    Some(_) => EventKind::CommunityUpdated { community },
                    None => EventKind::CommunityBuilt { community },
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two triangles joined by one edge.
    fn two_triangles() -> Vec<Vec<(usize, u32)>> {
        let edges = [
            (0, 1, 2),
            (1, 2, 2),
            (0, 2, 2),
            (3, 4, 2),
            (4, 5, 2),
            (3, 5, 2),
            (2, 3, 1),
        ];
        let mut adj = vec![Vec::new(); 6];
        for (a, b, w) in edges {
            adj[a].push((b, w));
            adj[b].push((a, w));
        }
        adj
    }

    #[test]
    fn label_propagation_separates_clear_clusters() {
        let labels = label_propagation(&two_triangles(), 20);
        assert_eq!(labels[0], labels[1]);
        assert_eq!(labels[1], labels[2]);
        assert_eq!(labels[3], labels[4]);
        assert_eq!(labels[4], labels[5]);
        assert_ne!(labels[0], labels[3]);
        assert_eq!(
            labels,
            label_propagation(&two_triangles(), 20),
            "deterministic"
        );
    }

    #[test]
    fn isolated_nodes_keep_their_own_label_and_iterations_are_bounded() {
        let mut adj = two_triangles();
        adj.push(Vec::new());
        let labels = label_propagation(&adj, 20);
        assert_eq!(labels[6], 6);
        // No sweep at all: every node keeps its own label.
        assert_eq!(label_propagation(&adj, 0), (0..7).collect::<Vec<_>>());
        let nodes: Vec<Uuid> = (0..7).map(|i| Uuid::from_u128(i + 1)).collect();
        let c = clusters(&nodes, &labels, 2);
        assert_eq!(c.len(), 2, "the isolated node forms no community");
    }

    #[test]
    fn fingerprints_see_only_current_internal_facts() {
        use chronicle_model::testing::{fact, group};
        let g = group("fp");
        let current = |id: u128, s: Uuid, t: Uuid| {
            let mut f = fact(&g, Uuid::from_u128(id), s, t);
            f.invalid_at = None;
            f.expired_at = None;
            f
        };
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let members: BTreeSet<Uuid> = [a, b].into();
        let ab = current(10, a, b);
        let ac = current(11, a, c);
        let ended = fact(&g, Uuid::from_u128(12), b, a);
        let base = facts_fingerprint(&members, [&ab]);
        assert_eq!(facts_fingerprint(&members, [&ab, &ac, &ended, &ab]), base);
        assert_ne!(facts_fingerprint(&members, [&ab, &current(13, b, a)]), base);
        assert_ne!(facts_fingerprint(&members, std::iter::empty()), base);
    }
}
