//! The embedded log: redb tables, one group-committing writer thread.
//!
//! Appends from any number of tasks are queued to a single writer thread,
//! which folds everything queued into one write transaction and commits it
//! with `Durability::Immediate` (fsync) before acknowledging each caller. An
//! acknowledged record therefore survives `kill -9`; a record that was not
//! acknowledged is either wholly present or wholly absent (redb commits are
//! atomic), never torn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use chronicle_model::Timestamp;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, TableError};
use tokio::sync::{oneshot, watch};

use crate::{Appended, EventLog, LogError, NewRecord, OffsetCommit, Record, partition_for};

/// `(topic, partition, offset) -> [timestamp µs: i64 LE][key length: u32 LE][key][payload]`
const RECORDS: TableDefinition<(&str, u32, u64), &[u8]> = TableDefinition::new("records");
/// `(topic, partition) -> (next offset, last timestamp µs)`
const HEADS: TableDefinition<(&str, u32), (u64, i64)> = TableDefinition::new("heads");
/// `topic -> partition count`
const TOPICS: TableDefinition<&str, u32> = TableDefinition::new("topics");
/// `(consumer group, topic, partition) -> next offset`
const CONSUMER_OFFSETS: TableDefinition<(&str, &str, u32), u64> =
    TableDefinition::new("consumer_offsets");

/// How many queued requests one write transaction absorbs at most.
const MAX_GROUP_COMMIT: usize = 4096;

/// Tuning of the embedded log.
#[derive(Clone, Debug)]
pub struct EmbeddedLogOptions {
    /// fsync every commit (the default). Off only for benchmarks that must
    /// exclude disk flushes; then a crash may lose acknowledged records.
    pub durable: bool,
    /// redb page cache, in bytes.
    pub cache_bytes: usize,
}

impl Default for EmbeddedLogOptions {
    fn default() -> Self {
        EmbeddedLogOptions {
            durable: true,
            cache_bytes: 64 * 1024 * 1024,
        }
    }
}

/// A durable, partitioned log in one redb file.
#[derive(Clone)]
pub struct EmbeddedLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EmbeddedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmbeddedLog({})", self.inner.path.display())
    }
}

struct Inner {
    path: PathBuf,
    db: Arc<Database>,
    writer: Option<std_mpsc::Sender<WriteRequest>>,
    writer_thread: Option<std::thread::JoinHandle<()>>,
    commits: watch::Receiver<u64>,
    topics: RwLock<HashMap<String, u32>>,
}

impl Drop for Inner {
    /// Stops the writer and waits for it, so the file is released when the
    /// last handle goes (a reopen in the same process then succeeds).
    fn drop(&mut self) {
        drop(self.writer.take());
        if let Some(t) = self.writer_thread.take() {
            let _ = t.join();
        }
    }
}

enum WriteRequest {
    Append {
        topic: String,
        partitions: u32,
        records: Vec<NewRecord>,
        commit: Option<OffsetCommit>,
        reply: oneshot::Sender<Result<Vec<Appended>, LogError>>,
    },
    CreateTopic {
        topic: String,
        partitions: u32,
        reply: oneshot::Sender<Result<u32, LogError>>,
    },
    Commit {
        commit: OffsetCommit,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
}

fn storage_err(path: &Path, e: impl Into<crate::BoxError>) -> LogError {
    LogError::Storage {
        path: path.display().to_string(),
        source: e.into(),
    }
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn encode_value(ts: i64, key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + key.len() + payload.len());
    v.extend_from_slice(&ts.to_le_bytes());
    v.extend_from_slice(&(key.len() as u32).to_le_bytes());
    v.extend_from_slice(key);
    v.extend_from_slice(payload);
    v
}

fn decode_value(bytes: &[u8]) -> Result<(i64, Vec<u8>, Vec<u8>), String> {
    if bytes.len() < 12 {
        return Err(format!(
            "value is {} bytes, shorter than its 12-byte header",
            bytes.len()
        ));
    }
    let ts = i64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let key_len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let rest = &bytes[12..];
    if rest.len() < key_len {
        return Err(format!(
            "key length {key_len} exceeds the {} bytes left",
            rest.len()
        ));
    }
    Ok((ts, rest[..key_len].to_vec(), rest[key_len..].to_vec()))
}

impl EmbeddedLog {
    /// Opens (or creates) the log in `path` (a file).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LogError> {
        Self::open_with(path, EmbeddedLogOptions::default())
    }

    /// Opens (or creates) the log with explicit options.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: EmbeddedLogOptions,
    ) -> Result<Self, LogError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| storage_err(&path, e))?;
        }
        let db = Database::builder()
            .set_cache_size(options.cache_bytes)
            .create(&path)
            .map_err(|e| storage_err(&path, e))?;
        let db = Arc::new(db);

        // Make sure every table exists, and load the topic catalogue.
        let txn = db.begin_write().map_err(|e| storage_err(&path, e))?;
        {
            txn.open_table(RECORDS).map_err(|e| storage_err(&path, e))?;
            txn.open_table(HEADS).map_err(|e| storage_err(&path, e))?;
            txn.open_table(TOPICS).map_err(|e| storage_err(&path, e))?;
            txn.open_table(CONSUMER_OFFSETS)
                .map_err(|e| storage_err(&path, e))?;
        }
        txn.commit().map_err(|e| storage_err(&path, e))?;
        let mut topics = HashMap::new();
        {
            let read = db.begin_read().map_err(|e| storage_err(&path, e))?;
            let table = read.open_table(TOPICS).map_err(|e| storage_err(&path, e))?;
            for row in table.iter().map_err(|e| storage_err(&path, e))? {
                let (k, v) = row.map_err(|e| storage_err(&path, e))?;
                topics.insert(k.value().to_owned(), v.value());
            }
        }

        let (tx, rx) = std_mpsc::channel();
        let (commits_tx, commits_rx) = watch::channel(0u64);
        let writer = Writer {
            path: path.clone(),
            db: db.clone(),
            durable: options.durable,
            commits: commits_tx,
        };
        let writer_thread = std::thread::Builder::new()
            .name("chronicle-log-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| storage_err(&path, e))?;

        Ok(EmbeddedLog {
            inner: Arc::new(Inner {
                path,
                db,
                writer: Some(tx),
                writer_thread: Some(writer_thread),
                commits: commits_rx,
                topics: RwLock::new(topics),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Topics and their partition counts.
    pub fn topics(&self) -> HashMap<String, u32> {
        self.inner.topics.read().expect("topics lock").clone()
    }

    fn partitions(&self, topic: &str) -> Result<u32, LogError> {
        self.inner
            .topics
            .read()
            .expect("topics lock")
            .get(topic)
            .copied()
            .ok_or_else(|| LogError::UnknownTopic(topic.to_owned()))
    }

    fn check_partition(&self, topic: &str, partition: u32) -> Result<(), LogError> {
        let count = self.partitions(topic)?;
        if partition >= count {
            return Err(LogError::NoSuchPartition {
                topic: topic.to_owned(),
                partition,
                count,
            });
        }
        Ok(())
    }

    fn send(&self, request: WriteRequest) -> Result<(), LogError> {
        self.inner
            .writer
            .as_ref()
            .ok_or(LogError::Closed)?
            .send(request)
            .map_err(|_| LogError::Closed)
    }

    fn read_now(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max: usize,
    ) -> Result<Vec<Record>, LogError> {
        let path = &self.inner.path;
        let read = self
            .inner
            .db
            .begin_read()
            .map_err(|e| storage_err(path, e))?;
        let table = read.open_table(RECORDS).map_err(|e| storage_err(path, e))?;
        let mut out = Vec::new();
        for row in table
            .range((topic, partition, offset)..=(topic, partition, u64::MAX))
            .map_err(|e| storage_err(path, e))?
            .take(max)
        {
            let (k, v) = row.map_err(|e| storage_err(path, e))?;
            let (_, _, offset) = k.value();
            let (ts, key, payload) =
                decode_value(v.value()).map_err(|reason| LogError::Corrupt {
                    topic: topic.to_owned(),
                    partition,
                    offset,
                    reason,
                })?;
            let timestamp = Timestamp::from_micros(ts).map_err(|e| LogError::Corrupt {
                topic: topic.to_owned(),
                partition,
                offset,
                reason: e.to_string(),
            })?;
            out.push(Record {
                partition,
                offset,
                timestamp,
                key,
                payload,
            });
        }
        Ok(out)
    }

    fn head(&self, topic: &str, partition: u32) -> Result<(u64, i64), LogError> {
        let path = &self.inner.path;
        let read = self
            .inner
            .db
            .begin_read()
            .map_err(|e| storage_err(path, e))?;
        let table = read.open_table(HEADS).map_err(|e| storage_err(path, e))?;
        Ok(table
            .get((topic, partition))
            .map_err(|e| storage_err(path, e))?
            .map(|v| v.value())
            .unwrap_or((0, i64::MIN)))
    }
}

#[async_trait]
impl EventLog for EmbeddedLog {
    async fn create_topic(&self, topic: &str, partitions: u32) -> Result<u32, LogError> {
        if partitions == 0 {
            return Err(LogError::NoPartitions);
        }
        if let Ok(existing) = self.partitions(topic) {
            return Ok(existing);
        }
        let (reply, rx) = oneshot::channel();
        self.send(WriteRequest::CreateTopic {
            topic: topic.to_owned(),
            partitions,
            reply,
        })?;
        let count = rx.await.map_err(|_| LogError::Closed)??;
        self.inner
            .topics
            .write()
            .expect("topics lock")
            .insert(topic.to_owned(), count);
        Ok(count)
    }

    async fn partition_count(&self, topic: &str) -> Result<u32, LogError> {
        self.partitions(topic)
    }

    async fn append(
        &self,
        topic: &str,
        records: Vec<NewRecord>,
        commit: Option<OffsetCommit>,
    ) -> Result<Vec<Appended>, LogError> {
        let partitions = self.partitions(topic)?;
        if let Some(c) = &commit {
            self.check_partition(&c.topic, c.partition)?;
        }
        let (reply, rx) = oneshot::channel();
        self.send(WriteRequest::Append {
            topic: topic.to_owned(),
            partitions,
            records,
            commit,
            reply,
        })?;
        rx.await.map_err(|_| LogError::Closed)?
    }

    async fn read(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Record>, LogError> {
        self.check_partition(topic, partition)?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut commits = self.inner.commits.clone();
        loop {
            commits.borrow_and_update();
            let records = self.read_now(topic, partition, offset, max)?;
            if !records.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(records);
            }
            match tokio::time::timeout_at(deadline, commits.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(LogError::Closed),
                Err(_) => return Ok(Vec::new()),
            }
        }
    }

    async fn end_offset(&self, topic: &str, partition: u32) -> Result<u64, LogError> {
        self.check_partition(topic, partition)?;
        Ok(self.head(topic, partition)?.0)
    }

    async fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        at: Timestamp,
    ) -> Result<u64, LogError> {
        self.check_partition(topic, partition)?;
        // Timestamps are monotonic inside a partition, so binary search works.
        let (mut lo, mut hi) = (0u64, self.head(topic, partition)?.0);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let rec = self.read_now(topic, partition, mid, 1)?;
            match rec.first() {
                Some(r) if r.timestamp < at => lo = mid + 1,
                _ => hi = mid,
            }
        }
        Ok(lo)
    }

    async fn commit_offset(&self, commit: OffsetCommit) -> Result<(), LogError> {
        self.check_partition(&commit.topic, commit.partition)?;
        let (reply, rx) = oneshot::channel();
        self.send(WriteRequest::Commit { commit, reply })?;
        rx.await.map_err(|_| LogError::Closed)?
    }

    async fn join(
        &self,
        _group: &str,
        topic: &str,
    ) -> Result<Box<dyn crate::Membership>, LogError> {
        // One process owns the embedded log, so it is the only member.
        let count = self.partitions(topic)?;
        Ok(Box::new(crate::membership::SoleMember {
            partitions: Some((0..count).collect()),
        }))
    }

    async fn committed_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<u64>, LogError> {
        self.check_partition(topic, partition)?;
        let path = &self.inner.path;
        let read = self
            .inner
            .db
            .begin_read()
            .map_err(|e| storage_err(path, e))?;
        let table = match read.open_table(CONSUMER_OFFSETS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(storage_err(path, e)),
        };
        Ok(table
            .get((group, topic, partition))
            .map_err(|e| storage_err(path, e))?
            .map(|v| v.value()))
    }
}

/// The single writer: drains queued requests into one transaction per commit.
struct Writer {
    path: PathBuf,
    db: Arc<Database>,
    durable: bool,
    commits: watch::Sender<u64>,
}

enum Reply {
    Append(
        oneshot::Sender<Result<Vec<Appended>, LogError>>,
        Vec<Appended>,
    ),
    Topic(oneshot::Sender<Result<u32, LogError>>, u32),
    Commit(oneshot::Sender<Result<(), LogError>>),
}

impl Reply {
    fn fail(self, message: &str, path: &Path) {
        let err = || storage_err(path, message);
        match self {
            Reply::Append(tx, _) => drop(tx.send(Err(err()))),
            Reply::Topic(tx, _) => drop(tx.send(Err(err()))),
            Reply::Commit(tx) => drop(tx.send(Err(err()))),
        }
    }

    fn succeed(self) {
        match self {
            Reply::Append(tx, appended) => drop(tx.send(Ok(appended))),
            Reply::Topic(tx, count) => drop(tx.send(Ok(count))),
            Reply::Commit(tx) => drop(tx.send(Ok(()))),
        }
    }
}

impl Writer {
    fn run(self, rx: std_mpsc::Receiver<WriteRequest>) {
        let mut sequence = 0u64;
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_GROUP_COMMIT {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            let mut replies = Vec::with_capacity(batch.len());
            match self.write(batch, &mut replies) {
                Ok(()) => {
                    for r in replies {
                        r.succeed();
                    }
                    sequence += 1;
                    self.commits.send_replace(sequence);
                }
                Err(message) => {
                    tracing::error!(path = %self.path.display(), %message, "embedded log commit failed");
                    for r in replies {
                        r.fail(&message, &self.path);
                    }
                }
            }
        }
    }

    fn write(&self, batch: Vec<WriteRequest>, replies: &mut Vec<Reply>) -> Result<(), String> {
        let mut txn = self.db.begin_write().map_err(|e| e.to_string())?;
        if !self.durable {
            txn.set_durability(Durability::None)
                .map_err(|e| e.to_string())?;
        }
        let result = (|| -> Result<(), String> {
            let mut records = txn.open_table(RECORDS).map_err(|e| e.to_string())?;
            let mut heads = txn.open_table(HEADS).map_err(|e| e.to_string())?;
            let mut topics = txn.open_table(TOPICS).map_err(|e| e.to_string())?;
            let mut offsets = txn
                .open_table(CONSUMER_OFFSETS)
                .map_err(|e| e.to_string())?;
            let now = now_micros();
            for request in batch {
                match request {
                    WriteRequest::CreateTopic {
                        topic,
                        partitions,
                        reply,
                    } => {
                        let existing = topics
                            .get(topic.as_str())
                            .map_err(|e| e.to_string())?
                            .map(|v| v.value());
                        let count = match existing {
                            Some(c) => c,
                            None => {
                                topics
                                    .insert(topic.as_str(), partitions)
                                    .map_err(|e| e.to_string())?;
                                partitions
                            }
                        };
                        replies.push(Reply::Topic(reply, count));
                    }
                    WriteRequest::Append {
                        topic,
                        partitions,
                        records: new,
                        commit,
                        reply,
                    } => {
                        let mut appended = Vec::with_capacity(new.len());
                        let mut cursor: HashMap<u32, (u64, i64)> = HashMap::new();
                        for r in new {
                            let partition = partition_for(&r.key, partitions);
                            let head = match cursor.get(&partition) {
                                Some(h) => *h,
                                None => heads
                                    .get((topic.as_str(), partition))
                                    .map_err(|e| e.to_string())?
                                    .map(|v| v.value())
                                    .unwrap_or((0, i64::MIN)),
                            };
                            let (offset, last_ts) = head;
                            let ts = now.max(last_ts.saturating_add(1));
                            records
                                .insert(
                                    (topic.as_str(), partition, offset),
                                    encode_value(ts, &r.key, &r.payload).as_slice(),
                                )
                                .map_err(|e| e.to_string())?;
                            cursor.insert(partition, (offset + 1, ts));
                            appended.push(Appended {
                                partition,
                                offset,
                                timestamp: Timestamp::from_micros(ts).map_err(|e| e.to_string())?,
                            });
                        }
                        for (partition, head) in cursor {
                            heads
                                .insert((topic.as_str(), partition), head)
                                .map_err(|e| e.to_string())?;
                        }
                        if let Some(c) = commit {
                            offsets
                                .insert(
                                    (c.group.as_str(), c.topic.as_str(), c.partition),
                                    c.next_offset,
                                )
                                .map_err(|e| e.to_string())?;
                        }
                        replies.push(Reply::Append(reply, appended));
                    }
                    WriteRequest::Commit { commit: c, reply } => {
                        offsets
                            .insert(
                                (c.group.as_str(), c.topic.as_str(), c.partition),
                                c.next_offset,
                            )
                            .map_err(|e| e.to_string())?;
                        replies.push(Reply::Commit(reply));
                    }
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => txn.commit().map_err(|e| e.to_string()),
            Err(e) => {
                let _ = txn.abort();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_encoding_round_trips_and_rejects_garbage() {
        let v = encode_value(42, b"g1", b"payload");
        assert_eq!(
            decode_value(&v).unwrap(),
            (42, b"g1".to_vec(), b"payload".to_vec())
        );
        assert!(decode_value(&v[..5]).is_err());
        let mut bad = v.clone();
        bad[8] = 200;
        assert!(decode_value(&bad).is_err());
    }
}
