//! The records of one group, as the fold sees them, and their in-memory home.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_model::{Community, Entity, Episode, Fact, GroupId, Saga, Timestamp, normalize_name};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::fuzzy::LshIndex;

/// Read-modify-write access to one group's records: the fold's only view of
/// storage. The in-memory [`GroupState`] implements it directly; persistent
/// stores implement it over a write batch, so the same fold serves serving,
/// rebuild, audit replay and the processor's own state.
pub trait GraphRecords {
    /// An episode by id.
    fn episode(&self, uuid: Uuid) -> Option<Episode>;
    /// An entity by id.
    fn entity(&self, uuid: Uuid) -> Option<Entity>;
    /// A fact by id.
    fn fact(&self, uuid: Uuid) -> Option<Fact>;
    /// A saga by id.
    fn saga(&self, uuid: Uuid) -> Option<Saga>;
    /// The saga an episode was linked into, if any.
    fn saga_of_episode(&self, episode: Uuid) -> Option<Uuid>;
    /// A community by id.
    fn community(&self, uuid: Uuid) -> Option<Community>;
    /// Entities an episode mentions.
    fn mentioned_entities(&self, episode: Uuid) -> Vec<Uuid>;
    /// Episodes that mention an entity.
    fn mentioning_episodes(&self, entity: Uuid) -> Vec<Uuid>;
    /// Whether an event was already folded in.
    fn is_applied(&self, event_id: Uuid) -> bool;

    /// Inserts or replaces an episode.
    fn put_episode(&mut self, episode: Episode);
    /// Drops an episode.
    fn remove_episode(&mut self, uuid: Uuid);
    /// Inserts or replaces an entity.
    fn put_entity(&mut self, entity: Entity);
    /// Drops an entity.
    fn remove_entity(&mut self, uuid: Uuid);
    /// Inserts or replaces a fact.
    fn put_fact(&mut self, fact: Fact);
    /// Drops a fact.
    fn remove_fact(&mut self, uuid: Uuid);
    /// Inserts or replaces a saga.
    fn put_saga(&mut self, saga: Saga);
    /// Inserts or replaces a community.
    fn put_community(&mut self, community: Community);
    /// Drops a community.
    fn remove_community(&mut self, uuid: Uuid);
    /// Records that an episode mentions entities (adding to earlier mentions).
    fn add_mentions(&mut self, episode: Uuid, entities: &[Uuid]);
    /// Forgets an episode's mentions.
    fn remove_mentions(&mut self, episode: Uuid);
    /// Remembers that an event was folded in.
    fn mark_applied(&mut self, event_id: Uuid);
}

/// One group's whole graph in memory, with the lookups `decide` needs.
///
/// The processor keeps one per group (read-your-writes between episodes);
/// tests and audits fold into it too. Primary data serializes
/// deterministically (sorted maps), derived indexes are skipped.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupState {
    group_id: Option<GroupId>,
    episodes: BTreeMap<Uuid, Episode>,
    entities: BTreeMap<Uuid, Entity>,
    facts: BTreeMap<Uuid, Fact>,
    sagas: BTreeMap<Uuid, Saga>,
    communities: BTreeMap<Uuid, Community>,
    mentions: BTreeMap<Uuid, BTreeSet<Uuid>>,
    applied: BTreeSet<Uuid>,

    #[serde(skip)]
    index: Indexes,
}

/// One group's state at rest: the primary records plus the two derived
/// values a fold of the remaining records cannot recompute — the latest
/// transaction time (it survives retraction), each community's fact
/// fingerprint as of its last build and the saga each episode was last
/// linked into (history order, not id order). The processor keeps these in its state
/// store so a cold group loads without reading the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupSnapshot {
    group_id: Option<GroupId>,
    episodes: Vec<Episode>,
    entities: Vec<Entity>,
    facts: Vec<Fact>,
    sagas: Vec<Saga>,
    communities: Vec<Community>,
    mentions: Vec<(Uuid, Vec<Uuid>)>,
    applied: Vec<Uuid>,
    latest_tx: Option<Timestamp>,
    community_facts: Vec<(Uuid, u64)>,
    saga_of_episode: Vec<(Uuid, Uuid)>,
}

/// Lookups derived from the primary maps.
#[derive(Clone, Debug, Default)]
struct Indexes {
    /// (reference time, transaction time, uuid): turns that share a
    /// reference time (one session of a conversation) keep log order.
    episodes_by_time: BTreeSet<(Timestamp, Timestamp, Uuid)>,
    entities_by_name: BTreeMap<String, BTreeSet<Uuid>>,
    facts_by_entity: BTreeMap<Uuid, BTreeSet<Uuid>>,
    mentioned_by: BTreeMap<Uuid, BTreeSet<Uuid>>,
    saga_of_episode: BTreeMap<Uuid, Uuid>,
    saga_by_name: BTreeMap<String, Uuid>,
    /// Entity → the community it is a member of.
    community_of: BTreeMap<Uuid, Uuid>,
    /// Community → fingerprint of its internal current facts when it was
    /// last built or updated: how a later build tells that a community's
    /// facts changed and its summary is stale (see `communities`).
    community_facts: BTreeMap<Uuid, u64>,
    fuzzy: LshIndex,
    latest_tx: Option<Timestamp>,
}

impl GroupState {
    /// An empty state for one group.
    pub fn new(group_id: GroupId) -> Self {
        GroupState {
            group_id: Some(group_id),
            ..Default::default()
        }
    }

    /// The group, once known.
    pub fn group_id(&self) -> Option<&GroupId> {
        self.group_id.as_ref()
    }

    /// Deterministic serialization of the primary data (for equality checks).
    pub fn to_canonical_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("state serializes")
    }

    /// The state as it is kept at rest (see [`GroupSnapshot`]).
    pub fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            group_id: self.group_id.clone(),
            episodes: self.episodes.values().cloned().collect(),
            entities: self.entities.values().cloned().collect(),
            facts: self.facts.values().cloned().collect(),
            sagas: self.sagas.values().cloned().collect(),
            communities: self.communities.values().cloned().collect(),
            mentions: self
                .mentions
                .iter()
                .map(|(e, s)| (*e, s.iter().copied().collect()))
                .collect(),
            applied: self.applied.iter().copied().collect(),
            latest_tx: self.index.latest_tx,
            community_facts: self
                .index
                .community_facts
                .iter()
                .map(|(c, f)| (*c, *f))
                .collect(),
            saga_of_episode: self
                .index
                .saga_of_episode
                .iter()
                .map(|(e, s)| (*e, *s))
                .collect(),
        }
    }

    /// The state a snapshot was taken of, lookups rebuilt.
    pub fn from_snapshot(snapshot: GroupSnapshot) -> Self {
        let mut state = GroupState {
            group_id: snapshot.group_id,
            ..Default::default()
        };
        for e in snapshot.episodes {
            state.put_episode(e);
        }
        for e in snapshot.entities {
            state.put_entity(e);
        }
        for f in snapshot.facts {
            state.put_fact(f);
        }
        for s in snapshot.sagas {
            state.put_saga(s);
        }
        for c in snapshot.communities {
            state.put_community(c);
        }
        for (episode, entities) in snapshot.mentions {
            state.add_mentions(episode, &entities);
        }
        state.applied = snapshot.applied.into_iter().collect();
        state.index.latest_tx = state.index.latest_tx.max(snapshot.latest_tx);
        state.index.community_facts = snapshot.community_facts.into_iter().collect();
        state.index.saga_of_episode = snapshot.saga_of_episode.into_iter().collect();
        state
    }

    /// Number of episodes.
    pub fn episode_count(&self) -> usize {
        self.episodes.len()
    }

    /// Number of events folded in.
    pub fn applied_count(&self) -> usize {
        self.applied.len()
    }

    /// All entities, by id.
    pub fn entities(&self) -> impl Iterator<Item = &Entity> {
        self.entities.values()
    }

    /// All facts, by id.
    pub fn facts(&self) -> impl Iterator<Item = &Fact> {
        self.facts.values()
    }

    /// All episodes, by id.
    pub fn episodes(&self) -> impl Iterator<Item = &Episode> {
        self.episodes.values()
    }

    /// All sagas, by id.
    pub fn sagas(&self) -> impl Iterator<Item = &Saga> {
        self.sagas.values()
    }

    /// All communities, by id.
    pub fn communities(&self) -> impl Iterator<Item = &Community> {
        self.communities.values()
    }

    /// Borrowed lookups.
    pub fn get_entity(&self, uuid: &Uuid) -> Option<&Entity> {
        self.entities.get(uuid)
    }

    /// A fact by id, borrowed.
    pub fn get_fact(&self, uuid: &Uuid) -> Option<&Fact> {
        self.facts.get(uuid)
    }

    /// An episode by id, borrowed.
    pub fn get_episode(&self, uuid: &Uuid) -> Option<&Episode> {
        self.episodes.get(uuid)
    }

    /// A saga by its name.
    pub fn saga_by_name(&self, name: &str) -> Option<&Saga> {
        self.index
            .saga_by_name
            .get(name)
            .and_then(|u| self.sagas.get(u))
    }

    /// Entities whose normalized name equals `normalized`.
    pub fn entities_named(&self, normalized: &str) -> impl Iterator<Item = &Entity> {
        self.index
            .entities_by_name
            .get(normalized)
            .into_iter()
            .flatten()
            .filter_map(|u| self.entities.get(u))
    }

    /// Facts with `entity` at either end.
    pub fn facts_of(&self, entity: &Uuid) -> impl Iterator<Item = &Fact> {
        self.index
            .facts_by_entity
            .get(entity)
            .into_iter()
            .flatten()
            .filter_map(|u| self.facts.get(u))
    }

    /// Facts between two entities, in either direction.
    pub fn facts_between<'a>(
        &'a self,
        a: &'a Uuid,
        b: &'a Uuid,
    ) -> impl Iterator<Item = &'a Fact> + 'a {
        self.facts_of(a).filter(move |f| {
            (f.source_node_uuid == *a && f.target_node_uuid == *b)
                || (f.source_node_uuid == *b && f.target_node_uuid == *a)
        })
    }

    /// The last `n` episodes with `valid_at <= at`, oldest first.
    pub fn episodes_before(&self, at: Timestamp, n: usize) -> Vec<&Episode> {
        let mut out: Vec<&Episode> = self
            .index
            .episodes_by_time
            .range(..=(at, Timestamp::MAX, Uuid::max()))
            .rev()
            .take(n)
            .filter_map(|(_, _, u)| self.episodes.get(u))
            .collect();
        out.reverse();
        out
    }

    /// Entities whose names fuzzy-match `name` (shingle Jaccard ≥ `threshold`), best first.
    pub fn fuzzy_matches(&self, name: &str, threshold: f64) -> Vec<(&Entity, f64)> {
        self.index
            .fuzzy
            .matches(name, threshold)
            .into_iter()
            .filter_map(|(u, j)| Some((self.entities.get(&u)?, j)))
            .collect()
    }

    /// The latest transaction time of any episode ever recorded here (it
    /// survives retraction): the processor keeps a group's transaction times
    /// strictly increasing from it.
    pub fn latest_tx(&self) -> Option<Timestamp> {
        self.index.latest_tx
    }

    /// How many episodes mention an entity.
    pub fn mention_count(&self, entity: &Uuid) -> usize {
        self.index.mentioned_by.get(entity).map_or(0, BTreeSet::len)
    }

    /// A community by id, borrowed.
    pub fn get_community(&self, uuid: &Uuid) -> Option<&Community> {
        self.communities.get(uuid)
    }

    /// The community an entity is a member of.
    pub fn community_of(&self, entity: &Uuid) -> Option<Uuid> {
        self.index.community_of.get(entity).copied()
    }

    /// The fingerprint of a community's internal current facts as they were
    /// when it was last built or updated.
    pub fn community_facts_fingerprint(&self, community: &Uuid) -> Option<u64> {
        self.index.community_facts.get(community).copied()
    }
}

impl GraphRecords for GroupState {
    fn episode(&self, uuid: Uuid) -> Option<Episode> {
        self.episodes.get(&uuid).cloned()
    }
    fn entity(&self, uuid: Uuid) -> Option<Entity> {
        self.entities.get(&uuid).cloned()
    }
    fn fact(&self, uuid: Uuid) -> Option<Fact> {
        self.facts.get(&uuid).cloned()
    }
    fn saga(&self, uuid: Uuid) -> Option<Saga> {
        self.sagas.get(&uuid).cloned()
    }
    fn saga_of_episode(&self, episode: Uuid) -> Option<Uuid> {
        self.index.saga_of_episode.get(&episode).copied()
    }
    fn community(&self, uuid: Uuid) -> Option<Community> {
        self.communities.get(&uuid).cloned()
    }
    fn mentioned_entities(&self, episode: Uuid) -> Vec<Uuid> {
        self.mentions
            .get(&episode)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
    fn mentioning_episodes(&self, entity: Uuid) -> Vec<Uuid> {
        self.index
            .mentioned_by
            .get(&entity)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
    fn is_applied(&self, event_id: Uuid) -> bool {
        self.applied.contains(&event_id)
    }

    fn put_episode(&mut self, mut episode: Episode) {
        // Decisions never read an episode's vector or the turn it follows
        // (search does, from the index): the processor's memory and state
        // store go without them.
        episode.content_embedding = None;
        episode.preceding_turn = None;
        self.remove_episode(episode.uuid);
        self.group_id
            .get_or_insert_with(|| episode.group_id.clone());
        self.index
            .episodes_by_time
            .insert((episode.valid_at, episode.created_at, episode.uuid));
        self.index.latest_tx = self.index.latest_tx.max(Some(episode.created_at));
        self.episodes.insert(episode.uuid, episode);
    }
    fn remove_episode(&mut self, uuid: Uuid) {
        if let Some(old) = self.episodes.remove(&uuid) {
            self.index
                .episodes_by_time
                .remove(&(old.valid_at, old.created_at, uuid));
        }
    }
    fn put_entity(&mut self, entity: Entity) {
        self.remove_entity(entity.uuid);
        self.index
            .entities_by_name
            .entry(normalize_name(&entity.name))
            .or_default()
            .insert(entity.uuid);
        self.index.fuzzy.insert(entity.uuid, &entity.name);
        self.entities.insert(entity.uuid, entity);
    }
    fn remove_entity(&mut self, uuid: Uuid) {
        if let Some(old) = self.entities.remove(&uuid) {
            self.index.fuzzy.remove(uuid);
            let key = normalize_name(&old.name);
            if let Some(set) = self.index.entities_by_name.get_mut(&key) {
                set.remove(&uuid);
                if set.is_empty() {
                    self.index.entities_by_name.remove(&key);
                }
            }
        }
    }
    fn put_fact(&mut self, fact: Fact) {
        self.remove_fact(fact.uuid);
        for end in [fact.source_node_uuid, fact.target_node_uuid] {
            self.index
                .facts_by_entity
                .entry(end)
                .or_default()
                .insert(fact.uuid);
        }
        self.facts.insert(fact.uuid, fact);
    }
    fn remove_fact(&mut self, uuid: Uuid) {
        if let Some(old) = self.facts.remove(&uuid) {
            for end in [old.source_node_uuid, old.target_node_uuid] {
                if let Some(set) = self.index.facts_by_entity.get_mut(&end) {
                    set.remove(&uuid);
                    if set.is_empty() {
                        self.index.facts_by_entity.remove(&end);
                    }
                }
            }
        }
    }
    fn put_saga(&mut self, saga: Saga) {
        for ep in &saga.episodes {
            self.index.saga_of_episode.insert(*ep, saga.uuid);
        }
        if let Some(old) = self.sagas.get(&saga.uuid) {
            for ep in old.episodes.iter().filter(|e| !saga.episodes.contains(e)) {
                self.index.saga_of_episode.remove(ep);
            }
        }
        self.index.saga_by_name.insert(saga.name.clone(), saga.uuid);
        self.sagas.insert(saga.uuid, saga);
    }
    fn put_community(&mut self, community: Community) {
        self.remove_community(community.uuid);
        for m in &community.members {
            self.index.community_of.insert(*m, community.uuid);
        }
        let members: BTreeSet<Uuid> = community.members.iter().copied().collect();
        let fingerprint = crate::communities::facts_fingerprint(
            &members,
            members.iter().flat_map(|m| self.facts_of(m)),
        );
        self.index
            .community_facts
            .insert(community.uuid, fingerprint);
        self.communities.insert(community.uuid, community);
    }
    fn remove_community(&mut self, uuid: Uuid) {
        if let Some(old) = self.communities.remove(&uuid) {
            for m in &old.members {
                if self.index.community_of.get(m) == Some(&uuid) {
                    self.index.community_of.remove(m);
                }
            }
        }
        self.index.community_facts.remove(&uuid);
    }
    fn add_mentions(&mut self, episode: Uuid, entities: &[Uuid]) {
        let set = self.mentions.entry(episode).or_default();
        for e in entities {
            set.insert(*e);
            self.index
                .mentioned_by
                .entry(*e)
                .or_default()
                .insert(episode);
        }
    }
    fn remove_mentions(&mut self, episode: Uuid) {
        for e in self.mentions.remove(&episode).unwrap_or_default() {
            if let Some(set) = self.index.mentioned_by.get_mut(&e) {
                set.remove(&episode);
                if set.is_empty() {
                    self.index.mentioned_by.remove(&e);
                }
            }
        }
    }
    fn mark_applied(&mut self, event_id: Uuid) {
        self.applied.insert(event_id);
    }
}
