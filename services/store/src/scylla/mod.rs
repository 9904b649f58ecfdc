//! The ScyllaDB graph store: the projection of distributed mode.
//!
//! Same behaviour as [`crate::EmbeddedStore`], checked by the same
//! conformance suite: records are folded through the one `evolve` fold
//! (over an [`overlay`] of rows read ahead, since the fold is synchronous),
//! and each record's rows, applied event ids and new position are written
//! in one logged batch, so a record is applied entirely or not at all and a
//! restarted projector resumes from the stored positions. Writes are
//! upserts of final values keyed by event-derived ids: applying a record
//! again, or the same decision at another offset, leaves the tables as
//! they are.
//!
//! One process applies to a keyspace at a time (the projector owns its
//! graph-events partitions); reads may come from anywhere.
//!
//! The schema lives in `schemas/cql/schema.cql` and is applied by
//! [`migrate`] (`chronicle --store scylla://HOST:PORT/KEYSPACE migrate`).

mod backend;
mod config;
mod cql;
mod errors;
#[cfg(test)]
mod memory;
mod overlay;
mod plan;
mod rows;
mod schema;
mod statements;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chronicle_engine::evolve::apply_batch;
use chronicle_model::{
    Community, Entity, Episode, EventBatch, Fact, GroupId, LogPosition, Saga, Timestamp,
};
use futures::{StreamExt, TryStreamExt};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::policies::retry::DefaultRetryPolicy;
use scylla::policies::timestamp_generator::MonotonicTimestampGenerator;
use uuid::Uuid;

pub use config::{
    Replication, ScyllaConfig, parse_consistency, parse_contact_points, validate_keyspace,
};
pub use schema::{SCHEMA_TEMPLATE, migrate, schema_statements};
pub use scylla::client::session::Session;
pub use scylla::statement::Consistency;

use self::backend::Backend;
use self::cql::CqlBackend;
use self::overlay::{Cache, Changes, Key, Overlay, keys_named_by};
use self::plan::{Mutation, count_changes, plan};
use self::rows::{
    CommunityRow, EntityRow, EpisodeRow, FactRow, GROUP_SHARDS, KIND_COMMUNITY, KIND_ENTITY,
    KIND_EPISODE, KIND_FACT, KIND_SAGA, SagaRow, group_shard, month_bucket,
};
use crate::{ApplyOutcome, GraphStore, Neighbour, Positions, StoreError, Totals, Touched};

/// Passes of the fold over one record before giving up; a retraction, the
/// deepest walk, needs about four.
const MAX_PASSES: usize = 32;

/// Opens a driver session: token-aware routing (preferring
/// `local_datacenter`), the configured consistency and timeout, the
/// default retry policy (which retries idempotent requests only; every
/// request of the store is marked idempotent), and client-side monotonic
/// write timestamps so a delete is never overtaken by an earlier insert.
pub async fn open_session(config: &ScyllaConfig) -> Result<Session, StoreError> {
    let mut policy = DefaultPolicy::builder().token_aware(true);
    if let Some(dc) = &config.local_datacenter {
        policy = policy
            .prefer_datacenter(dc.clone())
            .permit_dc_failover(false);
    }
    let profile = ExecutionProfile::builder()
        .consistency(config.consistency)
        .request_timeout(Some(config.request_timeout))
        .load_balancing_policy(policy.build())
        .retry_policy(Arc::new(DefaultRetryPolicy::new()))
        .build();
    let mut builder = SessionBuilder::new()
        .known_nodes(&config.contact_points)
        .default_execution_profile_handle(profile.into_handle())
        .connection_timeout(config.connect_timeout)
        .schema_agreement_timeout(config.schema_timeout)
        .timestamp_generator(Arc::new(MonotonicTimestampGenerator::new()));
    if let Some((user, password)) = &config.credentials {
        builder = builder.user(user, password);
    }
    builder.build().await.map_err(errors::new_session)
}

/// The projected graph in a ScyllaDB keyspace.
pub struct ScyllaStore {
    backend: Arc<dyn Backend>,
    label: String,
    read_concurrency: usize,
    /// Groups whose `groups` row this process has written (or read).
    known_groups: Mutex<HashSet<GroupId>>,
    /// `apply` calls run one at a time: each reads positions first.
    apply_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ScyllaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScyllaStore({})", self.label)
    }
}

/// A row (or partition) read for the fold's cache, with its key.
enum Loaded {
    Episode(Uuid, Option<Episode>),
    Entity(Uuid, Option<Entity>),
    Fact(Uuid, Option<Fact>),
    Saga(Uuid, Option<Saga>),
    Community(Uuid, Option<Community>),
    SagaOfEpisode(Uuid, Option<Uuid>),
    Mentions(Uuid, BTreeSet<Uuid>),
    MentionedBy(Uuid, BTreeSet<Uuid>),
    Applied(Uuid, BTreeSet<Uuid>),
}

impl ScyllaStore {
    /// Connects to the cluster and prepares the statements of
    /// `config.keyspace`, which must have been migrated.
    pub async fn connect(config: &ScyllaConfig) -> Result<Self, StoreError> {
        let session = Arc::new(open_session(config).await?);
        Self::with_session(session, config).await
    }

    /// A store on an existing session (sessions are expensive; one can serve
    /// several keyspaces).
    pub async fn with_session(
        session: Arc<Session>,
        config: &ScyllaConfig,
    ) -> Result<Self, StoreError> {
        if !matches!(
            config.consistency,
            Consistency::Quorum
                | Consistency::LocalQuorum
                | Consistency::EachQuorum
                | Consistency::All
        ) {
            tracing::warn!(
                consistency = %config.consistency,
                "below quorum, a restarted projector may read rows older than its own last writes; \
                 use LOCAL_QUORUM unless every keyspace replica is local"
            );
        }
        let backend = CqlBackend::prepare(session, config).await?;
        let label = format!("{}/{}", config.contact_points.join(","), config.keyspace);
        Ok(Self::from_backend(
            Arc::new(backend),
            label,
            config.read_concurrency,
        ))
    }

    fn from_backend(backend: Arc<dyn Backend>, label: String, read_concurrency: usize) -> Self {
        ScyllaStore {
            backend,
            label,
            read_concurrency: read_concurrency.max(1),
            known_groups: Mutex::new(HashSet::new()),
            apply_lock: tokio::sync::Mutex::new(()),
        }
    }

    fn group_known(&self, g: &GroupId) -> bool {
        self.known_groups
            .lock()
            .map(|set| set.contains(g))
            .unwrap_or(false)
    }

    fn remember_group(&self, g: &GroupId) {
        if let Ok(mut set) = self.known_groups.lock() {
            set.insert(g.clone());
        }
    }

    async fn fetch(&self, g: &str, key: Key) -> Result<Loaded, StoreError> {
        let b = &self.backend;
        Ok(match key {
            Key::Episode(u) => Loaded::Episode(u, self.read_episode(g, u).await?),
            Key::Entity(u) => Loaded::Entity(u, self.read_entity(g, u).await?),
            Key::Fact(u) => Loaded::Fact(u, self.read_fact(g, u).await?),
            Key::Saga(u) => Loaded::Saga(u, self.read_saga(g, u).await?),
            Key::Community(u) => Loaded::Community(u, self.read_community(g, u).await?),
            Key::SagaOfEpisode(u) => Loaded::SagaOfEpisode(u, b.saga_of_episode(g, u).await?),
            Key::Mentions(u) => Loaded::Mentions(u, b.mentions(g, u).await?.into_iter().collect()),
            Key::MentionedBy(u) => {
                Loaded::MentionedBy(u, b.mentioned_by(g, u).await?.into_iter().collect())
            }
            Key::Applied(u) => {
                Loaded::Applied(u, b.applied_events(g, u).await?.into_iter().collect())
            }
        })
    }

    /// Reads every key of `keys` not cached yet, `read_concurrency` at a time.
    async fn load(
        &self,
        g: &GroupId,
        cache: &mut Cache,
        keys: BTreeSet<Key>,
    ) -> Result<(), StoreError> {
        let wanted: Vec<Key> = keys.into_iter().filter(|k| !cache.has(k)).collect();
        let loaded: Vec<Loaded> = futures::stream::iter(wanted)
            .map(|k| self.fetch(g.as_str(), k))
            .buffer_unordered(self.read_concurrency)
            .try_collect()
            .await?;
        for value in loaded {
            match value {
                Loaded::Episode(u, v) => {
                    cache.episodes.insert(u, v);
                }
                Loaded::Entity(u, v) => {
                    cache.entities.insert(u, v);
                }
                Loaded::Fact(u, v) => {
                    cache.facts.insert(u, v);
                }
                Loaded::Saga(u, v) => {
                    cache.sagas.insert(u, v);
                }
                Loaded::Community(u, v) => {
                    cache.communities.insert(u, v);
                }
                Loaded::SagaOfEpisode(u, v) => {
                    cache.saga_of_episode.insert(u, v);
                }
                Loaded::Mentions(u, s) => {
                    cache.mentions.insert(u, s);
                }
                Loaded::MentionedBy(u, s) => {
                    cache.mentioned_by.insert(u, s);
                }
                Loaded::Applied(u, s) => {
                    cache.applied.insert(u, s);
                }
            }
        }
        Ok(())
    }

    /// Folds one record over the cache: reads what the fold misses and
    /// folds again until a pass misses nothing.
    async fn fold(
        &self,
        cache: &mut Cache,
        batch: &EventBatch,
    ) -> Result<(Changes, usize, usize), StoreError> {
        let event_episodes: HashMap<Uuid, Uuid> = batch
            .events
            .iter()
            .map(|e| (e.event_id, e.episode_uuid))
            .collect();
        let mut wanted = keys_named_by(batch);
        for pass in 1..=MAX_PASSES {
            self.load(&batch.group_id, cache, wanted).await?;
            let mut overlay = Overlay::new(cache, &event_episodes);
            let events_applied = apply_batch(&mut overlay, batch);
            let (changes, misses) = overlay.finish();
            if misses.is_empty() {
                return Ok((changes, events_applied, pass));
            }
            wanted = misses;
        }
        Err(StoreError::Internal(format!(
            "the fold of decision {} still needed unread rows after {MAX_PASSES} passes",
            batch.command_uuid
        )))
    }

    async fn apply_now(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError> {
        let mut next = self.positions().await?;
        let mut caches: HashMap<GroupId, Cache> = HashMap::new();
        let mut outcomes = Vec::with_capacity(records.len());
        for (position, batch) in records {
            if position.offset < next.get(&position.partition).copied().unwrap_or(0) {
                outcomes.push(ApplyOutcome {
                    group_id: batch.group_id.clone(),
                    applied: false,
                    events_applied: 0,
                    touched: Touched::default(),
                });
                continue;
            }
            let cache = caches.entry(batch.group_id.clone()).or_default();
            let (mut changes, events_applied, passes) = self.fold(cache, batch).await?;
            let mut planned = plan(&batch.group_id, cache, &changes);
            let mut totals = match cache.totals.take() {
                Some(t) => t,
                None => self.stored_totals(batch.group_id.as_str()).await?,
            };
            count_changes(&mut totals, cache, &changes);
            totals.record(batch);
            planned.mutations.push(Mutation::Totals {
                group: batch.group_id.as_str().to_owned(),
                totals: serde_json::to_string(&totals).expect("totals serialize"),
            });
            let new_group = !self.group_known(&batch.group_id);
            if new_group {
                planned.mutations.push(Mutation::Group {
                    shard: group_shard(batch.group_id.as_str()),
                    group: batch.group_id.as_str().to_owned(),
                });
            }
            planned.mutations.push(position_row(*position)?);
            self.backend.write(&planned.mutations).await?;
            tracing::debug!(
                group = %batch.group_id,
                partition = position.partition,
                offset = position.offset,
                events_applied,
                passes,
                rows = planned.mutations.len(),
                "applied record to scylla"
            );
            if new_group {
                self.remember_group(&batch.group_id);
            }
            let touched = std::mem::take(&mut changes.touched);
            cache.commit(changes);
            cache.buckets.extend(planned.buckets);
            cache.totals = Some(totals);
            next.insert(position.partition, position.offset + 1);
            outcomes.push(ApplyOutcome {
                group_id: batch.group_id.clone(),
                applied: true,
                events_applied,
                touched,
            });
        }
        Ok(outcomes)
    }

    /// Records of `ids`, in the order of `ids`, skipping ids without a row.
    async fn read_all<T, F, Fut>(&self, ids: Vec<Uuid>, read: F) -> Result<Vec<T>, StoreError>
    where
        F: Fn(Uuid) -> Fut,
        Fut: std::future::Future<Output = Result<Option<T>, StoreError>>,
    {
        futures::stream::iter(ids)
            .map(read)
            .buffered(self.read_concurrency)
            .try_filter_map(|x| async move { Ok(x) })
            .try_collect()
            .await
    }

    /// Every listed `(uuid, is_current)` of a kind in a group, by uuid.
    async fn listed(
        &self,
        g: &GroupId,
        kind: &'static str,
    ) -> Result<Vec<(Uuid, Option<bool>)>, StoreError> {
        let buckets = self.backend.buckets(g.as_str(), kind).await?;
        let parts: Vec<Vec<(Uuid, Option<bool>)>> = futures::stream::iter(buckets)
            .map(|b| self.backend.records(g.as_str(), kind, b))
            .buffer_unordered(self.read_concurrency.min(16))
            .try_collect()
            .await?;
        let mut all: Vec<_> = parts.into_iter().flatten().collect();
        all.sort();
        all.dedup_by_key(|(u, _)| *u);
        Ok(all)
    }

    async fn listed_ids(&self, g: &GroupId, kind: &'static str) -> Result<Vec<Uuid>, StoreError> {
        Ok(self
            .listed(g, kind)
            .await?
            .into_iter()
            .map(|(u, _)| u)
            .collect())
    }

    /// Episode `(valid_at, uuid)` keys from `from` on (all when `None`):
    /// newest first with `valid_at <= from`, or oldest first with
    /// `valid_at >= from`; ties in uuid order the same way, as the embedded
    /// store; at most `limit`.
    async fn episode_keys(
        &self,
        g: &GroupId,
        from: Option<Timestamp>,
        newest_first: bool,
        limit: usize,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        let g = g.as_str();
        let edge = from.map(Timestamp::as_micros);
        let first = from.map(month_bucket);
        let mut buckets = self.backend.buckets(g, KIND_EPISODE).await?;
        buckets.sort_unstable();
        buckets.dedup();
        if newest_first {
            buckets.reverse();
        }
        let reached = |b: &i32| first.is_none_or(|f| if newest_first { *b <= f } else { *b >= f });
        let mut picked: Vec<(i64, Uuid)> = Vec::new();
        for bucket in buckets.into_iter().filter(reached) {
            let want = limit - picked.len();
            let n = i32::try_from(want).unwrap_or(i32::MAX);
            let from = edge.unwrap_or(if newest_first { i64::MAX } else { i64::MIN });
            let mut rows = (self.backend)
                .episodes_from(g, bucket, from, newest_first, n)
                .await?;
            if rows.len() >= want
                && let Some(&(boundary, _)) = rows.last()
            {
                // The server orders equal times by its own uuid order: read
                // every row at the boundary time and choose here.
                rows.retain(|(t, _)| *t != boundary);
                rows.extend(self.backend.episodes_at(g, bucket, boundary).await?);
            }
            rows.sort_unstable();
            if newest_first {
                rows.reverse();
            }
            rows.truncate(want);
            picked.extend(rows);
            if picked.len() >= limit {
                break;
            }
        }
        Ok(picked)
    }

    async fn read_entity(&self, g: &str, u: Uuid) -> Result<Option<Entity>, StoreError> {
        self.backend
            .entity(g, u)
            .await?
            .map(EntityRow::into_model)
            .transpose()
    }

    async fn read_fact(&self, g: &str, u: Uuid) -> Result<Option<Fact>, StoreError> {
        self.backend
            .fact(g, u)
            .await?
            .map(FactRow::into_model)
            .transpose()
    }

    async fn read_episode(&self, g: &str, u: Uuid) -> Result<Option<Episode>, StoreError> {
        self.backend
            .episode(g, u)
            .await?
            .map(EpisodeRow::into_model)
            .transpose()
    }

    async fn read_saga(&self, g: &str, u: Uuid) -> Result<Option<Saga>, StoreError> {
        self.backend
            .saga(g, u)
            .await?
            .map(SagaRow::into_model)
            .transpose()
    }

    async fn read_community(&self, g: &str, u: Uuid) -> Result<Option<Community>, StoreError> {
        self.backend
            .community(g, u)
            .await?
            .map(CommunityRow::into_model)
            .transpose()
    }

    /// Distinct fact ids at an entity (towards `other` only, when given), sorted.
    async fn fact_ids(
        &self,
        g: &str,
        entity: Uuid,
        other: Option<Uuid>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let ids: BTreeSet<Uuid> = self
            .backend
            .fact_ends(g, entity, other)
            .await?
            .into_iter()
            .map(|(_, fact)| fact)
            .collect();
        Ok(ids.into_iter().collect())
    }

    /// A group's stored totals (zero before its first record).
    async fn stored_totals(&self, g: &str) -> Result<Totals, StoreError> {
        match self.backend.totals(g).await? {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt(format!("totals of {g}: {e}"))),
            None => Ok(Totals::default()),
        }
    }
}

/// The `positions` row that follows `position`.
fn position_row(position: LogPosition) -> Result<Mutation, StoreError> {
    let partition = i32::try_from(position.partition).map_err(|_| {
        StoreError::Internal(format!(
            "log partition {} does not fit the positions table",
            position.partition
        ))
    })?;
    let next_offset = position
        .offset
        .checked_add(1)
        .and_then(|n| i64::try_from(n).ok())
        .ok_or_else(|| {
            StoreError::Internal(format!(
                "log offset {} does not fit the positions table",
                position.offset
            ))
        })?;
    Ok(Mutation::Position {
        partition,
        next_offset,
    })
}

fn sorted(mut ids: Vec<Uuid>) -> Vec<Uuid> {
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[async_trait]
impl GraphStore for ScyllaStore {
    async fn apply(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError> {
        let _one_at_a_time = self.apply_lock.lock().await;
        self.apply_now(records).await
    }

    /// Nothing to do: every write was acknowledged at the configured
    /// consistency, and the replicas' commit logs make it durable.
    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn positions(&self) -> Result<Positions, StoreError> {
        let mut out = Positions::new();
        for (partition, next) in self.backend.positions().await? {
            let (Ok(p), Ok(n)) = (u32::try_from(partition), u64::try_from(next)) else {
                return Err(StoreError::Corrupt(format!(
                    "position {partition} -> {next} is negative"
                )));
            };
            out.insert(p, n);
        }
        Ok(out)
    }

    async fn clear(&self) -> Result<(), StoreError> {
        let _no_apply = self.apply_lock.lock().await;
        self.backend.truncate().await?;
        if let Ok(mut set) = self.known_groups.lock() {
            set.clear();
        }
        Ok(())
    }

    async fn groups(&self) -> Result<Vec<GroupId>, StoreError> {
        let shards: Vec<Vec<String>> = futures::stream::iter(0..GROUP_SHARDS)
            .map(|s| self.backend.groups_in_shard(s))
            .buffer_unordered(GROUP_SHARDS as usize)
            .try_collect()
            .await?;
        let mut out = shards
            .into_iter()
            .flatten()
            .map(|g| {
                GroupId::new(g.as_str())
                    .map_err(|e| StoreError::Corrupt(format!("group_id `{g}`: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn episode(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Episode>, StoreError> {
        self.read_episode(group.as_str(), uuid).await
    }

    async fn entity(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Entity>, StoreError> {
        self.read_entity(group.as_str(), uuid).await
    }

    async fn fact(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Fact>, StoreError> {
        self.read_fact(group.as_str(), uuid).await
    }

    async fn community(
        &self,
        group: &GroupId,
        uuid: Uuid,
    ) -> Result<Option<Community>, StoreError> {
        self.read_community(group.as_str(), uuid).await
    }

    async fn saga(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Saga>, StoreError> {
        self.read_saga(group.as_str(), uuid).await
    }

    async fn entities_by_name(
        &self,
        group: &GroupId,
        normalized: &str,
    ) -> Result<Vec<Entity>, StoreError> {
        let g = group.as_str();
        let ids = sorted(self.backend.entity_ids_by_name(g, normalized).await?);
        self.read_all(ids, |u| self.read_entity(g, u)).await
    }

    async fn facts_between(
        &self,
        group: &GroupId,
        a: Uuid,
        b: Uuid,
    ) -> Result<Vec<Fact>, StoreError> {
        let g = group.as_str();
        let ids = self.fact_ids(g, a, Some(b)).await?;
        self.read_all(ids, |u| self.read_fact(g, u)).await
    }

    async fn facts_of_entity(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Fact>, StoreError> {
        let g = group.as_str();
        let ids = self.fact_ids(g, entity, None).await?;
        self.read_all(ids, |u| self.read_fact(g, u)).await
    }

    async fn neighbours(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Neighbour>, StoreError> {
        let mut out: Vec<Neighbour> = self
            .backend
            .fact_ends(group.as_str(), entity, None)
            .await?
            .into_iter()
            .map(|(other, fact)| Neighbour {
                fact,
                entity: other,
            })
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    async fn episodes_by_time(
        &self,
        group: &GroupId,
        before: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let g = group.as_str();
        let keys = self.episode_keys(group, before, true, limit).await?;
        let ids = keys.into_iter().map(|(_, u)| u).collect();
        self.read_all(ids, |u| self.read_episode(g, u)).await
    }

    async fn episodes_after(
        &self,
        group: &GroupId,
        after: Timestamp,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let g = group.as_str();
        let keys = self.episode_keys(group, Some(after), false, limit).await?;
        let ids = keys.into_iter().map(|(_, u)| u).collect();
        self.read_all(ids, |u| self.read_episode(g, u)).await
    }

    async fn mentions(&self, group: &GroupId, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        Ok(sorted(
            self.backend.mentions(group.as_str(), episode).await?,
        ))
    }

    async fn mentioning_episodes(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        Ok(sorted(
            self.backend.mentioned_by(group.as_str(), entity).await?,
        ))
    }

    async fn entities(&self, group: &GroupId) -> Result<Vec<Entity>, StoreError> {
        let ids = self.listed_ids(group, KIND_ENTITY).await?;
        self.read_all(ids, |u| self.read_entity(group.as_str(), u))
            .await
    }

    async fn facts(&self, group: &GroupId) -> Result<Vec<Fact>, StoreError> {
        let ids = self.listed_ids(group, KIND_FACT).await?;
        self.read_all(ids, |u| self.read_fact(group.as_str(), u))
            .await
    }

    async fn communities(&self, group: &GroupId) -> Result<Vec<Community>, StoreError> {
        let ids = self.listed_ids(group, KIND_COMMUNITY).await?;
        self.read_all(ids, |u| self.read_community(group.as_str(), u))
            .await
    }

    async fn sagas(&self, group: &GroupId) -> Result<Vec<Saga>, StoreError> {
        let ids = self.listed_ids(group, KIND_SAGA).await?;
        self.read_all(ids, |u| self.read_saga(group.as_str(), u))
            .await
    }

    async fn totals(&self, group: Option<&GroupId>) -> Result<Totals, StoreError> {
        let groups = match group {
            Some(g) => vec![g.clone()],
            None => self.groups().await?,
        };
        let mut sum = Totals::default();
        for g in &groups {
            sum.merge(&self.stored_totals(g.as_str()).await?);
        }
        Ok(sum)
    }
}
