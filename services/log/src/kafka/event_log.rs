//! The `EventLog` port on the pieces of the sibling modules.

use std::time::Duration;

use async_trait::async_trait;
use chronicle_model::Timestamp;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::membership::KafkaMembership;
use super::{KafkaLog, blocking, ceil_millis, kafka_err, kafka_failure, lock, to_i32};
use crate::{Appended, EventLog, LogError, NewRecord, OffsetCommit, Record};
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
            // `None`: no record at or after the instant.
            Ok((answered_offset(&found, &name, p, &what)?, low, high))
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
            answered_offset(&found, &name, p, &what)
        })
        .await
    }
}

/// The offset the broker answered for one partition of a request; `None`
/// when it has none (no such record, nothing committed).
fn answered_offset(
    found: &TopicPartitionList,
    topic: &str,
    partition: i32,
    what: &dyn Fn() -> String,
) -> Result<Option<u64>, LogError> {
    let elem = found
        .find_partition(topic, partition)
        .ok_or_else(|| kafka_failure(format!("{}: no answer", what())))?;
    elem.error().map_err(|e| kafka_err(what(), e))?;
    Ok(match elem.offset() {
        Offset::Offset(o) if o >= 0 => Some(o as u64),
        _ => None,
    })
}
