//! The fold's view of a group in ScyllaDB: stored rows read ahead into a
//! cache, and the fold's changes kept aside until they are written.
//!
//! `evolve` is synchronous and a database read is not, so applying a
//! record runs the fold over an [`Overlay`] of what is already cached.
//! Every read or write of a key that is not cached is noted as a miss; if
//! the pass had misses, they are loaded and the fold runs again from the
//! same cache (it is deterministic, so a pass that misses nothing is the
//! real result). The first pass is preceded by loading the ids the events
//! name, so most records fold in one pass; a retraction, which follows
//! links (episode → facts, mentions → entities → their other mentions),
//! takes a few.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use chronicle_engine::GraphRecords;
use chronicle_model::{Community, Entity, Episode, EventBatch, EventKind, Fact, Saga};
use uuid::Uuid;

use crate::Touched;

/// A row (or partition) the fold may read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Key {
    Episode(Uuid),
    Entity(Uuid),
    Fact(Uuid),
    Saga(Uuid),
    Community(Uuid),
    SagaOfEpisode(Uuid),
    /// The entities an episode mentions.
    Mentions(Uuid),
    /// The episodes that mention an entity.
    MentionedBy(Uuid),
    /// The applied events of a decision (by its episode uuid).
    Applied(Uuid),
}

/// What is known of one group's stored rows: `None` means "read, absent".
/// Only keys present in a map have been read.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    pub episodes: HashMap<Uuid, Option<Episode>>,
    pub entities: HashMap<Uuid, Option<Entity>>,
    pub facts: HashMap<Uuid, Option<Fact>>,
    pub sagas: HashMap<Uuid, Option<Saga>>,
    pub communities: HashMap<Uuid, Option<Community>>,
    pub saga_of_episode: HashMap<Uuid, Option<Uuid>>,
    pub mentions: HashMap<Uuid, BTreeSet<Uuid>>,
    pub mentioned_by: HashMap<Uuid, BTreeSet<Uuid>>,
    /// Applied event ids of a decision, by its episode uuid.
    pub applied: HashMap<Uuid, BTreeSet<Uuid>>,
    /// `(kind, bucket)` rows of `group_buckets` known to exist.
    pub buckets: BTreeSet<(&'static str, i32)>,
    /// The group's totals once read (and moved by each record written).
    pub totals: Option<crate::Totals>,
}

impl Cache {
    /// Whether `key` has been read.
    pub(crate) fn has(&self, key: &Key) -> bool {
        match key {
            Key::Episode(u) => self.episodes.contains_key(u),
            Key::Entity(u) => self.entities.contains_key(u),
            Key::Fact(u) => self.facts.contains_key(u),
            Key::Saga(u) => self.sagas.contains_key(u),
            Key::Community(u) => self.communities.contains_key(u),
            Key::SagaOfEpisode(u) => self.saga_of_episode.contains_key(u),
            Key::Mentions(u) => self.mentions.contains_key(u),
            Key::MentionedBy(u) => self.mentioned_by.contains_key(u),
            Key::Applied(u) => self.applied.contains_key(u),
        }
    }

    /// Makes the cache what the store holds once `changes` are written.
    pub(crate) fn commit(&mut self, changes: Changes) {
        self.episodes.extend(changes.episodes);
        self.entities.extend(changes.entities);
        self.facts.extend(changes.facts);
        self.sagas.extend(changes.sagas);
        self.communities.extend(changes.communities);
        self.saga_of_episode.extend(changes.saga_of_episode);
        for ((episode, entity), present) in changes.mentions {
            // sets never read stay unread: the store answers for them
            if let Some(set) = self.mentions.get_mut(&episode) {
                if present {
                    set.insert(entity);
                } else {
                    set.remove(&entity);
                }
            }
            if let Some(set) = self.mentioned_by.get_mut(&entity) {
                if present {
                    set.insert(episode);
                } else {
                    set.remove(&episode);
                }
            }
        }
        for (episode, event) in changes.applied {
            self.applied.entry(episode).or_default().insert(event);
        }
    }
}

/// What one record's fold changed: final values per key (`None` = removed).
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub episodes: BTreeMap<Uuid, Option<Episode>>,
    pub entities: BTreeMap<Uuid, Option<Entity>>,
    pub facts: BTreeMap<Uuid, Option<Fact>>,
    pub sagas: BTreeMap<Uuid, Option<Saga>>,
    pub communities: BTreeMap<Uuid, Option<Community>>,
    pub saga_of_episode: BTreeMap<Uuid, Option<Uuid>>,
    /// `(episode, entity)` → whether the mention exists afterwards.
    pub mentions: BTreeMap<(Uuid, Uuid), bool>,
    /// `(episode, event)` newly applied.
    pub applied: BTreeSet<(Uuid, Uuid)>,
    /// Records put or removed, as the embedded store reports them.
    pub touched: Touched,
}

/// The keys a batch's events name: read before the first pass.
pub(crate) fn keys_named_by(batch: &EventBatch) -> BTreeSet<Key> {
    let mut keys = BTreeSet::new();
    for event in &batch.events {
        keys.insert(Key::Applied(event.episode_uuid));
        match &event.kind {
            EventKind::EpisodeRecorded { episode } => {
                keys.insert(Key::Episode(episode.uuid));
            }
            EventKind::EntityCreated { entity } => {
                keys.insert(Key::Entity(entity.uuid));
            }
            EventKind::EntityUpdated { entity_uuid, .. } => {
                keys.insert(Key::Entity(*entity_uuid));
            }
            EventKind::FactCreated { fact } => {
                keys.insert(Key::Fact(fact.uuid));
            }
            EventKind::FactProvenanceAdded { fact_uuid, .. }
            | EventKind::FactInvalidated { fact_uuid, .. } => {
                keys.insert(Key::Fact(*fact_uuid));
            }
            EventKind::MentionsRecorded { .. } => {}
            EventKind::SagaLinked { saga_uuid, .. }
            | EventKind::SagaSummarized { saga_uuid, .. } => {
                keys.insert(Key::Saga(*saga_uuid));
            }
            EventKind::EpisodeRetracted { episode_uuid } => {
                keys.insert(Key::Episode(*episode_uuid));
                keys.insert(Key::Mentions(*episode_uuid));
                keys.insert(Key::SagaOfEpisode(*episode_uuid));
            }
            EventKind::CommunityBuilt { community } | EventKind::CommunityUpdated { community } => {
                keys.insert(Key::Community(community.uuid));
            }
            EventKind::CommunityDissolved { community_uuid } => {
                keys.insert(Key::Community(*community_uuid));
            }
        }
    }
    keys
}

/// One pass of the fold over a cache: [`GraphRecords`] for `evolve`.
pub(crate) struct Overlay<'a> {
    cache: &'a Cache,
    /// Which decision each event of the batch belongs to.
    event_episodes: &'a HashMap<Uuid, Uuid>,
    changes: Changes,
    misses: RefCell<BTreeSet<Key>>,
}

impl<'a> Overlay<'a> {
    pub(crate) fn new(cache: &'a Cache, event_episodes: &'a HashMap<Uuid, Uuid>) -> Self {
        Overlay {
            cache,
            event_episodes,
            changes: Changes::default(),
            misses: RefCell::new(BTreeSet::new()),
        }
    }

    /// The pass's changes, and the keys it needed but found uncached.
    pub(crate) fn finish(self) -> (Changes, BTreeSet<Key>) {
        (self.changes, self.misses.into_inner())
    }

    fn miss(&self, key: Key) {
        self.misses.borrow_mut().insert(key);
    }

    /// Current value of a record: the pass's change, else the cache; a miss
    /// when neither knows it.
    fn current<T: Clone>(
        &self,
        changed: &BTreeMap<Uuid, Option<T>>,
        cached: &HashMap<Uuid, Option<T>>,
        uuid: Uuid,
        key: Key,
    ) -> Option<T> {
        if let Some(v) = changed.get(&uuid) {
            return v.clone();
        }
        match cached.get(&uuid) {
            Some(v) => v.clone(),
            None => {
                self.miss(key);
                None
            }
        }
    }

    fn current_entity(&self, uuid: Uuid) -> Option<Entity> {
        self.current(
            &self.changes.entities,
            &self.cache.entities,
            uuid,
            Key::Entity(uuid),
        )
    }

    fn current_fact(&self, uuid: Uuid) -> Option<Fact> {
        self.current(
            &self.changes.facts,
            &self.cache.facts,
            uuid,
            Key::Fact(uuid),
        )
    }

    fn current_community(&self, uuid: Uuid) -> Option<Community> {
        self.current(
            &self.changes.communities,
            &self.cache.communities,
            uuid,
            Key::Community(uuid),
        )
    }

    /// A mention set: the cached partition adjusted by this pass's changes.
    fn mention_set(
        &self,
        cached: Option<&BTreeSet<Uuid>>,
        key: Key,
        changed: impl Iterator<Item = (Uuid, bool)>,
    ) -> Vec<Uuid> {
        let mut set = match cached {
            Some(s) => s.clone(),
            None => {
                self.miss(key);
                BTreeSet::new()
            }
        };
        for (other, present) in changed {
            if present {
                set.insert(other);
            } else {
                set.remove(&other);
            }
        }
        set.into_iter().collect()
    }
}

impl GraphRecords for Overlay<'_> {
    fn episode(&self, uuid: Uuid) -> Option<Episode> {
        self.current(
            &self.changes.episodes,
            &self.cache.episodes,
            uuid,
            Key::Episode(uuid),
        )
    }

    fn entity(&self, uuid: Uuid) -> Option<Entity> {
        self.current_entity(uuid)
    }

    fn fact(&self, uuid: Uuid) -> Option<Fact> {
        self.current_fact(uuid)
    }

    fn saga(&self, uuid: Uuid) -> Option<Saga> {
        self.current(
            &self.changes.sagas,
            &self.cache.sagas,
            uuid,
            Key::Saga(uuid),
        )
    }

    fn saga_of_episode(&self, episode: Uuid) -> Option<Uuid> {
        if let Some(v) = self.changes.saga_of_episode.get(&episode) {
            return *v;
        }
        match self.cache.saga_of_episode.get(&episode) {
            Some(v) => *v,
            None => {
                self.miss(Key::SagaOfEpisode(episode));
                None
            }
        }
    }

    fn community(&self, uuid: Uuid) -> Option<Community> {
        self.current_community(uuid)
    }

    fn mentioned_entities(&self, episode: Uuid) -> Vec<Uuid> {
        let changed = self
            .changes
            .mentions
            .range((episode, Uuid::nil())..=(episode, Uuid::max()))
            .map(|((_, entity), present)| (*entity, *present));
        self.mention_set(
            self.cache.mentions.get(&episode),
            Key::Mentions(episode),
            changed,
        )
    }

    fn mentioning_episodes(&self, entity: Uuid) -> Vec<Uuid> {
        let changed = self
            .changes
            .mentions
            .iter()
            .filter(|((_, e), _)| *e == entity)
            .map(|((episode, _), present)| (*episode, *present));
        self.mention_set(
            self.cache.mentioned_by.get(&entity),
            Key::MentionedBy(entity),
            changed,
        )
    }

    fn is_applied(&self, event_id: Uuid) -> bool {
        let Some(episode) = self.event_episodes.get(&event_id).copied() else {
            // the fold only asks about the batch's own events
            return false;
        };
        if self.changes.applied.contains(&(episode, event_id)) {
            return true;
        }
        match self.cache.applied.get(&episode) {
            Some(set) => set.contains(&event_id),
            None => {
                self.miss(Key::Applied(episode));
                false
            }
        }
    }

    fn put_episode(&mut self, episode: Episode) {
        // read for its old time-index key
        let _ = self.episode(episode.uuid);
        self.changes.touched.episodes.insert(episode.uuid);
        self.changes.episodes.insert(episode.uuid, Some(episode));
    }

    fn remove_episode(&mut self, uuid: Uuid) {
        if self.episode(uuid).is_some() {
            self.changes.touched.episodes.insert(uuid);
            self.changes.episodes.insert(uuid, None);
        }
    }

    fn put_entity(&mut self, mut entity: Entity) {
        // As in the embedded store, a put without an embedding keeps the stored one.
        let old = self.current_entity(entity.uuid);
        if entity.name_embedding.is_none() {
            entity.name_embedding = old.and_then(|o| o.name_embedding);
        }
        self.changes.touched.entities.insert(entity.uuid);
        self.changes.entities.insert(entity.uuid, Some(entity));
    }

    fn remove_entity(&mut self, uuid: Uuid) {
        if self.current_entity(uuid).is_some() {
            self.changes.touched.entities.insert(uuid);
            self.changes.entities.insert(uuid, None);
        }
    }

    fn put_fact(&mut self, mut fact: Fact) {
        let old = self.current_fact(fact.uuid);
        if fact.fact_embedding.is_none() {
            fact.fact_embedding = old.and_then(|o| o.fact_embedding);
        }
        self.changes.touched.facts.insert(fact.uuid);
        self.changes.facts.insert(fact.uuid, Some(fact));
    }

    fn remove_fact(&mut self, uuid: Uuid) {
        if self.current_fact(uuid).is_some() {
            self.changes.touched.facts.insert(uuid);
            self.changes.facts.insert(uuid, None);
        }
    }

    fn put_saga(&mut self, saga: Saga) {
        // Only the episodes that join or leave change saga_of_episode, so a
        // long saga does not rewrite its whole index on every link.
        let old = self.saga(saga.uuid);
        let before: BTreeSet<Uuid> = old.iter().flat_map(|o| o.episodes.clone()).collect();
        let after: BTreeSet<Uuid> = saga.episodes.iter().copied().collect();
        for left in before.difference(&after) {
            self.changes.saga_of_episode.insert(*left, None);
        }
        for joined in after.difference(&before) {
            self.changes
                .saga_of_episode
                .insert(*joined, Some(saga.uuid));
        }
        self.changes.sagas.insert(saga.uuid, Some(saga));
    }

    fn put_community(&mut self, mut community: Community) {
        let old = self.current_community(community.uuid);
        if community.name_embedding.is_none() {
            community.name_embedding = old.and_then(|o| o.name_embedding);
        }
        self.changes.touched.communities.insert(community.uuid);
        self.changes
            .communities
            .insert(community.uuid, Some(community));
    }

    fn remove_community(&mut self, uuid: Uuid) {
        self.changes.touched.communities.insert(uuid);
        if self.current_community(uuid).is_some() {
            self.changes.communities.insert(uuid, None);
        }
    }

    fn add_mentions(&mut self, episode: Uuid, entities: &[Uuid]) {
        for entity in entities {
            self.changes.mentions.insert((episode, *entity), true);
            self.changes.touched.entities.insert(*entity);
        }
    }

    fn remove_mentions(&mut self, episode: Uuid) {
        for entity in self.mentioned_entities(episode) {
            self.changes.mentions.insert((episode, entity), false);
            self.changes.touched.entities.insert(entity);
        }
    }

    fn mark_applied(&mut self, event_id: Uuid) {
        if let Some(episode) = self.event_episodes.get(&event_id) {
            self.changes.applied.insert((*episode, event_id));
        }
    }
}
