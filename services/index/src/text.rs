//! BM25 over tantivy: one index for every group and kind, with the group
//! and kind filtered inside the query, and the vectors stored alongside so
//! one commit makes text, vectors and checkpoint durable together.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use chronicle_model::GroupId;
use tantivy::collector::{Collector, Count, SegmentCollector, TopDocs};
use tantivy::columnar::Column;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentId;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery, Weight,
};
use tantivy::schema::{
    BytesOptions, FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{
    DocId, Index, IndexReader, IndexWriter, Opstamp, ReloadPolicy, Score, Searcher, SegmentReader,
    TantivyDocument, Term,
};
use uuid::Uuid;

use crate::{DocKind, Hit, IndexDoc, IndexError, IndexOptions};

/// Longer queries keep their first this many distinct terms: enough for any
/// question, and a bound on the cost of a pasted document.
pub(crate) const MAX_QUERY_TERMS: usize = 64;

/// The text field's analysis: tantivy's `en_stem` (simple tokens, long
/// ones dropped, lower case, English stems) with English function words
/// removed before stemming. Questions are mostly function words ("what did
/// you ...") that short turns share by chance; left in, they outweigh the
/// one content word that matters.
const ANALYZER: &str = "chronicle_en";

/// The English function words the analyzer removes: the common list of
/// pronouns, auxiliaries, articles, prepositions and question words (as in
/// NLTK's English list, without its contraction fragments).
const STOP_WORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "can",
    "will",
    "just",
    "should",
    "now",
];

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| (*w).to_owned()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Fast fields that identify a document, also the tie-breakers of ranking.
const KIND: &str = "kind";
const ID_HI: &str = "id_hi";
const ID_LO: &str = "id_lo";

/// The tantivy side of the index; the writer is owned by the caller.
pub(crate) struct TextIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// The text field's analyzer, cloned per query (it needs `&mut`).
    analyzer: TextAnalyzer,
    /// The searcher of the last reload with its statistics, replaced whole,
    /// so a search never pairs one commit's documents with another's
    /// statistics.
    current: RwLock<Arc<Generation>>,
    /// Live text tokens per segment state, so that a reload only sums the
    /// segments that are new or have lost documents since the last one.
    segment_tokens: Mutex<HashMap<(SegmentId, Option<Opstamp>), u64>>,
}

/// One reload's searcher and the BM25 statistics of its live documents.
///
/// tantivy's own statistics count deleted documents until a merge purges
/// them, and a merge that purges some estimates token counts, so the same
/// documents would score differently after a different history (a live index
/// rewritten by many upserts versus one rebuilt by replay). These depend on
/// the live documents only.
struct Generation {
    searcher: Searcher,
    text: Field,
    /// Live documents, every group and kind.
    docs: u64,
    /// Live tokens of the text field, summed from fieldnorms in every segment
    /// (the only per-document length tantivy keeps, so the one measure that
    /// is the same whatever the segments).
    text_tokens: u64,
    /// Whether any segment holds deleted documents: then a term's live
    /// document frequency is counted over its postings, and remembered here
    /// (common terms would otherwise cost a scan of most documents per query).
    has_deletes: bool,
    doc_freqs: Mutex<HashMap<Term, u64>>,
}

/// Bound on the terms whose live document frequency a generation remembers.
const CACHED_DOC_FREQS: usize = 16_384;

#[derive(Clone, Copy)]
struct Fields {
    /// Kind code and uuid bytes: the unit of replacement and deletion.
    key: Field,
    kind: Field,
    id_hi: Field,
    id_lo: Field,
    /// `"<kind code>:<group>"`, untokenized: the search filter. Group ids
    /// cannot contain `:`, so no scope is a prefix-collision of another.
    scope: Field,
    group: Field,
    text: Field,
    /// Little-endian f32 unit vector, stored to rebuild vectors on open.
    vector: Field,
}

fn schema() -> Schema {
    let mut builder = Schema::builder();
    builder.add_bytes_field("key", BytesOptions::default().set_indexed().set_stored());
    builder.add_u64_field(KIND, INDEXED | FAST);
    builder.add_u64_field(ID_HI, FAST);
    builder.add_u64_field(ID_LO, FAST);
    builder.add_text_field("scope", STRING);
    builder.add_text_field("group", STORED);
    let text = TextFieldIndexing::default()
        .set_tokenizer(ANALYZER)
        .set_index_option(IndexRecordOption::WithFreqs);
    builder.add_text_field("text", TextOptions::default().set_indexing_options(text));
    builder.add_bytes_field("vector", BytesOptions::default().set_stored());
    builder.build()
}

impl Fields {
    fn of(schema: &Schema) -> Result<Fields, IndexError> {
        let field = |name: &'static str| {
            schema
                .get_field(name)
                .map_err(|_| IndexError::Corrupt("text index schema lacks a field"))
        };
        Ok(Fields {
            key: field("key")?,
            kind: field(KIND)?,
            id_hi: field(ID_HI)?,
            id_lo: field(ID_LO)?,
            scope: field("scope")?,
            group: field("group")?,
            text: field("text")?,
            vector: field("vector")?,
        })
    }
}

impl TextIndex {
    /// Opens the tantivy index in `path`, creating it if absent, with its
    /// single writer.
    pub(crate) fn open(
        path: &Path,
        options: &IndexOptions,
    ) -> Result<(TextIndex, IndexWriter), IndexError> {
        let index = if path.join("meta.json").exists() {
            Index::open_in_dir(path)?
        } else {
            fs::create_dir_all(path).map_err(|source| IndexError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            Index::create_in_dir(path, schema())?
        };
        index.tokenizers().register(ANALYZER, analyzer());
        let fields = Fields::of(&index.schema())?;
        let writer =
            index.writer_with_num_threads(options.writer_threads, options.writer_memory_bytes)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let analyzer = index.tokenizer_for_field(fields.text)?;
        let mut segment_tokens = HashMap::new();
        let current = Generation::new(reader.searcher(), fields.text, &mut segment_tokens)?;
        Ok((
            TextIndex {
                index,
                reader,
                fields,
                analyzer,
                current: RwLock::new(Arc::new(current)),
                segment_tokens: Mutex::new(segment_tokens),
            },
            writer,
        ))
    }

    /// The payload of the last durable commit.
    pub(crate) fn committed_payload(&self) -> Result<Option<String>, IndexError> {
        Ok(self.index.load_metas()?.payload)
    }

    /// Makes the last commit visible to searches, with its statistics.
    pub(crate) fn reload(&self) -> Result<(), IndexError> {
        self.reader.reload()?;
        let mut tokens = self
            .segment_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let next = Generation::new(self.reader.searcher(), self.fields.text, &mut tokens)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        Ok(())
    }

    /// The searcher of the last reload, with its statistics.
    fn generation(&self) -> Arc<Generation> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The term that names one document, for replacement and deletion.
    pub(crate) fn key_term(&self, kind: DocKind, group: &GroupId, uuid: Uuid) -> Term {
        Term::from_field_bytes(self.fields.key, &key_bytes(kind, group, uuid))
    }

    /// The tantivy document for `doc`, with its unit vector if any.
    pub(crate) fn document(&self, doc: &IndexDoc, unit: Option<&[f32]>) -> TantivyDocument {
        let f = &self.fields;
        let (hi, lo) = split(doc.uuid);
        let mut out = TantivyDocument::default();
        out.add_bytes(f.key, &key_bytes(doc.kind, &doc.group_id, doc.uuid));
        out.add_u64(f.kind, u64::from(doc.kind.code()));
        out.add_u64(f.id_hi, hi);
        out.add_u64(f.id_lo, lo);
        out.add_text(f.scope, scope(doc.kind, &doc.group_id));
        out.add_text(f.group, doc.group_id.as_str());
        out.add_text(f.text, &doc.text);
        if let Some(unit) = unit {
            out.add_bytes(f.vector, &chronicle_model::embedding_to_bytes(unit));
        }
        out
    }

    /// BM25 over the documents of `group` of any of `kinds` (non-empty).
    pub(crate) fn search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        query: &str,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let terms = self.query_terms(query);
        if limit == 0 || kinds.is_empty() || terms.is_empty() {
            return Ok(Vec::new());
        }
        let text = any_of(terms, IndexRecordOption::WithFreqs);
        let scopes = kinds
            .iter()
            .map(|kind| Term::from_field_text(self.fields.scope, &scope(*kind, group)))
            .collect();
        // A zero constant score: the filter restricts, only the text ranks.
        let filter = ConstScoreQuery::new(any_of(scopes, IndexRecordOption::Basic), 0.0);
        let query = BooleanQuery::new(vec![(Occur::Must, text), (Occur::Must, Box::new(filter))]);
        let generation = self.generation();
        let top = generation
            .searcher
            .search_with_statistics_provider(&query, &TopHits { limit }, generation.as_ref())?
            .map_err(|MissingIds| IndexError::Corrupt("hit without id fast fields"))?;
        Ok(top.into_iter().map(Ranked::into_hit).collect())
    }

    /// The distinct analyzed terms of free text: there is no syntax, so no
    /// input can fail to parse.
    fn query_terms(&self, query: &str) -> Vec<Term> {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(query);
        let mut seen = HashSet::new();
        let mut terms = Vec::new();
        while terms.len() < MAX_QUERY_TERMS && stream.advance() {
            let token = &stream.token().text;
            if seen.insert(token.clone()) {
                terms.push(Term::from_field_text(self.fields.text, token));
            }
        }
        terms
    }

    /// Committed, searchable documents of `kind`.
    pub(crate) fn count(&self, kind: DocKind) -> Result<u64, IndexError> {
        let term = Term::from_field_u64(self.fields.kind, u64::from(kind.code()));
        let query = TermQuery::new(term, IndexRecordOption::Basic);
        Ok(self.generation().searcher.search(&query, &Count)? as u64)
    }

    /// Deleted documents still held by the searched segments.
    #[cfg(test)]
    pub(crate) fn deleted_documents(&self) -> u64 {
        let generation = self.generation();
        generation
            .searcher
            .segment_readers()
            .iter()
            .map(|segment| u64::from(segment.num_deleted_docs()))
            .sum()
    }

    /// Calls `f` with every committed document that has a vector.
    pub(crate) fn for_each_vector(
        &self,
        mut f: impl FnMut(DocKind, Uuid, GroupId, Vec<f32>),
    ) -> Result<(), IndexError> {
        let generation = self.generation();
        for segment in generation.searcher.segment_readers() {
            let store = segment
                .get_store_reader(1)
                .map_err(tantivy::TantivyError::from)?;
            for doc in store.iter::<TantivyDocument>(segment.alive_bitset()) {
                let doc = doc?;
                let Some(vector) = doc.get_first(self.fields.vector).and_then(|v| v.as_bytes())
                else {
                    continue;
                };
                let key = doc
                    .get_first(self.fields.key)
                    .and_then(|v| v.as_bytes())
                    .ok_or(IndexError::Corrupt("document without key"))?;
                let (kind, uuid) = parse_key(key)?;
                let group = doc
                    .get_first(self.fields.group)
                    .and_then(|v| v.as_str())
                    .and_then(|g| GroupId::new(g).ok())
                    .ok_or(IndexError::Corrupt("document without a valid group"))?;
                f(kind, uuid, group, vector_of(vector)?);
            }
        }
        Ok(())
    }

    /// The stored vector of each `(kind, uuid)` of `group`, in order; `None`
    /// for a document that has none (or is gone since the caller's view).
    /// Looked up by key term: a few point reads, for rescoring.
    pub(crate) fn stored_vectors(
        &self,
        group: &GroupId,
        documents: &[(DocKind, Uuid)],
    ) -> Result<Vec<Option<Vec<f32>>>, IndexError> {
        let generation = self.generation();
        let searcher = &generation.searcher;
        let mut out = Vec::with_capacity(documents.len());
        for &(kind, uuid) in documents {
            let query = TermQuery::new(self.key_term(kind, group, uuid), IndexRecordOption::Basic);
            let Some((_, address)) = searcher
                .search(&query, &TopDocs::with_limit(1).order_by_score())?
                .into_iter()
                .next()
            else {
                out.push(None);
                continue;
            };
            let doc: TantivyDocument = searcher.doc(address)?;
            out.push(
                doc.get_first(self.fields.vector)
                    .and_then(|v| v.as_bytes())
                    .map(vector_of)
                    .transpose()?,
            );
        }
        Ok(out)
    }
}

/// A stored vector; bytes that are no embedding encoding are corrupt.
fn vector_of(bytes: &[u8]) -> Result<Vec<f32>, IndexError> {
    chronicle_model::embedding_from_bytes(bytes)
        .ok_or(IndexError::Corrupt("vector bytes are no embedding"))
}

/// A disjunction of term queries (a plain term query for one term).
fn any_of(terms: Vec<Term>, option: IndexRecordOption) -> Box<dyn Query> {
    let mut queries: Vec<(Occur, Box<dyn Query>)> = terms
        .into_iter()
        .map(|term| {
            (
                Occur::Should,
                Box::new(TermQuery::new(term, option)) as Box<dyn Query>,
            )
        })
        .collect();
    if queries.len() == 1
        && let Some((_, query)) = queries.pop()
    {
        return query;
    }
    Box::new(BooleanQuery::new(queries))
}

fn scope(kind: DocKind, group: &GroupId) -> String {
    format!("{}:{}", kind.code(), group.as_str())
}

/// A document's key: kind, uuid, then its group, because ids are scoped to
/// a tenant (two groups may hold the same uuid as different documents).
fn key_bytes(kind: DocKind, group: &GroupId, uuid: Uuid) -> Vec<u8> {
    let mut key = Vec::with_capacity(17 + group.as_str().len());
    key.push(kind.code());
    key.extend_from_slice(uuid.as_bytes());
    key.extend_from_slice(group.as_str().as_bytes());
    key
}

fn parse_key(key: &[u8]) -> Result<(DocKind, Uuid), IndexError> {
    let (code, uuid) = key
        .split_first()
        .ok_or(IndexError::Corrupt("empty document key"))?;
    let kind = DocKind::from_code(u64::from(*code)).ok_or(IndexError::Corrupt("unknown kind"))?;
    let uuid = uuid
        .get(..16)
        .and_then(|b| Uuid::from_slice(b).ok())
        .ok_or(IndexError::Corrupt("malformed uuid in key"))?;
    Ok((kind, uuid))
}

fn split(uuid: Uuid) -> (u64, u64) {
    let n = uuid.as_u128();
    ((n >> 64) as u64, n as u64)
}

/// Collects the top `limit` live hits in [`Ranked`] order: a total order on
/// live documents, so the cut does not depend on segments or doc ids, as
/// tantivy's `TopDocs` (ties by doc address) would.
struct TopHits {
    limit: usize,
}

/// A hit as ranked: best score first, equal scores by uuid then kind
/// (ascending). `Ord` puts the better hit first (less is better).
#[derive(Clone, Copy, Debug)]
struct Ranked {
    score: Score,
    uuid: Uuid,
    kind: DocKind,
}

/// A matching document without the id fast fields: a corrupt index.
#[derive(Debug)]
struct MissingIds;

struct TopHitsSegment {
    limit: usize,
    ids: IdColumns,
    /// The best hits so far; the top of the heap is the worst kept.
    top: BinaryHeap<Ranked>,
    missing_ids: bool,
}

/// Fast-field columns that identify a hit without touching the doc store.
struct IdColumns {
    kind: Column<u64>,
    hi: Column<u64>,
    lo: Column<u64>,
}

impl Ranked {
    fn into_hit(self) -> Hit {
        Hit {
            kind: self.kind,
            uuid: self.uuid,
            score: self.score,
        }
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.uuid.cmp(&other.uuid))
            .then_with(|| self.kind.cmp(&other.kind))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl Collector for TopHits {
    type Fruit = Result<Vec<Ranked>, MissingIds>;
    type Child = TopHitsSegment;

    fn for_segment(&self, _: u32, segment: &SegmentReader) -> tantivy::Result<TopHitsSegment> {
        let fast = segment.fast_fields();
        Ok(TopHitsSegment {
            limit: self.limit,
            ids: IdColumns {
                kind: fast.u64(KIND)?,
                hi: fast.u64(ID_HI)?,
                lo: fast.u64(ID_LO)?,
            },
            top: BinaryHeap::with_capacity(self.limit + 1),
            missing_ids: false,
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(
        &self,
        segments: Vec<Result<Vec<Ranked>, MissingIds>>,
    ) -> tantivy::Result<Self::Fruit> {
        let mut all = Vec::new();
        for segment in segments {
            match segment {
                Ok(hits) => all.extend(hits),
                Err(missing) => return Ok(Err(missing)),
            }
        }
        all.sort_unstable();
        all.truncate(self.limit);
        Ok(Ok(all))
    }

    /// Lets the scorer skip documents below the worst kept score, but not
    /// those equal to it: a tie at the cut is decided by uuid.
    fn collect_segment(
        &self,
        weight: &dyn Weight,
        segment_ord: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Fruit> {
        let mut segment = self.for_segment(segment_ord, reader)?;
        let alive = reader.alive_bitset();
        weight.for_each_pruning(Score::NEG_INFINITY, reader, &mut |doc, score| {
            if alive.is_none_or(|alive| alive.is_alive(doc)) {
                segment.collect(doc, score);
            }
            segment.threshold()
        })?;
        Ok(segment.harvest())
    }
}

impl TopHitsSegment {
    /// Scores a document must exceed to be offered.
    fn threshold(&self) -> Score {
        match self.top.peek() {
            Some(worst) if self.top.len() >= self.limit => worst.score.next_down(),
            _ => Score::NEG_INFINITY,
        }
    }

    fn rank(&mut self, doc: DocId, score: Score) -> Option<Ranked> {
        let kind = self.ids.kind.first(doc).and_then(DocKind::from_code);
        let ranked = match (kind, self.ids.hi.first(doc), self.ids.lo.first(doc)) {
            (Some(kind), Some(hi), Some(lo)) => Some(Ranked {
                score,
                uuid: Uuid::from_u128((u128::from(hi) << 64) | u128::from(lo)),
                kind,
            }),
            _ => None,
        };
        self.missing_ids |= ranked.is_none();
        ranked
    }
}

impl SegmentCollector for TopHitsSegment {
    type Fruit = Result<Vec<Ranked>, MissingIds>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if self.limit == 0 {
            return;
        }
        if self.top.len() >= self.limit
            && self
                .top
                .peek()
                .is_some_and(|worst| score.total_cmp(&worst.score) == Ordering::Less)
        {
            return;
        }
        let Some(ranked) = self.rank(doc, score) else {
            return;
        };
        if self.top.len() < self.limit {
            self.top.push(ranked);
        } else if let Some(mut worst) = self.top.peek_mut()
            && ranked < *worst
        {
            *worst = ranked;
        }
    }

    fn harvest(self) -> Self::Fruit {
        if self.missing_ids {
            return Err(MissingIds);
        }
        Ok(self.top.into_vec())
    }
}

impl Generation {
    /// Statistics of `searcher`'s live documents; `segment_tokens` caches
    /// per-segment sums across reloads and is pruned to this searcher's.
    fn new(
        searcher: Searcher,
        text: Field,
        segment_tokens: &mut HashMap<(SegmentId, Option<Opstamp>), u64>,
    ) -> Result<Generation, IndexError> {
        let mut fresh = HashMap::with_capacity(searcher.segment_readers().len());
        let mut text_tokens = 0;
        for segment in searcher.segment_readers() {
            let key = (segment.segment_id(), segment.delete_opstamp());
            let tokens = match segment_tokens.get(&key) {
                Some(tokens) => *tokens,
                None => live_tokens(segment, text)?,
            };
            fresh.insert(key, tokens);
            text_tokens += tokens;
        }
        *segment_tokens = fresh;
        Ok(Generation {
            docs: searcher.num_docs(),
            has_deletes: searcher
                .segment_readers()
                .iter()
                .any(SegmentReader::has_deletes),
            searcher,
            text,
            text_tokens,
            doc_freqs: Mutex::new(HashMap::new()),
        })
    }

    fn live_doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searcher
            .segment_readers()
            .iter()
            .map(|segment| live_doc_freq(segment, term))
            .sum()
    }
}

impl Bm25StatisticsProvider for Generation {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        if field == self.text {
            return Ok(self.text_tokens);
        }
        // Only the text field is scored; any other gets the same treatment,
        // uncached.
        self.searcher
            .segment_readers()
            .iter()
            .map(|segment| live_tokens(segment, field))
            .sum()
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        if !self.has_deletes {
            return self.live_doc_freq(term);
        }
        let cached = self
            .doc_freqs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(term)
            .copied();
        if let Some(freq) = cached {
            return Ok(freq);
        }
        // Counted outside the lock: concurrent searches may count the same
        // term twice, never wait for each other's scans.
        let freq = self.live_doc_freq(term)?;
        let mut cache = self
            .doc_freqs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHED_DOC_FREQS {
            cache.clear();
        }
        cache.insert(term.clone(), freq);
        Ok(freq)
    }
}

/// Tokens of `field` in `segment`'s live documents, from fieldnorms, also
/// where the segment has no deletes: tantivy's exact per-segment total would
/// disagree with fieldnorm sums elsewhere (and merges replace it by one).
fn live_tokens(segment: &SegmentReader, field: Field) -> tantivy::Result<u64> {
    let Some(norms) = segment.fieldnorms_readers().get_field(field)? else {
        // No lengths recorded: tantivy's figure (BM25 sees no lengths either).
        return Ok(segment.inverted_index(field)?.total_num_tokens());
    };
    let mut histogram = [0u64; 256];
    let docs = 0..segment.max_doc();
    match segment.alive_bitset() {
        None => docs.for_each(|doc| histogram[usize::from(norms.fieldnorm_id(doc))] += 1),
        Some(alive) => docs
            .filter(|doc| alive.is_alive(*doc))
            .for_each(|doc| histogram[usize::from(norms.fieldnorm_id(doc))] += 1),
    }
    Ok((0..=u8::MAX)
        .zip(histogram)
        .map(|(id, count)| count * u64::from(FieldNormReader::id_to_fieldnorm(id)))
        .sum())
}

/// Live documents of `segment` containing `term`: tantivy's figure where
/// nothing is deleted, else a count over the postings.
fn live_doc_freq(segment: &SegmentReader, term: &Term) -> tantivy::Result<u64> {
    let inverted = segment.inverted_index(term.field())?;
    let Some(alive) = segment.alive_bitset() else {
        return Ok(u64::from(inverted.doc_freq(term)?));
    };
    let Some(mut postings) = inverted.read_block_postings(term, IndexRecordOption::Basic)? else {
        return Ok(0);
    };
    let mut live = 0;
    loop {
        let docs = postings.docs();
        if docs.is_empty() {
            return Ok(live);
        }
        live += docs.iter().filter(|doc| alive.is_alive(**doc)).count() as u64;
        postings.advance();
    }
}
