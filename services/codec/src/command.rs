//! `Command` ⇄ `schemas/avro/command.avsc`.

use apache_avro::types::Value;
use chronicle_model::{Command, EpisodeType, NewEpisode};

use crate::value::{Fields, json, opt, record, string, ts, uuid, uuids};
use crate::{AvroRecord, COMMAND_SCHEMA, CodecError};

pub(crate) fn episode_type(t: EpisodeType) -> Value {
    let index = EpisodeType::ALL
        .iter()
        .position(|x| *x == t)
        .expect("listed") as u32;
    Value::Enum(index, t.as_str().to_owned())
}

pub(crate) fn parse_episode_type(f: &mut Fields, name: &str) -> Result<EpisodeType, CodecError> {
    let symbol = f.enum_symbol(name)?;
    EpisodeType::parse(&symbol)
        .ok_or_else(|| CodecError::field(f.path(name), format!("unknown episode type `{symbol}`")))
}

impl AvroRecord for Command {
    const SCHEMA_JSON: &'static str = COMMAND_SCHEMA;

    fn to_avro(&self) -> Value {
        let (branch, body) = match self {
            Command::AddEpisode(e) => (
                0,
                record(vec![
                    ("uuid", uuid(e.uuid)),
                    ("group_id", string(e.group_id.as_str())),
                    ("name", string(&e.name)),
                    ("content", string(&e.content)),
                    ("source", episode_type(e.source)),
                    ("source_description", string(&e.source_description)),
                    ("reference_time", ts(e.reference_time)),
                    (
                        "previous_episode_uuids",
                        opt(e.previous_episode_uuids.as_deref(), uuids),
                    ),
                    ("saga", opt(e.saga.as_deref(), string)),
                    ("metadata_json", json(&e.metadata)),
                ]),
            ),
            Command::RetractEpisode {
                uuid: id,
                group_id,
                episode_uuid,
            } => (
                1,
                record(vec![
                    ("uuid", uuid(*id)),
                    ("group_id", string(group_id.as_str())),
                    ("episode_uuid", uuid(*episode_uuid)),
                ]),
            ),
            Command::BuildCommunities { uuid: id, group_id } => (
                2,
                record(vec![
                    ("uuid", uuid(*id)),
                    ("group_id", string(group_id.as_str())),
                ]),
            ),
            Command::SummarizeSaga {
                uuid: id,
                group_id,
                saga,
            } => (
                3,
                record(vec![
                    ("uuid", uuid(*id)),
                    ("group_id", string(group_id.as_str())),
                    ("saga", string(saga)),
                ]),
            ),
        };
        record(vec![("command", Value::Union(branch, Box::new(body)))])
    }

    fn from_avro(value: Value) -> Result<Self, CodecError> {
        let mut top = Fields::of(value, "CommandRecord")?;
        let (branch, body) = top.union("command")?;
        Ok(match branch {
            0 => {
                let mut f = Fields::of(body, "AddEpisode")?;
                Command::AddEpisode(NewEpisode {
                    uuid: f.uuid("uuid")?,
                    group_id: f.group("group_id")?,
                    name: f.string("name")?,
                    content: f.string("content")?,
                    source: parse_episode_type(&mut f, "source")?,
                    source_description: f.string("source_description")?,
                    reference_time: f.ts("reference_time")?,
                    previous_episode_uuids: f.opt_uuids("previous_episode_uuids")?,
                    saga: f.opt_string("saga")?,
                    metadata: f.json("metadata_json")?,
                })
            }
            1 => {
                let mut f = Fields::of(body, "RetractEpisode")?;
                Command::RetractEpisode {
                    uuid: f.uuid("uuid")?,
                    group_id: f.group("group_id")?,
                    episode_uuid: f.uuid("episode_uuid")?,
                }
            }
            2 => {
                let mut f = Fields::of(body, "BuildCommunities")?;
                Command::BuildCommunities {
                    uuid: f.uuid("uuid")?,
                    group_id: f.group("group_id")?,
                }
            }
            3 => {
                let mut f = Fields::of(body, "SummarizeSaga")?;
                Command::SummarizeSaga {
                    uuid: f.uuid("uuid")?,
                    group_id: f.group("group_id")?,
                    saga: f.string("saga")?,
                }
            }
            other => {
                return Err(CodecError::field(
                    "CommandRecord.command",
                    format!("unknown union branch {other}"),
                ));
            }
        })
    }
}
