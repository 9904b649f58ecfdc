//! The Kafka adapter: `EventLog` on any Kafka-protocol broker, via rdkafka.
//!
//! It keeps the embedded log's contract:
//!
//! * **Placement is ours.** Every record is produced to the partition that
//!   [`partition_for`] computes (Kafka's murmur2 default partitioner), set
//!   explicitly, so a group lands on the same partition here and in the
//!   embedded log whatever the client library's partitioner does.
//! * **Acknowledged means durable.** One idempotent producer (`acks=all`)
//!   serves all appends; `append` returns only when every record is
//!   delivered, with its partition, offset and timestamp. The timestamp is set
//!   by us (milliseconds, never going back within one `KafkaLog`), so the
//!   returned timestamp is the stored one.
//! * **Offsets are committed by hand** (`enable.auto.commit=false`
//!   everywhere): right after the records, or — with
//!   [`KafkaConfig::transactional`] — inside the same Kafka transaction, read
//!   back with `isolation.level=read_committed`.
//! * **Reads are assigned, not subscribed.** One consumer per (topic,
//!   partition) is kept and repositioned only when the caller asks for a
//!   different offset; a read that comes back empty has checked that the
//!   broker holds nothing at that offset yet, so "empty" means "caught up",
//!   as in the embedded log.
//!
//! Topics are created explicitly through the admin API (brokers need not
//! auto-create, and clients here never ask them to).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use chronicle_model::Timestamp;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;

use crate::{Appended, EventLog, LogError, NewRecord, OffsetCommit, Record, partition_for};

/// How to reach the brokers and how to use them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaConfig {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub brokers: String,
    /// `client.id` of every client; with `transactional` also the
    /// `transactional.id`, which must then be unique among running
    /// `KafkaLog`s and stable across restarts of the same one (it fences the
    /// zombie of a crashed predecessor).
    pub client_id: String,
    /// Replication factor of the topics this log creates.
    pub replication_factor: u16,
    /// Wrap every append (and the offset it commits) in a Kafka transaction,
    /// and read only committed records. Needs a broker that implements
    /// transactions.
    pub transactional: bool,
    /// How long a broker round trip (metadata, admin, commit, transaction
    /// step, delivery) may take before the call fails.
    pub timeout: Duration,
    /// Largest record this log writes, and the `max.message.bytes` of the
    /// topics it creates. One decided episode, or one community rebuild of a
    /// large group, is a single record, so Kafka's 1 MB default is too small.
    pub max_record_bytes: u32,
    /// Extra librdkafka settings for every client, applied last so they can
    /// override ours (e.g. `linger.ms`, `security.protocol`).
    pub settings: BTreeMap<String, String>,
}

impl KafkaConfig {
    /// Defaults for a development broker: client id `chronicle`, replication
    /// factor 1, no transactions, 30 s timeout, records up to 16 MiB.
    pub fn new(brokers: impl Into<String>) -> Self {
        KafkaConfig {
            brokers: brokers.into(),
            client_id: "chronicle".to_owned(),
            replication_factor: 1,
            transactional: false,
            timeout: Duration::from_secs(30),
            max_record_bytes: 16 << 20,
            settings: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) one librdkafka setting.
    pub fn with_setting(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.insert(key.into(), value.into());
        self
    }

    fn client(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("client.id", &self.client_id)
            // Topics exist only when created explicitly.
            .set("allow.auto.create.topics", "false");
        c
    }

    fn finish(&self, mut c: ClientConfig) -> ClientConfig {
        for (k, v) in &self.settings {
            c.set(k, v);
        }
        c
    }

    fn isolation_level(&self) -> &'static str {
        if self.transactional {
            "read_committed"
        } else {
            "read_uncommitted"
        }
    }

    fn timeout_ms(&self) -> String {
        self.timeout
            .as_millis()
            .clamp(1, i32::MAX as u128)
            .to_string()
    }

    fn producer(&self) -> ClientConfig {
        let mut c = self.client();
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("message.max.bytes", self.max_record_bytes.to_string())
            .set("message.timeout.ms", self.timeout_ms());
        if self.transactional {
            c.set("transactional.id", &self.client_id);
        }
        self.finish(c)
    }

    /// A consumer that only positions itself by assignment and commits
    /// nothing on its own.
    fn consumer(&self, group: Option<&str>) -> ClientConfig {
        let mut c = self.client();
        if let Some(group) = group {
            c.set("group.id", group);
        }
        c.set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            // Reading past the end or before the start is the caller's error,
            // not a reason to jump elsewhere.
            .set("auto.offset.reset", "error")
            .set("isolation.level", self.isolation_level())
            // A waiting read sees a new record within this long.
            .set("fetch.wait.max.ms", "100")
            // Prefetch per partition consumer; there may be many of them.
            .set("queued.max.messages.kbytes", "16384");
        self.finish(c)
    }
}

/// `EventLog` on a Kafka-protocol broker.
#[derive(Clone)]
pub struct KafkaLog {
    inner: Arc<Inner>,
}

impl fmt::Debug for KafkaLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaLog")
            .field("brokers", &self.inner.config.brokers)
            .field("client_id", &self.inner.config.client_id)
            .field("transactional", &self.inner.config.transactional)
            .finish()
    }
}

struct Inner {
    config: KafkaConfig,
    admin: AdminClient<DefaultClientContext>,
    /// Metadata, watermarks and timestamp lookups, always read_uncommitted:
    /// the end offset is where the next record will land.
    meta: Arc<BaseConsumer>,
    producer: Arc<FutureProducer>,
    /// One transaction at a time per transactional producer.
    transaction: tokio::sync::Mutex<()>,
    /// Why transactions can no longer be used, once a failed one could not
    /// be aborted.
    broken_transactions: Mutex<Option<String>>,
    topics: RwLock<HashMap<String, u32>>,
    readers: Mutex<HashMap<(String, u32), SharedReader>>,
    groups: Mutex<HashMap<String, Arc<BaseConsumer>>>,
    /// The last record timestamp given out (ms), so timestamps never go back.
    last_timestamp: AtomicI64,
}

fn kafka_err(what: impl fmt::Display, e: impl fmt::Display) -> LogError {
    LogError::Kafka(format!("{what}: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these maps leaves them consistent.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a blocking librdkafka call off the async runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, LogError> + Send + 'static,
) -> Result<T, LogError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| kafka_err("blocking Kafka call", e))?
}

fn to_i32(value: u32, what: &str) -> Result<i32, LogError> {
    i32::try_from(value).map_err(|_| LogError::Kafka(format!("{what} {value} exceeds Kafka's i32")))
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The first whole millisecond at or after `at`.
fn ceil_millis(at: Timestamp) -> i64 {
    at.as_micros().div_euclid(1000) + i64::from(at.as_micros().rem_euclid(1000) != 0)
}

fn record_timestamp(
    millis: Option<i64>,
    topic: &str,
    partition: u32,
    offset: u64,
) -> Result<Timestamp, LogError> {
    let corrupt = |reason: String| LogError::Corrupt {
        topic: topic.to_owned(),
        partition,
        offset,
        reason,
    };
    let millis = millis.ok_or_else(|| corrupt("record has no timestamp".into()))?;
    Timestamp::from_millis(millis).map_err(|e| corrupt(e.to_string()))
}

impl KafkaLog {
    /// Connects to the brokers of `config`: creates the clients, checks that
    /// a broker answers, and (when transactional) registers the producer's
    /// transactional id, fencing any predecessor that used it.
    pub async fn connect(config: KafkaConfig) -> Result<Self, LogError> {
        let admin: AdminClient<DefaultClientContext> = config
            .finish(config.client())
            .create()
            .map_err(|e| kafka_err("creating the Kafka admin client", e))?;
        let meta: BaseConsumer = {
            let mut c = config.consumer(None);
            c.set("isolation.level", "read_uncommitted");
            c.create()
                .map_err(|e| kafka_err("creating the Kafka metadata client", e))?
        };
        let producer: FutureProducer = config
            .producer()
            .create()
            .map_err(|e| kafka_err("creating the Kafka producer", e))?;
        let meta = Arc::new(meta);
        let producer = Arc::new(producer);

        let (probe, brokers, timeout) = (meta.clone(), config.brokers.clone(), config.timeout);
        blocking(move || {
            probe
                .fetch_metadata(None, timeout)
                .map(drop)
                .map_err(|e| kafka_err(format!("no Kafka broker at {brokers} answered"), e))
        })
        .await?;
        if config.transactional {
            let p = producer.clone();
            blocking(move || {
                p.init_transactions(timeout)
                    .map_err(|e| kafka_err("initializing Kafka transactions", e))
            })
            .await?;
        }
        Ok(KafkaLog {
            inner: Arc::new(Inner {
                config,
                admin,
                meta,
                producer,
                transaction: tokio::sync::Mutex::new(()),
                broken_transactions: Mutex::new(None),
                topics: RwLock::new(HashMap::new()),
                readers: Mutex::new(HashMap::new()),
                groups: Mutex::new(HashMap::new()),
                last_timestamp: AtomicI64::new(i64::MIN),
            }),
        })
    }

    /// The configuration this log was connected with.
    pub fn config(&self) -> &KafkaConfig {
        &self.inner.config
    }

    /// The partition count from the cache, else from broker metadata.
    async fn partitions(&self, topic: &str) -> Result<u32, LogError> {
        if let Some(count) = self.cached_partitions(topic) {
            return Ok(count);
        }
        match self.fetch_partitions(topic).await? {
            Some(count) => {
                self.remember(topic, count);
                Ok(count)
            }
            None => Err(LogError::UnknownTopic(topic.to_owned())),
        }
    }

    fn cached_partitions(&self, topic: &str) -> Option<u32> {
        self.inner
            .topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(topic)
            .copied()
    }

    fn remember(&self, topic: &str, count: u32) {
        self.inner
            .topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(topic.to_owned(), count);
    }

    async fn check_partition(&self, topic: &str, partition: u32) -> Result<u32, LogError> {
        let count = self.partitions(topic).await?;
        if partition >= count {
            return Err(LogError::NoSuchPartition {
                topic: topic.to_owned(),
                partition,
                count,
            });
        }
        Ok(count)
    }

    /// Asks the broker: `None` when the topic does not exist, else its
    /// partition count and whether every partition has a leader yet.
    async fn fetch_topic(&self, topic: &str) -> Result<Option<(u32, bool)>, LogError> {
        let (meta, name, timeout) = (
            self.inner.meta.clone(),
            topic.to_owned(),
            self.inner.config.timeout,
        );
        blocking(move || {
            let metadata = meta
                .fetch_metadata(Some(&name), timeout)
                .map_err(|e| kafka_err(format!("metadata of topic `{name}`"), e))?;
            let Some(t) = metadata.topics().iter().find(|t| t.name() == name) else {
                return Ok(None);
            };
            match t.error() {
                None => {}
                Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => return Ok(None),
                // A topic being created may not have leaders yet.
                Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) => {}
                Some(code) => {
                    return Err(kafka_err(
                        format!("metadata of topic `{name}`"),
                        RDKafkaErrorCode::from(code),
                    ));
                }
            }
            let count = t.partitions().len() as u32;
            if count == 0 {
                return Ok(None);
            }
            let ready = t.partitions().iter().all(|p| p.leader() >= 0);
            Ok(Some((count, ready)))
        })
        .await
    }

    async fn fetch_partitions(&self, topic: &str) -> Result<Option<u32>, LogError> {
        Ok(self.fetch_topic(topic).await?.map(|(count, _)| count))
    }

    /// Waits until the brokers report `topic` with leaders for all its
    /// partitions (a fresh topic takes a moment on a real cluster).
    async fn await_topic(&self, topic: &str) -> Result<u32, LogError> {
        let deadline = Instant::now() + self.inner.config.timeout;
        loop {
            let found = self.fetch_topic(topic).await?;
            match found {
                Some((count, true)) => return Ok(count),
                _ if Instant::now() >= deadline => {
                    return Err(LogError::Kafka(format!(
                        "topic `{topic}` was created but has no leader for every \
                         partition after {:?}",
                        self.inner.config.timeout
                    )));
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// The timestamp for the next record: now, but never before the last one.
    fn next_timestamp(&self) -> i64 {
        let now = now_millis();
        let previous = self.inner.last_timestamp.fetch_max(now, Ordering::SeqCst);
        previous.max(now)
    }

    /// Enqueues every record on its partition, in order, then waits for all
    /// deliveries. Records delivered before a failure stay in the log (unless
    /// a surrounding transaction is aborted).
    async fn produce(
        &self,
        topic: &str,
        partitions: u32,
        records: &[NewRecord],
    ) -> Result<Vec<Appended>, LogError> {
        let mut pending: Vec<(u32, DeliveryFuture)> = Vec::with_capacity(records.len());
        let mut failure = None;
        for r in records {
            let partition = partition_for(&r.key, partitions);
            let mut record = FutureRecord::to(topic)
                .partition(to_i32(partition, "partition")?)
                .key(r.key.as_slice())
                .payload(r.payload.as_slice())
                .timestamp(self.next_timestamp());
            let delivery = loop {
                match self.inner.producer.send_result(record) {
                    Ok(delivery) => break Ok(delivery),
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        // The local queue drains as the broker acknowledges.
                        record = back;
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    Err((e, _)) => break Err(e),
                }
            };
            match delivery {
                Ok(d) => pending.push((partition, d)),
                Err(e) => {
                    failure = Some(produce_err(topic, partition, e));
                    break;
                }
            }
        }
        // Wait for everything enqueued, even after a failure, so that no
        // delivery is left running behind the caller's back.
        let mut appended = Vec::with_capacity(pending.len());
        for (partition, delivery) in pending {
            let result = match delivery.await {
                Ok(Ok(d)) => u64::try_from(d.offset)
                    .map_err(|_| {
                        LogError::Kafka(format!(
                            "broker acknowledged {topic}/{partition} without an offset"
                        ))
                    })
                    .and_then(|offset| {
                        let timestamp =
                            record_timestamp(d.timestamp.to_millis(), topic, partition, offset)?;
                        Ok(Appended {
                            partition,
                            offset,
                            timestamp,
                        })
                    }),
                Ok(Err((e, _))) => Err(produce_err(topic, partition, e)),
                Err(_) => Err(LogError::Closed),
            };
            match result {
                Ok(a) => appended.push(a),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(appended),
        }
    }

    /// The standalone consumer of `group`: commits and reads its offsets,
    /// never subscribes (so it never triggers a rebalance).
    fn group_consumer(&self, group: &str) -> Result<Arc<BaseConsumer>, LogError> {
        let mut groups = lock(&self.inner.groups);
        if let Some(c) = groups.get(group) {
            return Ok(c.clone());
        }
        let consumer: BaseConsumer = self
            .inner
            .config
            .consumer(Some(group))
            .create()
            .map_err(|e| kafka_err(format!("creating a consumer for group `{group}`"), e))?;
        let consumer = Arc::new(consumer);
        groups.insert(group.to_owned(), consumer.clone());
        Ok(consumer)
    }

    fn offsets(commit: &OffsetCommit) -> Result<TopicPartitionList, LogError> {
        let mut tpl = TopicPartitionList::new();
        let next = i64::try_from(commit.next_offset).map_err(|_| {
            LogError::Kafka(format!("offset {} exceeds Kafka's i64", commit.next_offset))
        })?;
        tpl.add_partition_offset(
            &commit.topic,
            to_i32(commit.partition, "partition")?,
            Offset::Offset(next),
        )
        .map_err(|e| kafka_err("offset list", e))?;
        Ok(tpl)
    }

    async fn commit_now(&self, commit: OffsetCommit) -> Result<(), LogError> {
        let consumer = self.group_consumer(&commit.group)?;
        let tpl = Self::offsets(&commit)?;
        blocking(move || {
            consumer.commit(&tpl, CommitMode::Sync).map_err(|e| {
                kafka_err(
                    format!(
                        "committing offset {} of {}/{} for group `{}`",
                        commit.next_offset, commit.topic, commit.partition, commit.group
                    ),
                    e,
                )
            })
        })
        .await
    }

    /// Produces and commits the consumed offset in one Kafka transaction.
    /// Runs as its own task so that a caller who gives up cannot leave a
    /// transaction half open.
    async fn append_transactional(
        &self,
        topic: &str,
        partitions: u32,
        records: Vec<NewRecord>,
        commit: Option<OffsetCommit>,
    ) -> Result<Vec<Appended>, LogError> {
        let log = self.clone();
        let topic = topic.to_owned();
        let task = tokio::spawn(async move {
            let _one_at_a_time = log.inner.transaction.lock().await;
            if let Some(reason) = lock(&log.inner.broken_transactions).clone() {
                return Err(LogError::Kafka(format!(
                    "the transactional producer is unusable since an earlier failure \
                     ({reason}); connect a new KafkaLog"
                )));
            }
            let producer = log.inner.producer.clone();
            producer
                .begin_transaction()
                .map_err(|e| kafka_err("beginning a Kafka transaction", e))?;
            let result = log
                .transaction_body(&topic, partitions, &records, commit)
                .await;
            if let Err(e) = &result {
                let timeout = log.inner.config.timeout;
                let aborted = blocking(move || {
                    producer
                        .abort_transaction(timeout)
                        .map_err(|e| kafka_err("aborting a Kafka transaction", e))
                })
                .await;
                if let Err(abort) = aborted {
                    // Neither committed nor aborted: librdkafka will refuse
                    // every further transaction on this producer.
                    tracing::error!(error = %e, %abort, "a failed Kafka transaction could not be aborted");
                    *lock(&log.inner.broken_transactions) = Some(e.to_string());
                }
            }
            result
        });
        task.await
            .map_err(|e| kafka_err("transactional append task", e))?
    }

    async fn transaction_body(
        &self,
        topic: &str,
        partitions: u32,
        records: &[NewRecord],
        commit: Option<OffsetCommit>,
    ) -> Result<Vec<Appended>, LogError> {
        let appended = self.produce(topic, partitions, records).await?;
        let producer = self.inner.producer.clone();
        let timeout = self.inner.config.timeout;
        if let Some(commit) = commit {
            let consumer = self.group_consumer(&commit.group)?;
            let tpl = Self::offsets(&commit)?;
            let producer = producer.clone();
            blocking(move || {
                let group = consumer.group_metadata().ok_or_else(|| {
                    LogError::Kafka(format!("group `{}` has no metadata", commit.group))
                })?;
                producer
                    .send_offsets_to_transaction(&tpl, &group, timeout)
                    .map_err(|e| {
                        kafka_err(
                            format!(
                                "adding offset {} of {}/{} for group `{}` to the transaction",
                                commit.next_offset, commit.topic, commit.partition, commit.group
                            ),
                            e,
                        )
                    })
            })
            .await?;
        }
        blocking(move || {
            let mut attempt = 1;
            loop {
                match producer.commit_transaction(timeout) {
                    Ok(()) => return Ok(()),
                    // librdkafka's advice for a retriable failure: commit again.
                    Err(KafkaError::Transaction(e)) if e.is_retriable() && attempt < 3 => {
                        tracing::warn!(error = %e, attempt, "retrying a Kafka transaction commit");
                        attempt += 1;
                    }
                    Err(e) => return Err(kafka_err("committing a Kafka transaction", e)),
                }
            }
        })
        .await?;
        Ok(appended)
    }

    fn reader(&self, topic: &str, partition: u32) -> Result<SharedReader, LogError> {
        let mut readers = lock(&self.inner.readers);
        let key = (topic.to_owned(), partition);
        if let Some(r) = readers.get(&key) {
            return Ok(r.clone());
        }
        // librdkafka assigns only within a group; this one never commits.
        let group = format!("{}.reader", self.inner.config.client_id);
        let consumer: BaseConsumer = self
            .inner
            .config
            .consumer(Some(&group))
            .create()
            .map_err(|e| kafka_err(format!("creating a consumer for {topic}/{partition}"), e))?;
        let reader = Arc::new(Mutex::new(PartitionReader {
            consumer,
            topic: topic.to_owned(),
            partition,
            kafka_partition: to_i32(partition, "partition")?,
            next: None,
            timeout: self.inner.config.timeout,
        }));
        readers.insert(key, reader.clone());
        Ok(reader)
    }
}

fn produce_err(topic: &str, partition: u32, e: KafkaError) -> LogError {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            LogError::UnknownTopic(topic.to_owned())
        }
        _ => kafka_err(format!("producing to {topic}/{partition}"), e),
    }
}

/// A partition's reader, locked for the length of one read.
type SharedReader = Arc<Mutex<PartitionReader>>;

/// A consumer assigned to one partition, and where its caller is.
struct PartitionReader {
    consumer: BaseConsumer,
    topic: String,
    partition: u32,
    kafka_partition: i32,
    /// The offset the caller will read next; `None` until positioned, and
    /// after an error that stopped the fetcher.
    next: Option<u64>,
    timeout: Duration,
}

impl PartitionReader {
    fn position_at(&mut self, offset: u64) -> Result<(), LogError> {
        let raw = i64::try_from(offset)
            .map_err(|_| LogError::Kafka(format!("offset {offset} exceeds Kafka's i64")))?;
        let sought = self.next.is_some()
            && self
                .consumer
                .seek(
                    &self.topic,
                    self.kafka_partition,
                    Offset::Offset(raw),
                    self.timeout,
                )
                .is_ok();
        if !sought {
            // Not fetching yet (or the fetcher stopped): (re)assign at the offset.
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&self.topic, self.kafka_partition, Offset::Offset(raw))
                .map_err(|e| kafka_err("offset list", e))?;
            self.consumer.assign(&tpl).map_err(|e| {
                kafka_err(
                    format!("assigning {}/{} at {offset}", self.topic, self.partition),
                    e,
                )
            })?;
        }
        self.next = Some(offset);
        Ok(())
    }

    /// The offset past everything the consumer has seen, control records
    /// (transaction markers) included.
    fn consumer_position(&self) -> Option<u64> {
        let positions = self.consumer.position().ok()?;
        let elem = positions.find_partition(&self.topic, self.kafka_partition)?;
        match elem.offset() {
            Offset::Offset(o) => u64::try_from(o).ok(),
            _ => None,
        }
    }

    /// The partition's (log start, end) offsets for this consumer's isolation level.
    fn watermarks(&self) -> Result<(i64, i64), LogError> {
        self.consumer
            .fetch_watermarks(&self.topic, self.kafka_partition, self.timeout)
            .map_err(|e| {
                kafka_err(
                    format!("end offset of {}/{}", self.topic, self.partition),
                    e,
                )
            })
    }

    /// Whether the broker holds a record at or after `offset` that this
    /// consumer could deliver (the last stable offset when read_committed).
    fn behind(&self, offset: u64) -> Result<bool, LogError> {
        let (_, high) = self.watermarks()?;
        let seen = self.consumer_position().unwrap_or(0).max(offset);
        Ok((seen as i64) < high)
    }

    fn read(&mut self, offset: u64, max: usize, wait: Duration) -> Result<Vec<Record>, LogError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        if self.next != Some(offset) {
            self.position_at(offset)?;
        }
        // `None`: wait forever (the deadline does not fit in an Instant).
        let deadline = Instant::now().checked_add(wait);
        // Set once `wait` is over while the broker holds records we have not
        // seen: they are still returned, if they arrive within the timeout.
        let mut catch_up: Option<Instant> = None;
        let mut out = Vec::new();
        while out.len() < max {
            let now = Instant::now();
            let slice = match (out.is_empty(), deadline, catch_up) {
                (false, _, _) => Duration::ZERO,
                (true, None, _) => Duration::from_secs(1),
                (true, Some(d), _) if d > now => (d - now).min(Duration::from_secs(1)),
                (true, _, Some(_)) => Duration::from_millis(50),
                (true, _, None) => Duration::ZERO,
            };
            match self.consumer.poll(slice) {
                Some(Ok(m)) => {
                    let Ok(at) = u64::try_from(m.offset()) else {
                        continue;
                    };
                    // Fetched before the last seek: already read or skipped.
                    if at < self.next.unwrap_or(offset) {
                        continue;
                    }
                    let timestamp = record_timestamp(
                        m.timestamp().to_millis(),
                        &self.topic,
                        self.partition,
                        at,
                    )?;
                    out.push(Record {
                        partition: self.partition,
                        offset: at,
                        timestamp,
                        key: m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                        payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                    });
                    self.next = Some(at + 1);
                }
                Some(Err(e)) if out.is_empty() => {
                    if out_of_range(&e) {
                        // The fetcher stopped; the next read must reposition.
                        self.next = None;
                        // Past the end is "nothing yet", as in the embedded log.
                        let (_, high) = self.watermarks()?;
                        if u64::try_from(high).is_ok_and(|high| offset > high) {
                            let rest = deadline.map_or(self.timeout, |d| {
                                d.saturating_duration_since(Instant::now())
                            });
                            std::thread::sleep(rest.min(self.timeout));
                            return Ok(out);
                        }
                    }
                    return Err(self.consume_err(offset, e));
                }
                Some(Err(e)) => {
                    tracing::warn!(topic = %self.topic, partition = self.partition, error = %e,
                        "Kafka consumer error after a partial read; returning what was read");
                    break;
                }
                None if !out.is_empty() => break,
                None if deadline.is_none_or(|d| Instant::now() < d) => {}
                None => match catch_up {
                    None if self.behind(offset)? => catch_up = Some(Instant::now() + self.timeout),
                    None => break,
                    Some(until) if Instant::now() < until => {
                        if !self.behind(offset)? {
                            break;
                        }
                    }
                    Some(_) => {
                        tracing::warn!(topic = %self.topic, partition = self.partition, offset,
                            timeout = ?self.timeout,
                            "the broker holds records past this offset but sent none in time");
                        break;
                    }
                },
            }
        }
        Ok(out)
    }

    fn consume_err(&mut self, offset: u64, e: KafkaError) -> LogError {
        if out_of_range(&e) {
            self.next = None;
            return LogError::Kafka(format!(
                "offset {offset} of {}/{} is no longer in the log",
                self.topic, self.partition
            ));
        }
        if matches!(
            e.rdkafka_error_code(),
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic)
        ) {
            self.next = None;
            return LogError::UnknownTopic(self.topic.clone());
        }
        kafka_err(format!("reading {}/{}", self.topic, self.partition), e)
    }
}

fn out_of_range(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange)
    )
}

#[async_trait]
impl EventLog for KafkaLog {
    async fn create_topic(&self, topic: &str, partitions: u32) -> Result<u32, LogError> {
        if partitions == 0 {
            return Err(LogError::NoPartitions);
        }
        if let Some(count) = self.cached_partitions(topic) {
            return Ok(count);
        }
        let replication = i32::from(self.inner.config.replication_factor);
        let max_record_bytes = self.inner.config.max_record_bytes.to_string();
        let new = NewTopic::new(
            topic,
            to_i32(partitions, "partition count")?,
            TopicReplication::Fixed(replication),
        )
        .set("max.message.bytes", &max_record_bytes);
        let options = AdminOptions::new()
            .operation_timeout(Some(self.inner.config.timeout))
            .request_timeout(Some(self.inner.config.timeout));
        let results = self
            .inner
            .admin
            .create_topics([&new], &options)
            .await
            .map_err(|e| kafka_err(format!("creating topic `{topic}`"), e))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => return Err(kafka_err(format!("creating topic `{topic}`"), code)),
            }
        }
        let count = self.await_topic(topic).await?;
        self.remember(topic, count);
        Ok(count)
    }

    async fn partition_count(&self, topic: &str) -> Result<u32, LogError> {
        self.partitions(topic).await
    }

    async fn append(
        &self,
        topic: &str,
        records: Vec<NewRecord>,
        commit: Option<OffsetCommit>,
    ) -> Result<Vec<Appended>, LogError> {
        let partitions = self.partitions(topic).await?;
        if let Some(c) = &commit {
            self.check_partition(&c.topic, c.partition).await?;
        }
        if self.inner.config.transactional {
            return self
                .append_transactional(topic, partitions, records, commit)
                .await;
        }
        let appended = self.produce(topic, partitions, &records).await?;
        if let Some(c) = commit {
            self.commit_now(c).await?;
        }
        Ok(appended)
    }

    async fn read(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Record>, LogError> {
        self.check_partition(topic, partition).await?;
        let reader = self.reader(topic, partition)?;
        blocking(move || lock(&reader).read(offset, max, wait)).await
    }

    async fn end_offset(&self, topic: &str, partition: u32) -> Result<u64, LogError> {
        self.check_partition(topic, partition).await?;
        let (meta, name, timeout) = (
            self.inner.meta.clone(),
            topic.to_owned(),
            self.inner.config.timeout,
        );
        let p = to_i32(partition, "partition")?;
        let (_, high) = blocking(move || {
            meta.fetch_watermarks(&name, p, timeout)
                .map_err(|e| kafka_err(format!("end offset of {name}/{partition}"), e))
        })
        .await?;
        Ok(high.max(0) as u64)
    }

    async fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        at: Timestamp,
    ) -> Result<u64, LogError> {
        self.check_partition(topic, partition).await?;
        let (meta, name, timeout) = (
            self.inner.meta.clone(),
            topic.to_owned(),
            self.inner.config.timeout,
        );
        let p = to_i32(partition, "partition")?;
        let millis = ceil_millis(at);
        let (found, low, high) = blocking(move || {
            let what = || format!("offset for {at} in {name}/{partition}");
            let (low, high) = meta
                .fetch_watermarks(&name, p, timeout)
                .map_err(|e| kafka_err(what(), e))?;
            let (low, high) = (low.max(0) as u64, high.max(0) as u64);
            // Kafka gives negative timestamps special meanings; every record
            // is at or after any instant up to the epoch.
            if millis <= 0 {
                return Ok((Some(low), low, high));
            }
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&name, p, Offset::Offset(millis))
                .map_err(|e| kafka_err(what(), e))?;
            let found = meta
                .offsets_for_times(tpl, timeout)
                .map_err(|e| kafka_err(what(), e))?;
            let elem = found
                .find_partition(&name, p)
                .ok_or_else(|| LogError::Kafka(format!("{}: no answer", what())))?;
            elem.error().map_err(|e| kafka_err(what(), e))?;
            Ok(match elem.offset() {
                Offset::Offset(o) if o >= 0 => (Some(o as u64), low, high),
                // No record at or after the instant.
                _ => (None, low, high),
            })
        })
        .await?;
        match found {
            None => Ok(high),
            // Some brokers (tansu 0.6) answer the log start instead of "none":
            // believe that answer only if the record there is late enough.
            Some(o) if o == low && o < high && millis > 0 => {
                let first = self
                    .read(topic, partition, o, 1, self.inner.config.timeout)
                    .await?;
                Ok(match first.first() {
                    Some(r) if r.timestamp >= at => o,
                    _ => high,
                })
            }
            Some(o) => Ok(o.min(high)),
        }
    }

    async fn commit_offset(&self, commit: OffsetCommit) -> Result<(), LogError> {
        self.check_partition(&commit.topic, commit.partition)
            .await?;
        self.commit_now(commit).await
    }

    async fn join(&self, group: &str, topic: &str) -> Result<Box<dyn crate::Membership>, LogError> {
        self.check_partition(topic, 0).await?;
        Ok(Box::new(KafkaMembership::start(
            &self.inner.config,
            group,
            topic,
        )?))
    }

    async fn committed_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<u64>, LogError> {
        self.check_partition(topic, partition).await?;
        let consumer = self.group_consumer(group)?;
        let (name, group, timeout) = (
            topic.to_owned(),
            group.to_owned(),
            self.inner.config.timeout,
        );
        let p = to_i32(partition, "partition")?;
        blocking(move || {
            let what = || format!("committed offset of group `{group}` on {name}/{partition}");
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&name, p);
            let found = consumer
                .committed_offsets(tpl, timeout)
                .map_err(|e| kafka_err(what(), e))?;
            let elem = found
                .find_partition(&name, p)
                .ok_or_else(|| LogError::Kafka(format!("{}: no answer", what())))?;
            elem.error().map_err(|e| kafka_err(what(), e))?;
            Ok(match elem.offset() {
                Offset::Offset(o) if o >= 0 => Some(o as u64),
                _ => None,
            })
        })
        .await
    }
}

/// Receives rebalances of a subscribed (but paused) consumer.
struct MemberContext {
    topic: String,
    changes: tokio::sync::mpsc::UnboundedSender<crate::Assignment>,
    /// Set while this member holds no partitions after a revocation.
    revoked_since: Arc<Mutex<Option<Instant>>>,
}

fn partitions_of(list: &TopicPartitionList, topic: &str) -> Vec<u32> {
    list.elements()
        .iter()
        .filter(|e| e.topic() == topic)
        .filter_map(|e| u32::try_from(e.partition()).ok())
        .collect()
}

impl rdkafka::ClientContext for MemberContext {}

impl rdkafka::consumer::ConsumerContext for MemberContext {
    /// Blocks the rebalance until the owner has stopped work on the revoked
    /// partitions (or the release times out), so no two members ever work on
    /// one partition at once.
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &rdkafka::consumer::Rebalance<'_>) {
        if let rdkafka::consumer::Rebalance::Revoke(list) = rebalance {
            let partitions = partitions_of(list, &self.topic);
            if partitions.is_empty() {
                return;
            }
            let (release, released) = crate::Release::pair();
            if self
                .changes
                .send(crate::Assignment::Revoked {
                    partitions,
                    release,
                })
                .is_ok()
                && released.recv_timeout(crate::RELEASE_TIMEOUT).is_err()
            {
                tracing::warn!(topic = %self.topic, "partitions released before their owner confirmed");
            }
        }
    }

    /// Pauses the new partitions (membership only; records are read
    /// elsewhere) and reports them.
    fn post_rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        rebalance: &rdkafka::consumer::Rebalance<'_>,
    ) {
        if let rdkafka::consumer::Rebalance::Revoke(_) = rebalance {
            *lock(&self.revoked_since) = Some(Instant::now());
        }
        if let rdkafka::consumer::Rebalance::Assign(list) = rebalance {
            *lock(&self.revoked_since) = None;
            if let Err(e) = consumer.pause(list) {
                tracing::warn!(error = %e, "pausing the membership consumer");
            }
            let partitions = partitions_of(list, &self.topic);
            if !partitions.is_empty() {
                let _ = self.changes.send(crate::Assignment::Assigned(partitions));
            }
        }
    }
}

/// A consumer-group membership on Kafka: a subscribed consumer whose
/// partitions stay paused, polled on its own thread.
struct KafkaMembership {
    changes: tokio::sync::mpsc::UnboundedReceiver<crate::Assignment>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long a member may sit revoked without a new assignment before it
/// leaves and joins again. A rebalance whose leader died can stall on some
/// brokers (tansu 0.6 among them); a fresh join restarts it.
const STALLED_REBALANCE: Duration = Duration::from_secs(15);

fn member_consumer(
    config: &KafkaConfig,
    group: &str,
    topic: &str,
    changes: tokio::sync::mpsc::UnboundedSender<crate::Assignment>,
    revoked_since: Arc<Mutex<Option<Instant>>>,
) -> Result<BaseConsumer<MemberContext>, LogError> {
    let mut c = config.consumer(Some(group));
    // Membership only: its partitions stay paused, so where it would start reading is moot.
    c.set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "1000")
        .set("auto.offset.reset", "latest");
    let consumer: BaseConsumer<MemberContext> = c
        .create_with_context(MemberContext {
            topic: topic.to_owned(),
            changes,
            revoked_since,
        })
        .map_err(|e| kafka_err(format!("joining consumer group {group}"), e))?;
    consumer
        .subscribe(&[topic])
        .map_err(|e| kafka_err(format!("subscribing {group} to {topic}"), e))?;
    Ok(consumer)
}

impl KafkaMembership {
    fn start(config: &KafkaConfig, group: &str, topic: &str) -> Result<Self, LogError> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let revoked_since = Arc::new(Mutex::new(None));
        let mut consumer =
            member_consumer(config, group, topic, tx.clone(), revoked_since.clone())?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let (config, group, topic) = (config.clone(), group.to_owned(), topic.to_owned());
        let thread = std::thread::Builder::new()
            .name("chronicle-kafka-member".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                        tracing::warn!(error = %e, "consumer group membership");
                    }
                    let stalled =
                        lock(&revoked_since).is_some_and(|t| t.elapsed() > STALLED_REBALANCE);
                    if stalled {
                        tracing::warn!(%group, "rebalance stalled; leaving and joining again");
                        consumer.unsubscribe();
                        *lock(&revoked_since) = None;
                        match member_consumer(
                            &config,
                            &group,
                            &topic,
                            tx.clone(),
                            revoked_since.clone(),
                        ) {
                            Ok(fresh) => consumer = fresh,
                            Err(e) => tracing::error!(error = %e, "rejoining the consumer group"),
                        }
                    }
                }
                consumer.unsubscribe();
            })
            .map_err(|e| kafka_err("starting the membership thread", e))?;
        Ok(KafkaMembership {
            changes: rx,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for KafkaMembership {
    fn drop(&mut self) {
        // Nobody will confirm releases any more: let the leaving rebalance pass.
        self.changes.close();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[async_trait]
impl crate::Membership for KafkaMembership {
    async fn next(&mut self) -> Result<crate::Assignment, LogError> {
        self.changes
            .recv()
            .await
            .ok_or_else(|| LogError::Kafka("the membership consumer stopped".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_up_to_whole_milliseconds() {
        let t = |us| Timestamp::from_micros(us).unwrap();
        assert_eq!(ceil_millis(t(5_000)), 5);
        assert_eq!(ceil_millis(t(5_001)), 6);
        assert_eq!(ceil_millis(t(-1_500)), -1);
        assert_eq!(
            ceil_millis(Timestamp::MIN),
            Timestamp::MIN.as_micros() / 1000
        );
    }

    #[test]
    fn settings_override_defaults_and_transactions_read_committed() {
        let config = KafkaConfig {
            transactional: true,
            ..KafkaConfig::new("127.0.0.1:9092").with_setting("linger.ms", "0")
        };
        let producer = config.producer();
        assert_eq!(producer.get("linger.ms"), Some("0"));
        assert_eq!(producer.get("enable.idempotence"), Some("true"));
        assert_eq!(producer.get("acks"), Some("all"));
        assert_eq!(producer.get("transactional.id"), Some("chronicle"));
        assert_eq!(producer.get("message.max.bytes"), Some("16777216"));
        let consumer = config.consumer(Some("g"));
        assert_eq!(consumer.get("isolation.level"), Some("read_committed"));
        assert_eq!(consumer.get("enable.auto.commit"), Some("false"));
        assert_eq!(consumer.get("group.id"), Some("g"));
        let plain = KafkaConfig::new("127.0.0.1:9092").consumer(None);
        assert_eq!(plain.get("isolation.level"), Some("read_uncommitted"));
        assert_eq!(plain.get("group.id"), None);
    }
}
