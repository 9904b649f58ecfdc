//! Client settings: what every producer, consumer and admin client of a
//! `KafkaLog` is built from.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;

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

    pub(super) fn client(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("client.id", &self.client_id)
            // Topics exist only when created explicitly.
            .set("allow.auto.create.topics", "false");
        c
    }

    pub(super) fn finish(&self, mut c: ClientConfig) -> ClientConfig {
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

    pub(super) fn producer(&self) -> ClientConfig {
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
    pub(super) fn consumer(&self, group: Option<&str>) -> ClientConfig {
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
