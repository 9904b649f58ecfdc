//! The `GraphStore` port on the embedded store.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use chronicle_model::{
    Community, Entity, Episode, EventBatch, Fact, GroupId, LogPosition, Saga, Timestamp,
};
use redb::{Durability, ReadableTable};
use uuid::Uuid;

use super::{
    COMMUNITIES, ENTITIES, ENTITIES_BY_NAME, EmbeddedStore, FACTS, MENTIONED_BY, MENTIONS,
    POSITIONS, SAGAS, TOTALS, from_json, stored_totals,
};
use crate::{ApplyOutcome, GraphStore, Neighbour, Positions, StoreError, Totals};

fn group_str(g: &GroupId) -> &str {
    g.as_str()
}

#[async_trait]
impl GraphStore for EmbeddedStore {
    async fn apply(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError> {
        let records = records.to_vec();
        self.off_runtime(move |store| store.apply_now(&records))
            .await
    }

    async fn flush(&self) -> Result<(), StoreError> {
        if self.unflushed.swap(0, Ordering::Relaxed) == 0 {
            return Ok(());
        }
        self.off_runtime(|store| store.write(Durability::Immediate, |_| Ok(())))
            .await
    }

    async fn positions(&self) -> Result<Positions, StoreError> {
        self.read(|r| {
            let t = r.table(POSITIONS)?;
            let mut out = Positions::new();
            for row in t.iter().map_err(|x| r.e(x))? {
                let (k, v) = row.map_err(|x| r.e(x))?;
                out.insert(k.value(), v.value());
            }
            Ok(out)
        })
    }

    async fn clear(&self) -> Result<(), StoreError> {
        self.off_runtime(|store| store.clear_now()).await
    }

    async fn groups(&self) -> Result<Vec<GroupId>, StoreError> {
        self.read(|r| r.groups())
    }

    async fn episode(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Episode>, StoreError> {
        self.read(|r| r.episode(group_str(group), uuid))
    }

    async fn entity(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Entity>, StoreError> {
        self.read(|r| r.entity(group_str(group), uuid))
    }

    async fn fact(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Fact>, StoreError> {
        self.read(|r| r.fact(group_str(group), uuid))
    }

    async fn community(
        &self,
        group: &GroupId,
        uuid: Uuid,
    ) -> Result<Option<Community>, StoreError> {
        self.read(|r| r.community(group_str(group), uuid))
    }

    async fn saga(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Saga>, StoreError> {
        self.read(|r| r.record(SAGAS, group_str(group), uuid, "saga"))
    }

    async fn entities_by_name(
        &self,
        group: &GroupId,
        normalized: &str,
    ) -> Result<Vec<Entity>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            let t = r.table(ENTITIES_BY_NAME)?;
            let mut ids = Vec::new();
            for row in t
                .range((g, normalized, 0u128)..=(g, normalized, u128::MAX))
                .map_err(|x| r.e(x))?
            {
                let (k, _) = row.map_err(|x| r.e(x))?;
                ids.push(Uuid::from_u128(k.value().2));
            }
            ids.into_iter()
                .filter_map(|u| r.entity(g, u).transpose())
                .collect()
        })
    }

    async fn facts_between(
        &self,
        group: &GroupId,
        a: Uuid,
        b: Uuid,
    ) -> Result<Vec<Fact>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            r.fact_ids_of(g, a)?
                .into_iter()
                .filter(|n| n.entity == b)
                .filter_map(|n| r.fact(g, n.fact).transpose())
                .collect()
        })
    }

    async fn facts_of_entity(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Fact>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            let ids: BTreeSet<Uuid> = r
                .fact_ids_of(g, entity)?
                .into_iter()
                .map(|n| n.fact)
                .collect();
            ids.into_iter()
                .filter_map(|u| r.fact(g, u).transpose())
                .collect()
        })
    }

    async fn neighbours(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Neighbour>, StoreError> {
        self.read(|r| r.fact_ids_of(group_str(group), entity))
    }

    async fn episodes_by_time(
        &self,
        group: &GroupId,
        before: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError> {
        let upper = before.map_or(i64::MAX, |b| b.as_micros());
        self.read(|r| r.episodes_between(group_str(group), i64::MIN, upper, true, limit))
    }

    async fn episodes_after(
        &self,
        group: &GroupId,
        after: Timestamp,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError> {
        let lower = after.as_micros();
        self.read(|r| r.episodes_between(group_str(group), lower, i64::MAX, false, limit))
    }

    async fn mentions(&self, group: &GroupId, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        self.read(|r| r.multimap(MENTIONS, group_str(group), episode))
    }

    async fn mentioning_episodes(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.read(|r| r.multimap(MENTIONED_BY, group_str(group), entity))
    }

    async fn entities(&self, group: &GroupId) -> Result<Vec<Entity>, StoreError> {
        let group = group.clone();
        self.off_runtime(move |store| {
            store.read(|r| {
                let g = group.as_str();
                r.ids(ENTITIES, g)?
                    .into_iter()
                    .filter_map(|u| r.entity(g, u).transpose())
                    .collect()
            })
        })
        .await
    }

    async fn facts(&self, group: &GroupId) -> Result<Vec<Fact>, StoreError> {
        let group = group.clone();
        self.off_runtime(move |store| {
            store.read(|r| {
                let g = group.as_str();
                r.ids(FACTS, g)?
                    .into_iter()
                    .filter_map(|u| r.fact(g, u).transpose())
                    .collect()
            })
        })
        .await
    }

    async fn communities(&self, group: &GroupId) -> Result<Vec<Community>, StoreError> {
        let group = group.clone();
        self.off_runtime(move |store| {
            store.read(|r| {
                let g = group.as_str();
                r.ids(COMMUNITIES, g)?
                    .into_iter()
                    .filter_map(|u| r.community(g, u).transpose())
                    .collect()
            })
        })
        .await
    }

    async fn sagas(&self, group: &GroupId) -> Result<Vec<Saga>, StoreError> {
        let group = group.clone();
        self.off_runtime(move |store| {
            store.read(|r| {
                let g = group.as_str();
                r.ids(SAGAS, g)?
                    .into_iter()
                    .filter_map(|u| r.record(SAGAS, g, u, "saga").transpose())
                    .collect()
            })
        })
        .await
    }

    async fn totals(&self, group: Option<&GroupId>) -> Result<Totals, StoreError> {
        self.read(|r| {
            let t = r.table(TOTALS)?;
            match group {
                Some(g) => stored_totals(&t, g.as_str(), r.path),
                None => {
                    let mut sum = Totals::default();
                    for row in t.iter().map_err(|x| r.e(x))? {
                        let (_, v) = row.map_err(|x| r.e(x))?;
                        sum.merge(&from_json(v.value(), "totals")?);
                    }
                    Ok(sum)
                }
            }
        })
    }
}
