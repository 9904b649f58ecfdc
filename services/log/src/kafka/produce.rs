//! Appends: the idempotent producer, hand-committed offsets and Kafka
//! transactions that publish records and a consumer offset together.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{
    KafkaLog, blocking, kafka_err, kafka_failure, lock, now_millis, record_timestamp, to_i32,
    with_causes,
};
use crate::{Appended, LogError, NewRecord, OffsetCommit, partition_for};
impl KafkaLog {
    /// The timestamp for the next record: now, but never before the last one.
    fn next_timestamp(&self) -> i64 {
        let now = now_millis();
        let previous = self.inner.last_timestamp.fetch_max(now, Ordering::SeqCst);
        previous.max(now)
    }

    /// Enqueues every record on its partition, in order, then waits for all
    /// deliveries. Records delivered before a failure stay in the log (unless
    /// a surrounding transaction is aborted).
    pub(super) async fn produce(
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
                        kafka_failure(format!(
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
    pub(super) fn group_consumer(&self, group: &str) -> Result<Arc<BaseConsumer>, LogError> {
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
            kafka_failure(format!("offset {} exceeds Kafka's i64", commit.next_offset))
        })?;
        tpl.add_partition_offset(
            &commit.topic,
            to_i32(commit.partition, "partition")?,
            Offset::Offset(next),
        )
        .map_err(|e| kafka_err("offset list", e))?;
        Ok(tpl)
    }

    pub(super) async fn commit_now(&self, commit: OffsetCommit) -> Result<(), LogError> {
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
    pub(super) async fn append_transactional(
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
                return Err(kafka_failure(format!(
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
                    *lock(&log.inner.broken_transactions) = Some(with_causes(&e));
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
                    kafka_failure(format!("group `{}` has no metadata", commit.group))
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
}

pub(super) fn produce_err(topic: &str, partition: u32, e: KafkaError) -> LogError {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            LogError::UnknownTopic(topic.to_owned())
        }
        _ => kafka_err(format!("producing to {topic}/{partition}"), e),
    }
}
