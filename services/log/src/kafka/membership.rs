//! Group membership: a subscribed, paused consumer whose rebalances tell a
//! worker which partitions it owns.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::TopicPartitionList;

use super::{KafkaConfig, kafka_err, kafka_failure, lock};
use crate::LogError;

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
pub(super) struct KafkaMembership {
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
    pub(super) fn start(config: &KafkaConfig, group: &str, topic: &str) -> Result<Self, LogError> {
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
            .ok_or_else(|| kafka_failure("the membership consumer stopped".into()))
    }
}
