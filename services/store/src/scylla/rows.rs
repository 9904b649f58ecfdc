//! Rows of the record tables and their conversion to and from the model,
//! plus the bucket functions that place rows in partitions.
//!
//! Column types (see `schemas/cql/schema.cql`): instants are `bigint`
//! microseconds, embeddings `blob`s of little-endian f32, attributes JSON
//! `text`, owned lists `frozen<list<...>>`.

use chronicle_model::{
    Attributes, Community, Entity, Episode, EpisodeType, Fact, GroupId, Invalidation, Saga,
    Timestamp, embedding_to_bytes,
};
use scylla::frame::response::result::ColumnType;
use scylla::serialize::SerializationError;
use scylla::serialize::value::SerializeValue;
use scylla::serialize::writers::{CellWriter, WrittenCellProof};
use scylla::{DeserializeRow, SerializeRow};
use uuid::Uuid;

use crate::{StoreError, embedding_of};

/// `group_records.kind` / `group_buckets.kind` of each listed record kind.
pub(crate) const KIND_EPISODE: &str = "episode";
/// Entities.
pub(crate) const KIND_ENTITY: &str = "entity";
/// Facts.
pub(crate) const KIND_FACT: &str = "fact";
/// Sagas.
pub(crate) const KIND_SAGA: &str = "saga";
/// Communities.
pub(crate) const KIND_COMMUNITY: &str = "community";

/// Partitions of the `groups` table.
pub(crate) const GROUP_SHARDS: i16 = 16;

/// The month partition of an instant: `year * 100 + month` in UTC
/// (2025-02-14 → 202502), so buckets sort like time and read well in cqlsh.
pub(crate) fn month_bucket(t: Timestamp) -> i32 {
    let days = t.as_micros().div_euclid(86_400_000_000);
    let (year, month) = year_month_from_days(days);
    // years are 1..=9999 (Timestamp's range), so this fits easily
    (year * 100 + month) as i32
}

/// The civil (proleptic Gregorian) year and month of a day count since
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn year_month_from_days(days: i64) -> (i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month)
}

/// The `groups` partition of a group: FNV-1a of its bytes, mod 16. Stable
/// across versions and platforms (unlike `std`'s hasher).
pub(crate) fn group_shard(group: &str) -> i16 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in group.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % GROUP_SHARDS as u32) as i16
}

fn instant(micros: i64, what: &str) -> Result<Timestamp, StoreError> {
    Timestamp::from_micros(micros).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn instant_opt(micros: Option<i64>, what: &str) -> Result<Option<Timestamp>, StoreError> {
    micros.map(|m| instant(m, what)).transpose()
}

fn group(text: &str) -> Result<GroupId, StoreError> {
    GroupId::new(text).map_err(|e| StoreError::Corrupt(format!("group_id `{text}`: {e}")))
}

fn attributes(text: &str, what: &str) -> Result<Attributes, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn json(map: &Attributes) -> String {
    serde_json::Value::Object(map.clone()).to_string()
}

/// A bound value that may be left `unset` (the column keeps what it holds)
/// — the driver's `MaybeUnset`, comparable so plans can be tested.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell<T> {
    /// Leave the stored column as it is.
    Unset,
    /// Write this value (`None` writes null).
    Set(Option<T>),
}

impl<T: SerializeValue> SerializeValue for Cell<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        match self {
            Cell::Unset => Ok(writer.set_unset()),
            Cell::Set(v) => v.serialize(typ, writer),
        }
    }
}

/// A nullable column of an upsert: `null` only where it clears a value the
/// stored row has, otherwise `unset` — a null written over nothing would
/// leave a tombstone for no reason.
pub(crate) fn cell<T: Clone>(new: &Option<T>, old: Option<&Option<T>>) -> Cell<T> {
    match (new, old) {
        (None, None | Some(None)) => Cell::Unset,
        (new, _) => Cell::Set(new.clone()),
    }
}

/// What a stored column holds after an upsert of `cell` over `old`.
#[cfg(test)]
pub(crate) fn merged<T: Clone>(cell: &Cell<T>, old: Option<&Option<T>>) -> Option<T> {
    match cell {
        Cell::Set(v) => v.clone(),
        Cell::Unset => old.cloned().flatten(),
    }
}

/// A row of `episodes`.
#[derive(Clone, Debug, PartialEq, DeserializeRow, SerializeRow)]
pub(crate) struct EpisodeRow {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub source: String,
    pub source_description: String,
    pub content: String,
    pub valid_at: i64,
    pub created_at: i64,
    pub entity_edges: Option<Vec<Uuid>>,
    pub metadata: String,
    pub content_embedding: Option<Vec<u8>>,
    pub preceding_turn: Option<String>,
}

impl EpisodeRow {
    pub(crate) fn from_model(e: &Episode) -> Self {
        EpisodeRow {
            group_id: e.group_id.as_str().to_owned(),
            uuid: e.uuid,
            name: e.name.clone(),
            source: e.source.as_str().to_owned(),
            source_description: e.source_description.clone(),
            content: e.content.clone(),
            valid_at: e.valid_at.as_micros(),
            created_at: e.created_at.as_micros(),
            entity_edges: Some(e.entity_edges.clone()),
            metadata: json(&e.metadata),
            content_embedding: e.content_embedding.as_deref().map(embedding_to_bytes),
            preceding_turn: e.preceding_turn.clone(),
        }
    }

    pub(crate) fn into_model(self) -> Result<Episode, StoreError> {
        Ok(Episode {
            group_id: group(&self.group_id)?,
            source: EpisodeType::parse(&self.source).ok_or_else(|| {
                StoreError::Corrupt(format!("episode {}: source `{}`", self.uuid, self.source))
            })?,
            valid_at: instant(self.valid_at, "episode valid_at")?,
            created_at: instant(self.created_at, "episode created_at")?,
            metadata: attributes(&self.metadata, "episode metadata")?,
            uuid: self.uuid,
            name: self.name,
            source_description: self.source_description,
            content: self.content,
            entity_edges: self.entity_edges.unwrap_or_default(),
            content_embedding: self
                .content_embedding
                .as_deref()
                .map(embedding_of)
                .transpose()?,
            preceding_turn: self.preceding_turn,
        })
    }
}

/// A row of `entities`.
#[derive(Clone, Debug, PartialEq, DeserializeRow)]
pub(crate) struct EntityRow {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub labels: Option<Vec<String>>,
    pub created_at: i64,
    pub name_embedding: Option<Vec<u8>>,
    pub summary: String,
    pub attributes: String,
}

/// An upsert of an `entities` row.
#[derive(Clone, Debug, PartialEq, SerializeRow)]
pub(crate) struct EntityWrite {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub labels: Option<Vec<String>>,
    pub created_at: i64,
    pub name_embedding: Cell<Vec<u8>>,
    pub summary: String,
    pub attributes: String,
}

impl EntityRow {
    pub(crate) fn from_model(e: &Entity) -> Self {
        EntityRow {
            group_id: e.group_id.as_str().to_owned(),
            uuid: e.uuid,
            name: e.name.clone(),
            labels: Some(e.labels.clone()),
            created_at: e.created_at.as_micros(),
            name_embedding: e.name_embedding.as_deref().map(embedding_to_bytes),
            summary: e.summary.clone(),
            attributes: json(&e.attributes),
        }
    }

    pub(crate) fn into_model(self) -> Result<Entity, StoreError> {
        Ok(Entity {
            group_id: group(&self.group_id)?,
            created_at: instant(self.created_at, "entity created_at")?,
            name_embedding: self
                .name_embedding
                .as_deref()
                .map(embedding_of)
                .transpose()?,
            attributes: attributes(&self.attributes, "entity attributes")?,
            uuid: self.uuid,
            name: self.name,
            labels: self.labels.unwrap_or_default(),
            summary: self.summary,
        })
    }

    /// The upsert that turns `old` (the stored row, if any) into this row.
    pub(crate) fn write(&self, old: Option<&EntityRow>) -> EntityWrite {
        EntityWrite {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            name: self.name.clone(),
            labels: self.labels.clone(),
            created_at: self.created_at,
            name_embedding: cell(&self.name_embedding, old.map(|o| &o.name_embedding)),
            summary: self.summary.clone(),
            attributes: self.attributes.clone(),
        }
    }
}

#[cfg(test)]
impl EntityWrite {
    /// The row stored after this upsert over `old`.
    pub(crate) fn stored(&self, old: Option<&EntityRow>) -> EntityRow {
        EntityRow {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            name: self.name.clone(),
            labels: self.labels.clone(),
            created_at: self.created_at,
            name_embedding: merged(&self.name_embedding, old.map(|o| &o.name_embedding)),
            summary: self.summary.clone(),
            attributes: self.attributes.clone(),
        }
    }
}

/// A row of `facts`.
#[derive(Clone, Debug, PartialEq, DeserializeRow)]
pub(crate) struct FactRow {
    pub group_id: String,
    pub uuid: Uuid,
    pub source_node_uuid: Uuid,
    pub target_node_uuid: Uuid,
    pub name: String,
    pub fact: String,
    pub fact_embedding: Option<Vec<u8>>,
    pub episodes: Option<Vec<Uuid>>,
    pub created_at: i64,
    pub valid_at: Option<i64>,
    pub invalid_at: Option<i64>,
    pub expired_at: Option<i64>,
    pub reference_time: i64,
    pub attributes: String,
    pub invalidated_by_fact: Option<Uuid>,
    pub invalidated_by_episode: Option<Uuid>,
    pub prior_invalid_at: Option<i64>,
    pub stated_windows: Option<String>,
}

/// An upsert of a `facts` row.
#[derive(Clone, Debug, PartialEq, SerializeRow)]
pub(crate) struct FactWrite {
    pub group_id: String,
    pub uuid: Uuid,
    pub source_node_uuid: Uuid,
    pub target_node_uuid: Uuid,
    pub name: String,
    pub fact: String,
    pub fact_embedding: Cell<Vec<u8>>,
    pub episodes: Option<Vec<Uuid>>,
    pub created_at: i64,
    pub valid_at: Cell<i64>,
    pub invalid_at: Cell<i64>,
    pub expired_at: Cell<i64>,
    pub reference_time: i64,
    pub attributes: String,
    pub invalidated_by_fact: Cell<Uuid>,
    pub invalidated_by_episode: Cell<Uuid>,
    pub prior_invalid_at: Cell<i64>,
    pub stated_windows: Cell<String>,
}

impl FactRow {
    pub(crate) fn from_model(f: &Fact) -> Self {
        let inv = f.invalidated_by.as_ref();
        FactRow {
            group_id: f.group_id.as_str().to_owned(),
            uuid: f.uuid,
            source_node_uuid: f.source_node_uuid,
            target_node_uuid: f.target_node_uuid,
            name: f.name.clone(),
            fact: f.fact.clone(),
            fact_embedding: f.fact_embedding.as_deref().map(embedding_to_bytes),
            episodes: Some(f.episodes.clone()),
            created_at: f.created_at.as_micros(),
            valid_at: f.valid_at.map(Timestamp::as_micros),
            invalid_at: f.invalid_at.map(Timestamp::as_micros),
            expired_at: f.expired_at.map(Timestamp::as_micros),
            reference_time: f.reference_time.as_micros(),
            attributes: json(&f.attributes),
            invalidated_by_fact: inv.and_then(|i| i.by_fact),
            invalidated_by_episode: inv.map(|i| i.by_episode),
            prior_invalid_at: inv
                .and_then(|i| i.prior_invalid_at)
                .map(Timestamp::as_micros),
            stated_windows: (!f.stated_windows.is_empty())
                .then(|| serde_json::to_string(&f.stated_windows).ok())
                .flatten(),
        }
    }

    pub(crate) fn into_model(self) -> Result<Fact, StoreError> {
        let invalidated_by = match self.invalidated_by_episode {
            Some(by_episode) => Some(Invalidation {
                by_fact: self.invalidated_by_fact,
                by_episode,
                prior_invalid_at: instant_opt(self.prior_invalid_at, "fact prior_invalid_at")?,
            }),
            None => None,
        };
        Ok(Fact {
            group_id: group(&self.group_id)?,
            fact_embedding: self
                .fact_embedding
                .as_deref()
                .map(embedding_of)
                .transpose()?,
            created_at: instant(self.created_at, "fact created_at")?,
            valid_at: instant_opt(self.valid_at, "fact valid_at")?,
            invalid_at: instant_opt(self.invalid_at, "fact invalid_at")?,
            expired_at: instant_opt(self.expired_at, "fact expired_at")?,
            reference_time: instant(self.reference_time, "fact reference_time")?,
            attributes: attributes(&self.attributes, "fact attributes")?,
            invalidated_by,
            stated_windows: match self.stated_windows.as_deref() {
                None => Vec::new(),
                Some(text) => serde_json::from_str(text)
                    .map_err(|e| StoreError::Corrupt(format!("fact stated_windows: {e}")))?,
            },
            uuid: self.uuid,
            source_node_uuid: self.source_node_uuid,
            target_node_uuid: self.target_node_uuid,
            name: self.name,
            fact: self.fact,
            episodes: self.episodes.unwrap_or_default(),
        })
    }

    /// The upsert that turns `old` (the stored row, if any) into this row.
    pub(crate) fn write(&self, old: Option<&FactRow>) -> FactWrite {
        FactWrite {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            source_node_uuid: self.source_node_uuid,
            target_node_uuid: self.target_node_uuid,
            name: self.name.clone(),
            fact: self.fact.clone(),
            fact_embedding: cell(&self.fact_embedding, old.map(|o| &o.fact_embedding)),
            episodes: self.episodes.clone(),
            created_at: self.created_at,
            valid_at: cell(&self.valid_at, old.map(|o| &o.valid_at)),
            invalid_at: cell(&self.invalid_at, old.map(|o| &o.invalid_at)),
            expired_at: cell(&self.expired_at, old.map(|o| &o.expired_at)),
            reference_time: self.reference_time,
            attributes: self.attributes.clone(),
            invalidated_by_fact: cell(
                &self.invalidated_by_fact,
                old.map(|o| &o.invalidated_by_fact),
            ),
            invalidated_by_episode: cell(
                &self.invalidated_by_episode,
                old.map(|o| &o.invalidated_by_episode),
            ),
            prior_invalid_at: cell(&self.prior_invalid_at, old.map(|o| &o.prior_invalid_at)),
            stated_windows: cell(&self.stated_windows, old.map(|o| &o.stated_windows)),
        }
    }
}

#[cfg(test)]
impl FactWrite {
    /// The row stored after this upsert over `old`.
    pub(crate) fn stored(&self, old: Option<&FactRow>) -> FactRow {
        FactRow {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            source_node_uuid: self.source_node_uuid,
            target_node_uuid: self.target_node_uuid,
            name: self.name.clone(),
            fact: self.fact.clone(),
            fact_embedding: merged(&self.fact_embedding, old.map(|o| &o.fact_embedding)),
            episodes: self.episodes.clone(),
            created_at: self.created_at,
            valid_at: merged(&self.valid_at, old.map(|o| &o.valid_at)),
            invalid_at: merged(&self.invalid_at, old.map(|o| &o.invalid_at)),
            expired_at: merged(&self.expired_at, old.map(|o| &o.expired_at)),
            reference_time: self.reference_time,
            attributes: self.attributes.clone(),
            invalidated_by_fact: merged(
                &self.invalidated_by_fact,
                old.map(|o| &o.invalidated_by_fact),
            ),
            invalidated_by_episode: merged(
                &self.invalidated_by_episode,
                old.map(|o| &o.invalidated_by_episode),
            ),
            prior_invalid_at: merged(&self.prior_invalid_at, old.map(|o| &o.prior_invalid_at)),
            stated_windows: merged(&self.stated_windows, old.map(|o| &o.stated_windows)),
        }
    }
}

/// A row of `sagas`.
#[derive(Clone, Debug, PartialEq, DeserializeRow)]
pub(crate) struct SagaRow {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub summary: String,
    pub episodes: Option<Vec<Uuid>>,
    pub last_summarized_episode_valid_at: Option<i64>,
    pub created_at: i64,
}

/// An upsert of a `sagas` row.
#[derive(Clone, Debug, PartialEq, SerializeRow)]
pub(crate) struct SagaWrite {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub summary: String,
    pub episodes: Option<Vec<Uuid>>,
    pub last_summarized_episode_valid_at: Cell<i64>,
    pub created_at: i64,
}

impl SagaRow {
    pub(crate) fn from_model(s: &Saga) -> Self {
        SagaRow {
            group_id: s.group_id.as_str().to_owned(),
            uuid: s.uuid,
            name: s.name.clone(),
            summary: s.summary.clone(),
            episodes: Some(s.episodes.clone()),
            last_summarized_episode_valid_at: s
                .last_summarized_episode_valid_at
                .map(Timestamp::as_micros),
            created_at: s.created_at.as_micros(),
        }
    }

    pub(crate) fn into_model(self) -> Result<Saga, StoreError> {
        Ok(Saga {
            group_id: group(&self.group_id)?,
            last_summarized_episode_valid_at: instant_opt(
                self.last_summarized_episode_valid_at,
                "saga last_summarized_episode_valid_at",
            )?,
            created_at: instant(self.created_at, "saga created_at")?,
            uuid: self.uuid,
            name: self.name,
            summary: self.summary,
            episodes: self.episodes.unwrap_or_default(),
        })
    }

    /// The upsert that turns `old` (the stored row, if any) into this row.
    pub(crate) fn write(&self, old: Option<&SagaRow>) -> SagaWrite {
        SagaWrite {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            name: self.name.clone(),
            summary: self.summary.clone(),
            episodes: self.episodes.clone(),
            last_summarized_episode_valid_at: cell(
                &self.last_summarized_episode_valid_at,
                old.map(|o| &o.last_summarized_episode_valid_at),
            ),
            created_at: self.created_at,
        }
    }
}

#[cfg(test)]
impl SagaWrite {
    /// The row stored after this upsert over `old`.
    pub(crate) fn stored(&self, old: Option<&SagaRow>) -> SagaRow {
        SagaRow {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            name: self.name.clone(),
            summary: self.summary.clone(),
            episodes: self.episodes.clone(),
            last_summarized_episode_valid_at: merged(
                &self.last_summarized_episode_valid_at,
                old.map(|o| &o.last_summarized_episode_valid_at),
            ),
            created_at: self.created_at,
        }
    }
}

/// A row of `communities`.
#[derive(Clone, Debug, PartialEq, DeserializeRow)]
pub(crate) struct CommunityRow {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub summary: String,
    pub members: Option<Vec<Uuid>>,
    pub name_embedding: Option<Vec<u8>>,
    pub created_at: i64,
}

/// An upsert of a `communities` row.
#[derive(Clone, Debug, PartialEq, SerializeRow)]
pub(crate) struct CommunityWrite {
    pub group_id: String,
    pub uuid: Uuid,
    pub name: String,
    pub summary: String,
    pub members: Option<Vec<Uuid>>,
    pub name_embedding: Cell<Vec<u8>>,
    pub created_at: i64,
}

impl CommunityRow {
    pub(crate) fn from_model(c: &Community) -> Self {
        CommunityRow {
            group_id: c.group_id.as_str().to_owned(),
            uuid: c.uuid,
            name: c.name.clone(),
            summary: c.summary.clone(),
            members: Some(c.members.clone()),
            name_embedding: c.name_embedding.as_deref().map(embedding_to_bytes),
            created_at: c.created_at.as_micros(),
        }
    }

    pub(crate) fn into_model(self) -> Result<Community, StoreError> {
        Ok(Community {
            group_id: group(&self.group_id)?,
            name_embedding: self
                .name_embedding
                .as_deref()
                .map(embedding_of)
                .transpose()?,
            created_at: instant(self.created_at, "community created_at")?,
            uuid: self.uuid,
            name: self.name,
            summary: self.summary,
            members: self.members.unwrap_or_default(),
        })
    }

    /// The upsert that turns `old` (the stored row, if any) into this row.
    pub(crate) fn write(&self, old: Option<&CommunityRow>) -> CommunityWrite {
        CommunityWrite {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            name: self.name.clone(),
            summary: self.summary.clone(),
            members: self.members.clone(),
            name_embedding: cell(&self.name_embedding, old.map(|o| &o.name_embedding)),
            created_at: self.created_at,
        }
    }
}

#[cfg(test)]
impl CommunityWrite {
    /// The row stored after this upsert over `old`.
    pub(crate) fn stored(&self, old: Option<&CommunityRow>) -> CommunityRow {
        CommunityRow {
            group_id: self.group_id.clone(),
            uuid: self.uuid,
            name: self.name.clone(),
            summary: self.summary.clone(),
            members: self.members.clone(),
            name_embedding: merged(&self.name_embedding, old.map(|o| &o.name_embedding)),
            created_at: self.created_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_model::testing::{entity, group as test_group};

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn month_buckets() {
        assert_eq!(month_bucket(ts("2025-02-14T10:00:00Z")), 202502);
        assert_eq!(month_bucket(ts("1970-01-01T00:00:00Z")), 197001);
        assert_eq!(month_bucket(ts("1969-12-31T23:59:59.999999Z")), 196912);
        assert_eq!(month_bucket(ts("2024-02-29T23:59:59.999999Z")), 202402);
        assert_eq!(month_bucket(ts("2024-03-01T00:00:00Z")), 202403);
        assert_eq!(month_bucket(ts("2000-12-31T23:59:59Z")), 200012);
        assert_eq!(
            month_bucket(ts("2025-03-01T04:00:00+08:00")),
            202502,
            "UTC month"
        );
        assert_eq!(month_bucket(Timestamp::MIN), 101);
        assert_eq!(month_bucket(Timestamp::MAX), 999_912);
        // every day of a few leap and common years lands in its own month
        let mut t = ts("1899-12-01T00:00:00Z");
        let mut previous = month_bucket(t);
        while t < ts("2101-01-01T00:00:00Z") {
            let b = month_bucket(t);
            let dt = t.to_datetime().format("%Y%m").to_string();
            assert_eq!(b.to_string(), dt, "{t}");
            assert!(b >= previous);
            previous = b;
            t = t.saturating_add_micros(86_400_000_000 / 2 + 7);
        }
    }

    #[test]
    fn group_shards_are_stable_and_spread() {
        assert_eq!(group_shard("tenant-a"), group_shard("tenant-a"));
        // FNV-1a 32 of "a" is 0xe40c292c
        assert_eq!(group_shard("a"), (0xe40c_292c_u32 % 16) as i16);
        let shards: std::collections::BTreeSet<i16> = (0..200)
            .map(|i| group_shard(&format!("tenant_{i}")))
            .collect();
        assert_eq!(shards.len(), GROUP_SHARDS as usize);
        assert!(shards.iter().all(|s| (0..GROUP_SHARDS).contains(s)));
    }

    #[test]
    fn embeddings_round_trip_bit_exactly() {
        let v = vec![0.5, -0.25, f32::MIN_POSITIVE, 1e-30, f32::MAX, -0.0];
        let blob = embedding_to_bytes(&v);
        assert_eq!(blob.len(), v.len() * 4);
        assert_eq!(&blob[..4], &0.5f32.to_le_bytes());
        let back = embedding_of(&blob).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert!(embedding_of(&[]).unwrap().is_empty());
        assert!(matches!(
            embedding_of(&[0, 0, 0]),
            Err(StoreError::Corrupt(_))
        ));
    }

    fn sample_fact() -> Fact {
        let g = test_group("tenant-a");
        let mut attributes = Attributes::new();
        attributes.insert("since".into(), serde_json::json!(2019));
        Fact {
            uuid: Uuid::from_u128(1),
            group_id: g,
            source_node_uuid: Uuid::from_u128(2),
            target_node_uuid: Uuid::from_u128(3),
            name: "LIVES_IN".into(),
            fact: "Alice lives in Beijing".into(),
            fact_embedding: Some(vec![0.125, 0.5]),
            episodes: vec![Uuid::from_u128(9), Uuid::from_u128(10)],
            created_at: ts("2025-01-10T00:00:00.000001Z"),
            valid_at: Some(ts("2025-01-05T12:34:56.789012Z")),
            invalid_at: None,
            expired_at: None,
            reference_time: ts("2025-01-05T00:00:00Z"),
            attributes,
            invalidated_by: None,
            stated_windows: Vec::new(),
        }
    }

    #[test]
    fn facts_round_trip_with_microseconds_and_nulls() {
        let f = sample_fact();
        let row = FactRow::from_model(&f);
        assert_eq!(row.created_at, 1_736_467_200_000_001);
        assert_eq!(row.valid_at, Some(1_736_080_496_789_012));
        assert_eq!(row.invalid_at, None);
        assert_eq!(row.invalidated_by_episode, None);
        assert_eq!(row.attributes, r#"{"since":2019}"#);
        assert_eq!(row.clone().into_model().unwrap(), f);

        let mut invalidated = f.clone();
        invalidated.invalid_at = Some(ts("2025-03-01T00:00:00Z"));
        invalidated.expired_at = Some(ts("2025-03-02T00:00:00.5Z"));
        invalidated.invalidated_by = Some(Invalidation {
            by_fact: None,
            by_episode: Uuid::from_u128(11),
            prior_invalid_at: Some(ts("2030-01-01T00:00:00Z")),
        });
        let row2 = FactRow::from_model(&invalidated);
        assert_eq!(row2.invalidated_by_fact, None);
        assert_eq!(row2.invalidated_by_episode, Some(Uuid::from_u128(11)));
        assert_eq!(row2.clone().into_model().unwrap(), invalidated);

        // a fresh row leaves its nulls unset; clearing a stored value writes null
        let w = row.write(None);
        assert_eq!(w.invalid_at, Cell::Unset);
        assert_eq!(w.valid_at, Cell::Set(Some(1_736_080_496_789_012)));
        let restore = row.write(Some(&row2));
        assert_eq!(restore.invalid_at, Cell::Set(None));
        assert_eq!(restore.invalidated_by_episode, Cell::Set(None));
        assert_eq!(restore.invalidated_by_fact, Cell::Unset);
        assert_eq!(restore.stored(Some(&row2)), row);
        assert_eq!(w.stored(None), row);
    }

    #[test]
    fn bad_columns_are_corrupt_not_panics() {
        let mut row = FactRow::from_model(&sample_fact());
        row.valid_at = Some(i64::MAX);
        assert!(matches!(row.into_model(), Err(StoreError::Corrupt(_))));
        let mut row = FactRow::from_model(&sample_fact());
        row.attributes = "[1".into();
        assert!(matches!(row.into_model(), Err(StoreError::Corrupt(_))));
        let mut row = FactRow::from_model(&sample_fact());
        row.group_id = "a/b".into();
        assert!(matches!(row.into_model(), Err(StoreError::Corrupt(_))));
        let mut row = FactRow::from_model(&sample_fact());
        row.fact_embedding = Some(vec![1, 2]);
        assert!(matches!(row.into_model(), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn entities_round_trip() {
        let g = test_group("tenant-a");
        let mut e = entity(&g, Uuid::from_u128(77), "Vera");
        e.labels = vec!["Entity".into(), "Person".into()];
        e.summary = "a pilot".into();
        e.attributes.insert(
            "age".into(),
            serde_json::json!({"years": 41, "as_of": "2025"}),
        );
        e.created_at = ts("2025-02-01T00:00:00.123456Z");
        e.name_embedding = None;
        let plain = EntityRow::from_model(&e);
        assert_eq!(plain.name_embedding, None);
        assert_eq!(plain.clone().into_model().unwrap(), e);
        e.name_embedding = Some(vec![0.5, 0.25]);
        let row = EntityRow::from_model(&e);
        // half-exact components: a tag byte and two bytes each
        assert_eq!(row.name_embedding.as_ref().map(Vec::len), Some(5));
        assert_eq!(row.clone().into_model().unwrap(), e);
        assert_eq!(plain.write(None).name_embedding, Cell::Unset);
        assert_eq!(plain.write(Some(&row)).name_embedding, Cell::Set(None));
        assert_eq!(plain.write(Some(&row)).stored(Some(&row)), plain);
        // an empty frozen list may come back as null
        let mut no_labels = row.clone();
        no_labels.labels = None;
        assert!(no_labels.into_model().unwrap().labels.is_empty());
    }

    #[test]
    fn episodes_sagas_and_communities_round_trip() {
        let g = test_group("tenant-a");
        let mut metadata = Attributes::new();
        metadata.insert("channel".into(), serde_json::json!("slack"));
        let ep = Episode {
            uuid: Uuid::from_u128(5),
            name: "ep-1".into(),
            group_id: g.clone(),
            source: EpisodeType::FactTriple,
            source_description: "test".into(),
            content: "{}".into(),
            valid_at: ts("1969-07-20T20:17:40.000001Z"),
            created_at: ts("2025-01-01T00:00:00Z"),
            entity_edges: vec![Uuid::from_u128(6)],
            metadata,
            content_embedding: Some(vec![0.5, -1.25]),
            preceding_turn: Some("what did you do?".into()),
        };
        let row = EpisodeRow::from_model(&ep);
        assert_eq!(row.source, "fact_triple");
        assert_eq!(row.valid_at, -14_182_939_999_999);
        assert_eq!(row.clone().into_model().unwrap(), ep);
        let mut bad = row;
        bad.source = "audio".into();
        assert!(matches!(bad.into_model(), Err(StoreError::Corrupt(_))));

        let saga = Saga {
            uuid: Uuid::from_u128(8),
            group_id: g.clone(),
            name: "trip".into(),
            summary: String::new(),
            episodes: vec![Uuid::from_u128(5), Uuid::from_u128(4)],
            last_summarized_episode_valid_at: None,
            created_at: ts("2025-01-01T00:00:00Z"),
        };
        let row = SagaRow::from_model(&saga);
        assert_eq!(row.clone().into_model().unwrap(), saga);
        assert_eq!(
            row.write(None).last_summarized_episode_valid_at,
            Cell::Unset
        );
        let mut summarized = saga.clone();
        summarized.last_summarized_episode_valid_at = Some(ts("2025-01-02T00:00:00.000002Z"));
        let row2 = SagaRow::from_model(&summarized);
        assert_eq!(row2.clone().into_model().unwrap(), summarized);
        assert_eq!(row2.write(Some(&row)).stored(Some(&row)), row2);

        let community = Community {
            uuid: Uuid::from_u128(12),
            group_id: g,
            name: "pilots".into(),
            summary: "people who fly".into(),
            members: vec![Uuid::from_u128(1), Uuid::from_u128(2)],
            name_embedding: Some(vec![1.0]),
            created_at: ts("2025-01-01T00:00:00Z"),
        };
        let row = CommunityRow::from_model(&community);
        assert_eq!(row.clone().into_model().unwrap(), community);
        assert_eq!(row.write(None).stored(None), row);
    }
}
