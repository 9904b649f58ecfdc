//! An in-memory model of the CQL tables (tests only): each table a sorted
//! map from its primary key, upserts merging `unset` cells, deletes by
//! primary key — the semantics of the statements in `statements.rs`.
//! It lets the unit tests run the store's whole logic, conformance suite
//! included, without a node; it does not stand in for testing against one.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use uuid::Uuid;

use super::backend::Backend;
use super::plan::Mutation;
use super::rows::{CommunityRow, EntityRow, EpisodeRow, FactRow, SagaRow};
use crate::StoreError;

type G = String;

#[derive(Default)]
struct Tables {
    groups: BTreeMap<(i16, G), ()>,
    positions: BTreeMap<i32, i64>,
    totals: BTreeMap<G, String>,
    applied: BTreeMap<(G, Uuid, Uuid), ()>,
    episodes: BTreeMap<(G, Uuid), EpisodeRow>,
    episodes_by_time: BTreeMap<(G, i32, i64, Uuid), ()>,
    entities: BTreeMap<(G, Uuid), EntityRow>,
    entities_by_name: BTreeMap<(G, String, Uuid), ()>,
    facts: BTreeMap<(G, Uuid), FactRow>,
    facts_by_entity: BTreeMap<(G, Uuid, Uuid, Uuid), bool>,
    mentions: BTreeMap<(G, Uuid, Uuid), ()>,
    mentioned_by: BTreeMap<(G, Uuid, Uuid), ()>,
    sagas: BTreeMap<(G, Uuid), SagaRow>,
    saga_of_episode: BTreeMap<(G, Uuid), Uuid>,
    communities: BTreeMap<(G, Uuid), CommunityRow>,
    records: BTreeMap<(G, String, i32, Uuid), Option<bool>>,
    buckets: BTreeMap<(G, String, i32), ()>,
}

/// The tables in memory, with counters of what was sent.
#[derive(Default)]
pub(crate) struct MemoryBackend {
    tables: Mutex<Tables>,
    /// Batches written so far.
    pub batches: Mutex<Vec<Vec<Mutation>>>,
    /// Fail the next `write` with this many failures left (fault injection).
    pub fail_writes: Mutex<u32>,
}

impl MemoryBackend {
    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().expect("memory tables")
    }

    /// Every row of every table, as text (to compare two stores' contents).
    pub(crate) fn dump(&self) -> String {
        let t = self.tables();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            t.groups,
            t.positions,
            t.applied,
            t.episodes,
            t.episodes_by_time,
            t.entities,
            t.entities_by_name,
            t.facts,
            t.facts_by_entity,
            t.mentions,
            t.mentioned_by,
            t.sagas,
            t.saga_of_episode,
            t.communities,
            t.records,
            t.buckets,
            t.totals
        )
    }
}

fn slice<K: Ord + Clone, V, T>(
    map: &BTreeMap<K, V>,
    from: K,
    to: K,
    f: impl Fn(&K, &V) -> T,
) -> Vec<T> {
    map.range(from..=to).map(|(k, v)| f(k, v)).collect()
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn episode(&self, group: &str, uuid: Uuid) -> Result<Option<EpisodeRow>, StoreError> {
        Ok(self.tables().episodes.get(&(group.into(), uuid)).cloned())
    }
    async fn entity(&self, group: &str, uuid: Uuid) -> Result<Option<EntityRow>, StoreError> {
        Ok(self.tables().entities.get(&(group.into(), uuid)).cloned())
    }
    async fn fact(&self, group: &str, uuid: Uuid) -> Result<Option<FactRow>, StoreError> {
        Ok(self.tables().facts.get(&(group.into(), uuid)).cloned())
    }
    async fn saga(&self, group: &str, uuid: Uuid) -> Result<Option<SagaRow>, StoreError> {
        Ok(self.tables().sagas.get(&(group.into(), uuid)).cloned())
    }
    async fn community(&self, group: &str, uuid: Uuid) -> Result<Option<CommunityRow>, StoreError> {
        Ok(self
            .tables()
            .communities
            .get(&(group.into(), uuid))
            .cloned())
    }
    async fn entity_ids_by_name(&self, group: &str, name: &str) -> Result<Vec<Uuid>, StoreError> {
        let (g, n) = (group.to_owned(), name.to_owned());
        Ok(slice(
            &self.tables().entities_by_name,
            (g.clone(), n.clone(), Uuid::nil()),
            (g, n, Uuid::max()),
            |k, _| k.2,
        ))
    }
    async fn fact_ends(
        &self,
        group: &str,
        entity: Uuid,
        other: Option<Uuid>,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        let g = group.to_owned();
        let (lo, hi) = match other {
            Some(o) => (o, o),
            None => (Uuid::nil(), Uuid::max()),
        };
        Ok(slice(
            &self.tables().facts_by_entity,
            (g.clone(), entity, lo, Uuid::nil()),
            (g, entity, hi, Uuid::max()),
            |k, _| (k.2, k.3),
        ))
    }
    async fn mentions(&self, group: &str, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let g = group.to_owned();
        Ok(slice(
            &self.tables().mentions,
            (g.clone(), episode, Uuid::nil()),
            (g, episode, Uuid::max()),
            |k, _| k.2,
        ))
    }
    async fn mentioned_by(&self, group: &str, entity: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let g = group.to_owned();
        Ok(slice(
            &self.tables().mentioned_by,
            (g.clone(), entity, Uuid::nil()),
            (g, entity, Uuid::max()),
            |k, _| k.2,
        ))
    }
    async fn saga_of_episode(
        &self,
        group: &str,
        episode: Uuid,
    ) -> Result<Option<Uuid>, StoreError> {
        Ok(self
            .tables()
            .saga_of_episode
            .get(&(group.into(), episode))
            .copied())
    }
    async fn totals(&self, group: &str) -> Result<Option<String>, StoreError> {
        Ok(self.tables().totals.get(group).cloned())
    }
    async fn applied_events(&self, group: &str, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let g = group.to_owned();
        Ok(slice(
            &self.tables().applied,
            (g.clone(), episode, Uuid::nil()),
            (g, episode, Uuid::max()),
            |k, _| k.2,
        ))
    }
    async fn positions(&self) -> Result<Vec<(i32, i64)>, StoreError> {
        Ok(self
            .tables()
            .positions
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect())
    }
    async fn groups_in_shard(&self, shard: i16) -> Result<Vec<String>, StoreError> {
        Ok(self
            .tables()
            .groups
            .keys()
            .filter(|(s, _)| *s == shard)
            .map(|(_, g)| g.clone())
            .collect())
    }
    async fn buckets(&self, group: &str, kind: &str) -> Result<Vec<i32>, StoreError> {
        let (g, k) = (group.to_owned(), kind.to_owned());
        let mut out = slice(
            &self.tables().buckets,
            (g.clone(), k.clone(), i32::MIN),
            (g, k, i32::MAX),
            |k, _| k.2,
        );
        out.reverse(); // CLUSTERING ORDER BY (kind ASC, bucket DESC)
        Ok(out)
    }
    async fn records(
        &self,
        group: &str,
        kind: &str,
        bucket: i32,
    ) -> Result<Vec<(Uuid, Option<bool>)>, StoreError> {
        let (g, k) = (group.to_owned(), kind.to_owned());
        Ok(slice(
            &self.tables().records,
            (g.clone(), k.clone(), bucket, Uuid::nil()),
            (g, k, bucket, Uuid::max()),
            |k, v| (k.3, *v),
        ))
    }
    async fn episodes_from(
        &self,
        group: &str,
        bucket: i32,
        from: i64,
        newest_first: bool,
        limit: i32,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        let g = group.to_owned();
        let (lower, upper) = if newest_first {
            (i64::MIN, from)
        } else {
            (from, i64::MAX)
        };
        let mut rows = slice(
            &self.tables().episodes_by_time,
            (g.clone(), bucket, lower, Uuid::nil()),
            (g, bucket, upper, Uuid::max()),
            |k, _| (k.2, k.3),
        );
        if newest_first {
            rows.reverse();
        }
        rows.truncate(usize::try_from(limit).unwrap_or(0));
        Ok(rows)
    }
    async fn episodes_at(
        &self,
        group: &str,
        bucket: i32,
        at: i64,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        let g = group.to_owned();
        Ok(slice(
            &self.tables().episodes_by_time,
            (g.clone(), bucket, at, Uuid::nil()),
            (g, bucket, at, Uuid::max()),
            |k, _| (k.2, k.3),
        ))
    }

    async fn write(&self, mutations: &[Mutation]) -> Result<(), StoreError> {
        {
            let mut fail = self.fail_writes.lock().expect("fault counter");
            if *fail > 0 {
                *fail -= 1;
                return Err(StoreError::Request {
                    op: "writing a batch",
                    source: "injected write failure".into(),
                });
            }
        }
        let mut t = self.tables();
        for m in mutations {
            match m.clone() {
                Mutation::Episode(r) => {
                    t.episodes.insert((r.group_id.clone(), r.uuid), r);
                }
                Mutation::DeleteEpisode { group, uuid } => {
                    t.episodes.remove(&(group, uuid));
                }
                Mutation::EpisodeTime {
                    group,
                    bucket,
                    valid_at,
                    uuid,
                } => {
                    t.episodes_by_time
                        .insert((group, bucket, valid_at, uuid), ());
                }
                Mutation::DeleteEpisodeTime {
                    group,
                    bucket,
                    valid_at,
                    uuid,
                } => {
                    t.episodes_by_time.remove(&(group, bucket, valid_at, uuid));
                }
                Mutation::Entity(w) => {
                    let key = (w.group_id.clone(), w.uuid);
                    let row = w.stored(t.entities.get(&key));
                    t.entities.insert(key, row);
                }
                Mutation::DeleteEntity { group, uuid } => {
                    t.entities.remove(&(group, uuid));
                }
                Mutation::EntityName { group, name, uuid } => {
                    t.entities_by_name.insert((group, name, uuid), ());
                }
                Mutation::DeleteEntityName { group, name, uuid } => {
                    t.entities_by_name.remove(&(group, name, uuid));
                }
                Mutation::Fact(w) => {
                    let key = (w.group_id.clone(), w.uuid);
                    let row = w.stored(t.facts.get(&key));
                    t.facts.insert(key, row);
                }
                Mutation::DeleteFact { group, uuid } => {
                    t.facts.remove(&(group, uuid));
                }
                Mutation::FactEnd {
                    group,
                    entity,
                    other,
                    fact,
                    outgoing,
                } => {
                    t.facts_by_entity
                        .insert((group, entity, other, fact), outgoing);
                }
                Mutation::DeleteFactEnd {
                    group,
                    entity,
                    other,
                    fact,
                } => {
                    t.facts_by_entity.remove(&(group, entity, other, fact));
                }
                Mutation::Mention {
                    group,
                    episode,
                    entity,
                } => {
                    t.mentions.insert((group, episode, entity), ());
                }
                Mutation::DeleteMention {
                    group,
                    episode,
                    entity,
                } => {
                    t.mentions.remove(&(group, episode, entity));
                }
                Mutation::MentionedBy {
                    group,
                    entity,
                    episode,
                } => {
                    t.mentioned_by.insert((group, entity, episode), ());
                }
                Mutation::DeleteMentionedBy {
                    group,
                    entity,
                    episode,
                } => {
                    t.mentioned_by.remove(&(group, entity, episode));
                }
                Mutation::Saga(w) => {
                    let key = (w.group_id.clone(), w.uuid);
                    let row = w.stored(t.sagas.get(&key));
                    t.sagas.insert(key, row);
                }
                Mutation::SagaOfEpisode {
                    group,
                    episode,
                    saga,
                } => {
                    t.saga_of_episode.insert((group, episode), saga);
                }
                Mutation::DeleteSagaOfEpisode { group, episode } => {
                    t.saga_of_episode.remove(&(group, episode));
                }
                Mutation::Community(w) => {
                    let key = (w.group_id.clone(), w.uuid);
                    let row = w.stored(t.communities.get(&key));
                    t.communities.insert(key, row);
                }
                Mutation::DeleteCommunity { group, uuid } => {
                    t.communities.remove(&(group, uuid));
                }
                Mutation::Record {
                    group,
                    kind,
                    bucket,
                    uuid,
                    is_current,
                } => {
                    let key = (group, kind.to_owned(), bucket, uuid);
                    let old = t.records.get(&key).cloned();
                    let value = super::rows::merged(&is_current, old.as_ref());
                    t.records.insert(key, value);
                }
                Mutation::DeleteRecord {
                    group,
                    kind,
                    bucket,
                    uuid,
                } => {
                    t.records.remove(&(group, kind.to_owned(), bucket, uuid));
                }
                Mutation::Bucket {
                    group,
                    kind,
                    bucket,
                } => {
                    t.buckets.insert((group, kind.to_owned(), bucket), ());
                }
                Mutation::Applied {
                    group,
                    episode,
                    event,
                } => {
                    t.applied.insert((group, episode, event), ());
                }
                Mutation::Group { shard, group } => {
                    t.groups.insert((shard, group), ());
                }
                Mutation::Position {
                    partition,
                    next_offset,
                } => {
                    t.positions.insert(partition, next_offset);
                }
                Mutation::Totals { group, totals } => {
                    t.totals.insert(group, totals);
                }
            }
        }
        self.batches
            .lock()
            .expect("batch log")
            .push(mutations.to_vec());
        Ok(())
    }

    async fn truncate(&self) -> Result<(), StoreError> {
        *self.tables() = Tables::default();
        Ok(())
    }
}
