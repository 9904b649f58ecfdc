use apache_avro::Schema;
use apache_avro::types::Value;
use chronicle_model::testing::{batch_of_every_kind, group, ts};
use chronicle_model::{Command, EpisodeType, EventBatch, EventKind, NewEpisode};
use proptest::prelude::*;
use uuid::Uuid;

use super::*;

static EVENTS: std::sync::LazyLock<EventBatchCodec> =
    std::sync::LazyLock::new(EventBatchCodec::new);
static COMMANDS: std::sync::LazyLock<CommandCodec> = std::sync::LazyLock::new(CommandCodec::new);

fn commands() -> Vec<Command> {
    let g = group("tenant-1");
    let mut metadata = chronicle_model::Attributes::new();
    metadata.insert("speaker".into(), serde_json::json!("Alice"));
    vec![
        Command::AddEpisode(NewEpisode {
            uuid: Uuid::from_u128(1),
            group_id: g.clone(),
            name: "ep".into(),
            content: "Alice: I moved to Shanghai".into(),
            source: EpisodeType::Message,
            source_description: "chat".into(),
            reference_time: ts("2025-03-01T09:00:00.000001Z"),
            previous_episode_uuids: Some(vec![Uuid::from_u128(2)]),
            saga: Some("relocation".into()),
            metadata,
        }),
        Command::AddEpisode(NewEpisode {
            uuid: Uuid::from_u128(3),
            group_id: g.clone(),
            name: String::new(),
            content: "{}".into(),
            source: EpisodeType::FactTriple,
            source_description: String::new(),
            reference_time: ts("1970-01-01T00:00:00Z"),
            previous_episode_uuids: None,
            saga: None,
            metadata: Default::default(),
        }),
        Command::RetractEpisode {
            uuid: Uuid::from_u128(4),
            group_id: g.clone(),
            episode_uuid: Uuid::from_u128(1),
        },
        Command::BuildCommunities {
            uuid: Uuid::from_u128(5),
            group_id: g.clone(),
        },
        Command::SummarizeSaga {
            uuid: Uuid::from_u128(6),
            group_id: g,
            saga: "relocation".into(),
        },
    ]
}

#[test]
fn every_command_round_trips() {
    let codec = CommandCodec::new();
    for c in commands() {
        let bytes = codec.encode(&c);
        assert_eq!(&bytes[..2], &[0xC3, 0x01]);
        assert_eq!(codec.decode(&bytes).unwrap(), c);
    }
}

#[test]
fn every_event_variant_round_trips() {
    let codec = EventBatchCodec::new();
    let batch = batch_of_every_kind(&group("g"));
    assert_eq!(
        batch.events.len(),
        14,
        "one event per variant (provenance with and without a stated window)"
    );
    let bytes = codec.encode(&batch);
    assert_eq!(codec.decode(&bytes).unwrap(), batch);
    let dead = EventBatch::dead_lettered(
        Uuid::from_u128(5),
        group("g"),
        ts("2025-01-01T00:00:00Z"),
        None,
        "undecodable".into(),
    );
    assert_eq!(codec.decode(&codec.encode(&dead)).unwrap(), dead);
}

#[test]
fn header_matches_the_libraries_single_object_writer() {
    let codec = CommandCodec::new();
    let schema = Schema::parse_str(COMMAND_SCHEMA).unwrap();
    let mut theirs = Vec::new();
    let mut writer =
        apache_avro::GenericSingleObjectWriter::new_with_capacity(&schema, 1024).unwrap();
    writer
        .write_value(commands()[0].to_avro(), &mut theirs)
        .unwrap();
    assert_eq!(theirs, codec.encode(&commands()[0]));
}

/// The current event-batch schema with one more optional field on the batch record.
fn schema_with_trace_id() -> String {
    let mut json: serde_json::Value = serde_json::from_str(EVENT_BATCH_SCHEMA).unwrap();
    json["fields"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
            {"name": "trace_id", "type": ["null", "string"], "default": null}
        ));
    json.to_string()
}

fn with_trace_id(v: Value) -> Value {
    let Value::Record(mut fields) = v else {
        panic!("record")
    };
    fields.push((
        "trace_id".into(),
        Value::Union(1, Box::new(Value::String("t-1".into()))),
    ));
    Value::Record(fields)
}

#[test]
fn newer_writer_with_added_optional_field_is_read_by_old_reader() {
    let batch = batch_of_every_kind(&group("g"));
    let v2_json = schema_with_trace_id();
    let v2 = EventBatchCodec::with_reader_schema(Schema::parse_str(&v2_json).unwrap());
    let bytes = v2.encode_value(with_trace_id(batch.to_avro())).unwrap();
    assert_ne!(v2.fingerprint(), EventBatchCodec::new().fingerprint());

    let old_reader = EventBatchCodec::new();
    assert!(matches!(
        old_reader.decode(&bytes),
        Err(CodecError::UnknownFingerprint(_))
    ));
    let old_reader = old_reader.with_known_writer(&v2_json).unwrap();
    assert_eq!(old_reader.decode(&bytes).unwrap(), batch);
}

#[test]
fn old_writer_is_read_by_newer_reader_with_the_default() {
    let batch = batch_of_every_kind(&group("g"));
    let bytes = EventBatchCodec::new().encode(&batch);
    let v2 =
        EventBatchCodec::with_reader_schema(Schema::parse_str(&schema_with_trace_id()).unwrap())
            .with_known_writer(EVENT_BATCH_SCHEMA)
            .unwrap();
    let value = v2.decode_value(&bytes).unwrap();
    let Value::Record(fields) = &value else {
        panic!("record")
    };
    let trace = fields
        .iter()
        .find(|(k, _)| k == "trace_id")
        .map(|(_, v)| v.clone());
    assert!(
        matches!(trace, Some(Value::Union(0, ref b)) if **b == Value::Null)
            || matches!(trace, Some(Value::Null)),
        "default applied: {trace:?}"
    );
    assert_eq!(EventBatch::from_avro(value).unwrap(), batch);
}

/// `v` with every record field named `name` removed, at any depth.
fn without_field(v: Value, name: &str) -> Value {
    match v {
        Value::Record(fields) => Value::Record(
            fields
                .into_iter()
                .filter(|(k, _)| k != name)
                .map(|(k, v)| (k, without_field(v, name)))
                .collect(),
        ),
        Value::Union(i, b) => Value::Union(i, Box::new(without_field(*b, name))),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| without_field(v, name)).collect())
        }
        other => other,
    }
}

/// `v` with every embedding in the list branch that v5 and before wrote.
fn with_float_lists(v: Value) -> Value {
    match v {
        Value::Record(fields) => Value::Record(
            fields
                .into_iter()
                .map(|(k, v)| (k, with_float_lists(v)))
                .collect(),
        ),
        Value::Union(2, b) => match *b {
            Value::Bytes(bytes) => Value::Union(
                1,
                Box::new(Value::Array(
                    chronicle_model::embedding_from_bytes(&bytes)
                        .unwrap()
                        .into_iter()
                        .map(Value::Float)
                        .collect(),
                )),
            ),
            other => Value::Union(2, Box::new(with_float_lists(other))),
        },
        Value::Union(i, b) => Value::Union(i, Box::new(with_float_lists(*b))),
        Value::Array(items) => Value::Array(items.into_iter().map(with_float_lists).collect()),
        other => other,
    }
}

#[test]
fn records_of_every_earlier_schema_still_decode() {
    // What each earlier schema lacks: v1 the stage timings, v2 (and v1) the
    // episodes' content embeddings, v3 (and before) the stated windows, v4
    // (and before) the messages' preceding turns; v5 wrote embeddings as
    // lists of floats.
    let lacking: [&[&str]; 5] = [
        &[
            "stage_micros",
            "content_embedding",
            "stated_window",
            "stated_windows",
            "preceding_turn",
        ],
        &[
            "content_embedding",
            "stated_window",
            "stated_windows",
            "preceding_turn",
        ],
        &["stated_window", "stated_windows", "preceding_turn"],
        &["preceding_turn"],
        &[],
    ];
    for (version, (schema, lacks)) in EVENT_BATCH_EARLIER_SCHEMAS.iter().zip(lacking).enumerate() {
        let mut batch = batch_of_every_kind(&group("g"));
        if lacks.contains(&"stage_micros") {
            let stats = batch.stats.as_mut().expect("the sample carries stats");
            stats.stage_micros.clear();
        }
        for event in &mut batch.events {
            match &mut event.kind {
                EventKind::EpisodeRecorded { episode } => {
                    if lacks.contains(&"content_embedding") {
                        episode.content_embedding = None;
                    }
                    if lacks.contains(&"preceding_turn") {
                        episode.preceding_turn = None;
                    }
                }
                EventKind::FactCreated { fact } if lacks.contains(&"stated_windows") => {
                    fact.stated_windows.clear()
                }
                EventKind::FactProvenanceAdded { stated_window, .. }
                    if lacks.contains(&"stated_window") =>
                {
                    *stated_window = None
                }
                _ => {}
            }
        }
        let old = EventBatchCodec::with_reader_schema(Schema::parse_str(schema).unwrap());
        assert_ne!(old.fingerprint(), EVENTS.fingerprint(), "v{}", version + 1);
        let value = lacks
            .iter()
            .fold(with_float_lists(batch.to_avro()), |v, name| {
                without_field(v, name)
            });
        let bytes = old.encode_value(value).unwrap();
        assert_eq!(EVENTS.decode(&bytes).unwrap(), batch, "v{}", version + 1);
    }
}

#[test]
fn bad_records_are_typed_errors() {
    let codec = EventBatchCodec::new();
    assert!(matches!(
        codec.decode(b"abc"),
        Err(CodecError::Truncated { len: 3, need: 10 })
    ));
    assert!(matches!(
        codec.decode(b"{\"json\": \"not avro\"}"),
        Err(CodecError::NotSingleObject(_))
    ));
    let mut unknown = vec![0xC3, 0x01];
    unknown.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let err = codec.decode(&unknown).unwrap_err();
    assert!(err.to_string().contains("0102030405060708"), "{err}");
    // A command is not an event batch.
    let cmd = CommandCodec::new().encode(&commands()[0]);
    assert!(matches!(
        codec.decode(&cmd),
        Err(CodecError::UnknownFingerprint(_))
    ));
    // Valid Avro whose group id breaks the model's rules.
    let mut batch = batch_of_every_kind(&group("g")).to_avro();
    if let Value::Record(fields) = &mut batch {
        fields[1].1 = Value::String("bad group/id".into());
    }
    let err = codec
        .decode(&codec.encode_value(batch).unwrap())
        .unwrap_err();
    assert!(
        matches!(err, CodecError::Field { ref field, .. } if field == "EventBatch.group_id"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = EVENTS.decode(&bytes);
        let _ = COMMANDS.decode(&bytes);
    }

    #[test]
    fn random_bodies_behind_a_valid_header_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let framed = |fp: [u8; 8]| [&[0xC3, 0x01][..], &fp, &body].concat();
        let _ = EVENTS.decode(&framed(EVENTS.fingerprint()));
        let _ = COMMANDS.decode(&framed(COMMANDS.fingerprint()));
    }

    #[test]
    fn truncated_and_corrupted_records_never_panic(cut in 0usize..4000, flip in 0usize..4000, bit in 0u8..8) {
        let codec = &*EVENTS;
        let bytes = codec.encode(&batch_of_every_kind(&group("g")));
        let cut = cut % bytes.len();
        prop_assert!(codec.decode(&bytes[..cut]).is_err(), "a strict prefix never decodes");
        let mut corrupted = bytes.clone();
        let i = flip % corrupted.len();
        corrupted[i] ^= 1 << bit;
        let _ = codec.decode(&corrupted);
    }
}

/// The codec fuzz target's seeds are records of today's schemas: one per
/// command and one batch of every event kind. `CHRONICLE_WRITE_FUZZ_SEEDS=1`
/// rewrites them; otherwise this checks they still decode, so the fuzzer
/// never starts from stale bytes.
#[test]
fn the_fuzz_seeds_are_records_of_the_current_schemas() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/codec");
    let mut seeds: Vec<(String, Vec<u8>)> = commands()
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("seed-command-{i}"), COMMANDS.encode(c)))
        .collect();
    seeds.push((
        "seed-events".into(),
        EVENTS.encode(&batch_of_every_kind(&group("g"))),
    ));
    if std::env::var_os("CHRONICLE_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for (name, bytes) in &seeds {
        let stored = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            &stored, bytes,
            "{name} is stale: rerun with CHRONICLE_WRITE_FUZZ_SEEDS=1"
        );
    }
}

/// Found by the codec fuzz target: a NaN decoded into an embedding, where
/// it would poison every distance (and the indices' order) downstream.
#[test]
fn a_non_finite_embedding_value_is_a_malformed_record() {
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut batch = batch_of_every_kind(&group("g"));
        for event in &mut batch.events {
            if let EventKind::EpisodeRecorded { episode } = &mut event.kind {
                episode.content_embedding = Some(vec![0.5, bad]);
            }
        }
        let err = EVENTS.decode(&EVENTS.encode(&batch)).unwrap_err();
        assert!(
            matches!(err, CodecError::Field { ref reason, .. } if reason.contains("finite")),
            "{err}"
        );
    }
}

#[test]
fn a_rounded_embedding_costs_two_bytes_a_component_on_the_log() {
    let mut batch = batch_of_every_kind(&group("g"));
    let size = |batch: &EventBatch| EVENTS.encode(batch).len();
    let without = size(&batch);
    let mut vector: Vec<f32> = (0..384).map(|i| (i as f32 - 192.0) / 400.0).collect();
    chronicle_model::round_to_half(&mut vector).unwrap();
    for event in &mut batch.events {
        if let EventKind::EpisodeRecorded { episode } = &mut event.kind {
            episode.content_embedding = Some(vector.clone());
        }
    }
    let grown = size(&batch) - without;
    assert!(grown <= 384 * 2 + 8, "{grown} bytes for 384 components");
    assert_eq!(EVENTS.decode(&EVENTS.encode(&batch)).unwrap(), batch);
}
