//! Reads: one assigned consumer per (topic, partition), repositioned only
//! when the caller asks for a different offset.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{KafkaLog, kafka_err, kafka_failure, lock, record_timestamp, to_i32};
use crate::{LogError, Record};
impl KafkaLog {
    pub(super) fn reader(&self, topic: &str, partition: u32) -> Result<SharedReader, LogError> {
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

/// A partition's reader, locked for the length of one read.
pub(super) type SharedReader = Arc<Mutex<PartitionReader>>;

/// A consumer assigned to one partition, and where its caller is.
pub(super) struct PartitionReader {
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
            .map_err(|_| kafka_failure(format!("offset {offset} exceeds Kafka's i64")))?;
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

    pub(super) fn read(
        &mut self,
        offset: u64,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Record>, LogError> {
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
            return kafka_failure(format!(
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

pub(super) fn out_of_range(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange)
    )
}
