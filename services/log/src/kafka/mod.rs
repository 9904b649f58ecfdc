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

mod config;
mod event_log;
mod membership;
mod produce;
mod reader;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronicle_model::Timestamp;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::types::RDKafkaRespErr;

use crate::{BoxError, LogError};

pub use config::KafkaConfig;
use reader::SharedReader;

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

/// A failed Kafka call: what the log was doing, and the client's error.
fn kafka_err(what: impl fmt::Display, e: impl Into<BoxError>) -> LogError {
    LogError::Kafka {
        context: what.to_string(),
        source: Some(e.into()),
    }
}

/// An error with its causes, as one line: what is remembered of a failure
/// that later calls report.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// A Kafka failure the client did not raise (a missing answer, a value out
/// of Kafka's range).
fn kafka_failure(context: String) -> LogError {
    LogError::Kafka {
        context,
        source: None,
    }
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
    i32::try_from(value).map_err(|_| kafka_failure(format!("{what} {value} exceeds Kafka's i32")))
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
                    return Err(kafka_failure(format!(
                        "topic `{topic}` was created but has no leader for every \
                         partition after {:?}",
                        self.inner.config.timeout
                    )));
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
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
