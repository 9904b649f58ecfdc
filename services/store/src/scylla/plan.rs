//! From a fold's changes to the rows to write: one logged batch per record.
//!
//! A record's changes become upserts of whole rows and deletes of index
//! rows that no longer apply, computed against the rows as they were
//! before the record. Each key is written at most once, so no batch holds
//! both a delete and an insert of one row (they would share a timestamp,
//! and the delete would win). Upserts carry final values, never increments
//! or list appends, so writing the same batch twice — a retry, or a
//! replay — leaves the tables as one write would.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_model::{Community, Entity, Episode, Fact, GroupId, Saga, normalize_name};
use scylla::serialize::SerializationError;
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use uuid::Uuid;

use super::overlay::{Cache, Changes};
use super::rows::{
    Cell, CommunityRow, CommunityWrite, EntityRow, EntityWrite, EpisodeRow, FactRow, FactWrite,
    KIND_COMMUNITY, KIND_ENTITY, KIND_EPISODE, KIND_FACT, KIND_SAGA, SagaRow, SagaWrite,
    month_bucket,
};
use super::statements::{GRAPH_EVENTS_LOG, Stmt};
use crate::Totals;

/// One row written or deleted; its [`Stmt`] and bound values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Mutation {
    Episode(EpisodeRow),
    DeleteEpisode {
        group: String,
        uuid: Uuid,
    },
    EpisodeTime {
        group: String,
        bucket: i32,
        valid_at: i64,
        uuid: Uuid,
    },
    DeleteEpisodeTime {
        group: String,
        bucket: i32,
        valid_at: i64,
        uuid: Uuid,
    },
    Entity(EntityWrite),
    DeleteEntity {
        group: String,
        uuid: Uuid,
    },
    EntityName {
        group: String,
        name: String,
        uuid: Uuid,
    },
    DeleteEntityName {
        group: String,
        name: String,
        uuid: Uuid,
    },
    Fact(FactWrite),
    DeleteFact {
        group: String,
        uuid: Uuid,
    },
    FactEnd {
        group: String,
        entity: Uuid,
        other: Uuid,
        fact: Uuid,
        outgoing: bool,
    },
    DeleteFactEnd {
        group: String,
        entity: Uuid,
        other: Uuid,
        fact: Uuid,
    },
    Mention {
        group: String,
        episode: Uuid,
        entity: Uuid,
    },
    DeleteMention {
        group: String,
        episode: Uuid,
        entity: Uuid,
    },
    MentionedBy {
        group: String,
        entity: Uuid,
        episode: Uuid,
    },
    DeleteMentionedBy {
        group: String,
        entity: Uuid,
        episode: Uuid,
    },
    Saga(SagaWrite),
    SagaOfEpisode {
        group: String,
        episode: Uuid,
        saga: Uuid,
    },
    DeleteSagaOfEpisode {
        group: String,
        episode: Uuid,
    },
    Community(CommunityWrite),
    DeleteCommunity {
        group: String,
        uuid: Uuid,
    },
    Record {
        group: String,
        kind: &'static str,
        bucket: i32,
        uuid: Uuid,
        is_current: Cell<bool>,
    },
    DeleteRecord {
        group: String,
        kind: &'static str,
        bucket: i32,
        uuid: Uuid,
    },
    Bucket {
        group: String,
        kind: &'static str,
        bucket: i32,
    },
    Applied {
        group: String,
        episode: Uuid,
        event: Uuid,
    },
    Group {
        shard: i16,
        group: String,
    },
    Position {
        partition: i32,
        next_offset: i64,
    },
    /// A group's running totals after the record (JSON).
    Totals {
        group: String,
        totals: String,
    },
}

impl Mutation {
    /// The statement that carries this mutation.
    pub(crate) fn stmt(&self) -> Stmt {
        match self {
            Mutation::Episode(_) => Stmt::InsertEpisode,
            Mutation::DeleteEpisode { .. } => Stmt::DeleteEpisode,
            Mutation::EpisodeTime { .. } => Stmt::InsertEpisodeTime,
            Mutation::DeleteEpisodeTime { .. } => Stmt::DeleteEpisodeTime,
            Mutation::Entity(_) => Stmt::InsertEntity,
            Mutation::DeleteEntity { .. } => Stmt::DeleteEntity,
            Mutation::EntityName { .. } => Stmt::InsertEntityName,
            Mutation::DeleteEntityName { .. } => Stmt::DeleteEntityName,
            Mutation::Fact(_) => Stmt::InsertFact,
            Mutation::DeleteFact { .. } => Stmt::DeleteFact,
            Mutation::FactEnd { .. } => Stmt::InsertFactEnd,
            Mutation::DeleteFactEnd { .. } => Stmt::DeleteFactEnd,
            Mutation::Mention { .. } => Stmt::InsertMention,
            Mutation::DeleteMention { .. } => Stmt::DeleteMention,
            Mutation::MentionedBy { .. } => Stmt::InsertMentionedBy,
            Mutation::DeleteMentionedBy { .. } => Stmt::DeleteMentionedBy,
            Mutation::Saga(_) => Stmt::InsertSaga,
            Mutation::SagaOfEpisode { .. } => Stmt::InsertSagaOfEpisode,
            Mutation::DeleteSagaOfEpisode { .. } => Stmt::DeleteSagaOfEpisode,
            Mutation::Community(_) => Stmt::InsertCommunity,
            Mutation::DeleteCommunity { .. } => Stmt::DeleteCommunity,
            Mutation::Record { .. } => Stmt::InsertRecord,
            Mutation::DeleteRecord { .. } => Stmt::DeleteRecord,
            Mutation::Bucket { .. } => Stmt::InsertBucket,
            Mutation::Applied { .. } => Stmt::InsertApplied,
            Mutation::Group { .. } => Stmt::InsertGroup,
            Mutation::Position { .. } => Stmt::InsertPosition,
            Mutation::Totals { .. } => Stmt::InsertTotals,
        }
    }
}

/// Values in the order of their statement's bind markers.
impl SerializeRow for Mutation {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter,
    ) -> Result<(), SerializationError> {
        match self {
            Mutation::Episode(row) => row.serialize(ctx, writer),
            Mutation::Entity(row) => row.serialize(ctx, writer),
            Mutation::Fact(row) => row.serialize(ctx, writer),
            Mutation::Saga(row) => row.serialize(ctx, writer),
            Mutation::Community(row) => row.serialize(ctx, writer),
            Mutation::DeleteEpisode { group, uuid }
            | Mutation::DeleteEntity { group, uuid }
            | Mutation::DeleteFact { group, uuid }
            | Mutation::DeleteCommunity { group, uuid } => {
                (group.as_str(), uuid).serialize(ctx, writer)
            }
            Mutation::EpisodeTime {
                group,
                bucket,
                valid_at,
                uuid,
            }
            | Mutation::DeleteEpisodeTime {
                group,
                bucket,
                valid_at,
                uuid,
            } => (group.as_str(), bucket, valid_at, uuid).serialize(ctx, writer),
            Mutation::EntityName { group, name, uuid }
            | Mutation::DeleteEntityName { group, name, uuid } => {
                (group.as_str(), name.as_str(), uuid).serialize(ctx, writer)
            }
            Mutation::FactEnd {
                group,
                entity,
                other,
                fact,
                outgoing,
            } => (group.as_str(), entity, other, fact, outgoing).serialize(ctx, writer),
            Mutation::DeleteFactEnd {
                group,
                entity,
                other,
                fact,
            } => (group.as_str(), entity, other, fact).serialize(ctx, writer),
            Mutation::Mention {
                group,
                episode,
                entity,
            }
            | Mutation::DeleteMention {
                group,
                episode,
                entity,
            } => (group.as_str(), episode, entity).serialize(ctx, writer),
            Mutation::MentionedBy {
                group,
                entity,
                episode,
            }
            | Mutation::DeleteMentionedBy {
                group,
                entity,
                episode,
            } => (group.as_str(), entity, episode).serialize(ctx, writer),
            Mutation::SagaOfEpisode {
                group,
                episode,
                saga,
            } => (group.as_str(), episode, saga).serialize(ctx, writer),
            Mutation::DeleteSagaOfEpisode { group, episode } => {
                (group.as_str(), episode).serialize(ctx, writer)
            }
            Mutation::Record {
                group,
                kind,
                bucket,
                uuid,
                is_current,
            } => (group.as_str(), *kind, bucket, uuid, is_current).serialize(ctx, writer),
            Mutation::DeleteRecord {
                group,
                kind,
                bucket,
                uuid,
            } => (group.as_str(), *kind, bucket, uuid).serialize(ctx, writer),
            Mutation::Bucket {
                group,
                kind,
                bucket,
            } => (group.as_str(), *kind, bucket).serialize(ctx, writer),
            Mutation::Applied {
                group,
                episode,
                event,
            } => (group.as_str(), episode, event).serialize(ctx, writer),
            Mutation::Group { shard, group } => (shard, group.as_str()).serialize(ctx, writer),
            Mutation::Position {
                partition,
                next_offset,
            } => (GRAPH_EVENTS_LOG, partition, next_offset).serialize(ctx, writer),
            Mutation::Totals { group, totals } => {
                (group.as_str(), totals.as_str()).serialize(ctx, writer)
            }
        }
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// The writes of one record.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// In the order they were planned (order inside a batch does not matter).
    pub mutations: Vec<Mutation>,
    /// `group_buckets` rows this plan writes, for the cache once written.
    pub buckets: BTreeSet<(&'static str, i32)>,
}

/// What `changes` write over the rows known in `cache` (the rows as they
/// were before the record).
pub(crate) fn plan(group: &GroupId, cache: &Cache, changes: &Changes) -> Plan {
    let mut p = Planner {
        g: group.as_str().to_owned(),
        cache,
        plan: Plan::default(),
    };
    for (uuid, new) in &changes.episodes {
        p.episode(*uuid, known(cache.episodes.get(uuid)), new.as_ref());
    }
    for (uuid, new) in &changes.entities {
        p.entity(*uuid, known(cache.entities.get(uuid)), new.as_ref());
    }
    for (uuid, new) in &changes.facts {
        p.fact(*uuid, known(cache.facts.get(uuid)), new.as_ref());
    }
    for new in changes.sagas.values().flatten() {
        p.saga(known(cache.sagas.get(&new.uuid)), new);
    }
    for (uuid, new) in &changes.communities {
        p.community(*uuid, known(cache.communities.get(uuid)), new.as_ref());
    }
    for (episode, saga) in &changes.saga_of_episode {
        p.saga_of_episode(*episode, *saga);
    }
    for ((episode, entity), present) in &changes.mentions {
        p.mention(*episode, *entity, *present);
    }
    for (episode, event) in &changes.applied {
        p.push(Mutation::Applied {
            group: p.g.clone(),
            episode: *episode,
            event: *event,
        });
    }
    p.plan
}

/// Moves a group's totals by one record's changes, each against the row
/// as it was before the record.
pub(crate) fn count_changes(totals: &mut Totals, cache: &Cache, changes: &Changes) {
    for (uuid, new) in &changes.episodes {
        totals.episode(known(cache.episodes.get(uuid)).is_some(), new.is_some());
    }
    for (uuid, new) in &changes.entities {
        totals.entity(known(cache.entities.get(uuid)).is_some(), new.is_some());
    }
    for (uuid, new) in &changes.facts {
        let was = known(cache.facts.get(uuid)).map(Fact::is_current);
        totals.fact(was, new.as_ref().map(Fact::is_current));
    }
    for (uuid, new) in &changes.sagas {
        totals.saga(known(cache.sagas.get(uuid)).is_some(), new.is_some());
    }
    for (uuid, new) in &changes.communities {
        totals.community(known(cache.communities.get(uuid)).is_some(), new.is_some());
    }
}

fn known<T>(cached: Option<&Option<T>>) -> Option<&T> {
    cached.and_then(Option::as_ref)
}

struct Planner<'a> {
    g: String,
    cache: &'a Cache,
    plan: Plan,
}

impl Planner<'_> {
    fn push(&mut self, m: Mutation) {
        self.plan.mutations.push(m);
    }

    fn bucket(&mut self, kind: &'static str, bucket: i32) {
        if !self.cache.buckets.contains(&(kind, bucket)) && self.plan.buckets.insert((kind, bucket))
        {
            let group = self.g.clone();
            self.push(Mutation::Bucket {
                group,
                kind,
                bucket,
            });
        }
    }

    /// Moves a `group_records` row from `old` `(bucket, is_current)` to `new`.
    fn listing(
        &mut self,
        kind: &'static str,
        uuid: Uuid,
        old: Option<(i32, Option<bool>)>,
        new: Option<(i32, Option<bool>)>,
    ) {
        if old == new {
            return;
        }
        if let Some((bucket, _)) = old
            && new.is_none_or(|(b, _)| b != bucket)
        {
            let group = self.g.clone();
            self.push(Mutation::DeleteRecord {
                group,
                kind,
                bucket,
                uuid,
            });
        }
        if let Some((bucket, current)) = new {
            let group = self.g.clone();
            self.push(Mutation::Record {
                group,
                kind,
                bucket,
                uuid,
                is_current: match current {
                    Some(c) => Cell::Set(Some(c)),
                    None => Cell::Unset,
                },
            });
            // a record already listed in this month implies the month's row
            if old.is_none_or(|(b, _)| b != bucket) {
                self.bucket(kind, bucket);
            }
        }
    }

    fn episode(&mut self, uuid: Uuid, old: Option<&Episode>, new: Option<&Episode>) {
        if old == new {
            return;
        }
        let group = self.g.clone();
        match new {
            Some(e) => self.push(Mutation::Episode(EpisodeRow::from_model(e))),
            None => self.push(Mutation::DeleteEpisode { group, uuid }),
        }
        let key = |e: &Episode| (month_bucket(e.valid_at), e.valid_at.as_micros());
        let (old_key, new_key) = (old.map(key), new.map(key));
        if old_key == new_key {
            return;
        }
        if let Some((bucket, valid_at)) = old_key {
            let group = self.g.clone();
            self.push(Mutation::DeleteEpisodeTime {
                group,
                bucket,
                valid_at,
                uuid,
            });
        }
        if let Some((bucket, valid_at)) = new_key {
            let group = self.g.clone();
            self.push(Mutation::EpisodeTime {
                group,
                bucket,
                valid_at,
                uuid,
            });
            self.bucket(KIND_EPISODE, bucket);
        }
    }

    fn entity(&mut self, uuid: Uuid, old: Option<&Entity>, new: Option<&Entity>) {
        if old == new {
            return;
        }
        let group = self.g.clone();
        match new {
            Some(e) => {
                let old_row = old.map(EntityRow::from_model);
                self.push(Mutation::Entity(
                    EntityRow::from_model(e).write(old_row.as_ref()),
                ));
            }
            None => self.push(Mutation::DeleteEntity { group, uuid }),
        }
        let name = |e: &Entity| normalize_name(&e.name);
        let (old_name, new_name) = (old.map(name), new.map(name));
        if old_name != new_name {
            if let Some(name) = old_name {
                let group = self.g.clone();
                self.push(Mutation::DeleteEntityName { group, name, uuid });
            }
            if let Some(name) = new_name {
                let group = self.g.clone();
                self.push(Mutation::EntityName { group, name, uuid });
            }
        }
        let listed = |e: &Entity| (month_bucket(e.created_at), None);
        self.listing(KIND_ENTITY, uuid, old.map(listed), new.map(listed));
    }

    fn fact(&mut self, uuid: Uuid, old: Option<&Fact>, new: Option<&Fact>) {
        if old == new {
            return;
        }
        let group = self.g.clone();
        match new {
            Some(f) => {
                let old_row = old.map(FactRow::from_model);
                self.push(Mutation::Fact(
                    FactRow::from_model(f).write(old_row.as_ref()),
                ));
            }
            None => self.push(Mutation::DeleteFact { group, uuid }),
        }
        // (entity, other, fact) -> outgoing; a self-loop is one row (target wins)
        let ends = |f: Option<&Fact>| -> BTreeMap<(Uuid, Uuid), bool> {
            let mut m = BTreeMap::new();
            if let Some(f) = f {
                m.insert((f.source_node_uuid, f.target_node_uuid), true);
                m.insert((f.target_node_uuid, f.source_node_uuid), false);
            }
            m
        };
        let (old_ends, new_ends) = (ends(old), ends(new));
        for (entity, other) in old_ends.keys().filter(|k| !new_ends.contains_key(k)) {
            let group = self.g.clone();
            self.push(Mutation::DeleteFactEnd {
                group,
                entity: *entity,
                other: *other,
                fact: uuid,
            });
        }
        for ((entity, other), outgoing) in &new_ends {
            if old_ends.get(&(*entity, *other)) != Some(outgoing) {
                let group = self.g.clone();
                self.push(Mutation::FactEnd {
                    group,
                    entity: *entity,
                    other: *other,
                    fact: uuid,
                    outgoing: *outgoing,
                });
            }
        }
        let listed = |f: &Fact| (month_bucket(f.created_at), Some(f.is_current()));
        self.listing(KIND_FACT, uuid, old.map(listed), new.map(listed));
    }

    fn saga(&mut self, old: Option<&Saga>, new: &Saga) {
        if old == Some(new) {
            return;
        }
        let old_row = old.map(SagaRow::from_model);
        self.push(Mutation::Saga(
            SagaRow::from_model(new).write(old_row.as_ref()),
        ));
        let listed = |s: &Saga| (month_bucket(s.created_at), None);
        self.listing(KIND_SAGA, new.uuid, old.map(listed), Some(listed(new)));
    }

    fn community(&mut self, uuid: Uuid, old: Option<&Community>, new: Option<&Community>) {
        if old == new {
            return;
        }
        let group = self.g.clone();
        match new {
            Some(c) => {
                let old_row = old.map(CommunityRow::from_model);
                self.push(Mutation::Community(
                    CommunityRow::from_model(c).write(old_row.as_ref()),
                ));
            }
            None => self.push(Mutation::DeleteCommunity { group, uuid }),
        }
        let listed = |c: &Community| (month_bucket(c.created_at), None);
        self.listing(KIND_COMMUNITY, uuid, old.map(listed), new.map(listed));
    }

    fn saga_of_episode(&mut self, episode: Uuid, saga: Option<Uuid>) {
        // unread rows are written anyway: the write is what they must hold
        if self.cache.saga_of_episode.get(&episode) == Some(&saga) {
            return;
        }
        let group = self.g.clone();
        match saga {
            Some(saga) => self.push(Mutation::SagaOfEpisode {
                group,
                episode,
                saga,
            }),
            None => self.push(Mutation::DeleteSagaOfEpisode { group, episode }),
        }
    }

    fn mention(&mut self, episode: Uuid, entity: Uuid, present: bool) {
        let stored = self
            .cache
            .mentions
            .get(&episode)
            .map(|s| s.contains(&entity));
        if stored == Some(present) {
            return;
        }
        let group = self.g.clone();
        if present {
            self.push(Mutation::Mention {
                group: group.clone(),
                episode,
                entity,
            });
            self.push(Mutation::MentionedBy {
                group,
                entity,
                episode,
            });
        } else {
            self.push(Mutation::DeleteMention {
                group: group.clone(),
                episode,
                entity,
            });
            self.push(Mutation::DeleteMentionedBy {
                group,
                entity,
                episode,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_model::testing::{entity, fact, group, ts};

    fn stmts(p: &Plan) -> Vec<Stmt> {
        p.mutations.iter().map(Mutation::stmt).collect()
    }

    #[test]
    fn a_new_entity_writes_its_row_name_listing_and_bucket_once() {
        let g = group("tenant-a");
        let cache = Cache::default();
        let mut changes = Changes::default();
        let e = entity(&g, Uuid::from_u128(1), "Alice  Smith");
        changes.entities.insert(e.uuid, Some(e.clone()));
        let p = plan(&g, &cache, &changes);
        assert_eq!(
            stmts(&p),
            vec![
                Stmt::InsertEntity,
                Stmt::InsertEntityName,
                Stmt::InsertRecord,
                Stmt::InsertBucket
            ]
        );
        assert!(p.mutations.contains(&Mutation::EntityName {
            group: "tenant-a".into(),
            name: "alice smith".into(),
            uuid: e.uuid
        }));
        // already stored as is: nothing to write
        let mut cache = Cache::default();
        cache.entities.insert(e.uuid, Some(e.clone()));
        assert!(plan(&g, &cache, &changes).mutations.is_empty());
    }

    #[test]
    fn a_rename_moves_the_name_row_and_a_removal_drops_every_row() {
        let g = group("tenant-a");
        let old = entity(&g, Uuid::from_u128(1), "Alice");
        let mut cache = Cache::default();
        cache.entities.insert(old.uuid, Some(old.clone()));
        let mut renamed = old.clone();
        renamed.name = "Alicia".into();
        let mut changes = Changes::default();
        changes.entities.insert(old.uuid, Some(renamed));
        assert_eq!(
            stmts(&plan(&g, &cache, &changes)),
            vec![
                Stmt::InsertEntity,
                Stmt::DeleteEntityName,
                Stmt::InsertEntityName
            ]
        );
        changes.entities.insert(old.uuid, None);
        assert_eq!(
            stmts(&plan(&g, &cache, &changes)),
            vec![
                Stmt::DeleteEntity,
                Stmt::DeleteEntityName,
                Stmt::DeleteRecord
            ]
        );
    }

    #[test]
    fn an_invalidation_rewrites_the_fact_and_its_listing_but_not_its_ends() {
        let g = group("tenant-a");
        let mut f = fact(
            &g,
            Uuid::from_u128(9),
            Uuid::from_u128(1),
            Uuid::from_u128(2),
        );
        (f.invalid_at, f.expired_at, f.invalidated_by) = (None, None, None);
        let mut cache = Cache::default();
        cache.facts.insert(f.uuid, Some(f.clone()));
        let mut ended = f.clone();
        ended.invalid_at = Some(ts("2025-03-01T00:00:00Z"));
        ended.expired_at = Some(ts("2025-03-02T00:00:00Z"));
        let mut changes = Changes::default();
        changes.facts.insert(f.uuid, Some(ended));
        let p = plan(&g, &cache, &changes);
        assert_eq!(stmts(&p), vec![Stmt::InsertFact, Stmt::InsertRecord]);
        assert!(matches!(
            &p.mutations[1],
            Mutation::Record { is_current: Cell::Set(Some(false)), kind, .. } if *kind == KIND_FACT
        ));
        // a new fact: both ends, once each
        let p = plan(&g, &Cache::default(), &changes);
        let ends: Vec<_> = p
            .mutations
            .iter()
            .filter_map(|m| match m {
                Mutation::FactEnd {
                    entity, outgoing, ..
                } => Some((*entity, *outgoing)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ends,
            vec![(Uuid::from_u128(1), true), (Uuid::from_u128(2), false)]
        );
    }

    #[test]
    fn no_row_is_both_deleted_and_written() {
        let g = group("tenant-a");
        let mut cache = Cache::default();
        let f = fact(
            &g,
            Uuid::from_u128(9),
            Uuid::from_u128(1),
            Uuid::from_u128(2),
        );
        cache.facts.insert(f.uuid, Some(f.clone()));
        let mut moved = f.clone();
        moved.target_node_uuid = Uuid::from_u128(3);
        let mut changes = Changes::default();
        changes.facts.insert(f.uuid, Some(moved));
        changes
            .mentions
            .insert((Uuid::from_u128(5), Uuid::from_u128(1)), true);
        changes
            .mentions
            .insert((Uuid::from_u128(5), Uuid::from_u128(2)), false);
        cache
            .mentions
            .insert(Uuid::from_u128(5), [Uuid::from_u128(2)].into());
        let p = plan(&g, &cache, &changes);
        let mut seen = BTreeSet::new();
        for m in &p.mutations {
            let stmt = format!("{:?}", m.stmt());
            let table = stmt
                .trim_start_matches("Insert")
                .trim_start_matches("Delete")
                .to_owned();
            assert!(seen.insert((table, key_of(m))), "{m:?} planned twice");
        }
        assert!(p.mutations.contains(&Mutation::DeleteFactEnd {
            group: "tenant-a".into(),
            entity: Uuid::from_u128(2),
            other: Uuid::from_u128(1),
            fact: f.uuid
        }));
    }

    /// The primary key a mutation addresses (for the test above).
    fn key_of(m: &Mutation) -> Vec<String> {
        match m {
            Mutation::FactEnd {
                entity,
                other,
                fact,
                ..
            }
            | Mutation::DeleteFactEnd {
                entity,
                other,
                fact,
                ..
            } => vec![entity.to_string(), other.to_string(), fact.to_string()],
            Mutation::Mention {
                episode, entity, ..
            }
            | Mutation::DeleteMention {
                episode, entity, ..
            }
            | Mutation::MentionedBy {
                episode, entity, ..
            }
            | Mutation::DeleteMentionedBy {
                episode, entity, ..
            } => vec![episode.to_string(), entity.to_string()],
            other => vec![format!("{other:?}")],
        }
    }

    #[test]
    fn known_mentions_are_not_rewritten_and_buckets_are_written_once() {
        let g = group("tenant-a");
        let mut cache = Cache::default();
        cache
            .mentions
            .insert(Uuid::from_u128(5), [Uuid::from_u128(1)].into());
        cache.buckets.insert((KIND_ENTITY, 202501));
        let mut changes = Changes::default();
        changes
            .mentions
            .insert((Uuid::from_u128(5), Uuid::from_u128(1)), true);
        let mut a = entity(&g, Uuid::from_u128(1), "A");
        a.created_at = ts("2025-01-02T00:00:00Z");
        let mut b = entity(&g, Uuid::from_u128(2), "B");
        b.created_at = ts("2025-02-02T00:00:00Z");
        let mut c = entity(&g, Uuid::from_u128(3), "C");
        c.created_at = ts("2025-02-03T00:00:00Z");
        for e in [a, b, c] {
            changes.entities.insert(e.uuid, Some(e));
        }
        let p = plan(&g, &cache, &changes);
        assert_eq!(
            p.mutations
                .iter()
                .filter(|m| matches!(m, Mutation::Bucket { .. }))
                .count(),
            1
        );
        assert_eq!(p.buckets, [(KIND_ENTITY, 202502)].into());
        assert!(
            !p.mutations
                .iter()
                .any(|m| matches!(m, Mutation::Mention { .. }))
        );
    }
}
