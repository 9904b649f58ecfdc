//! BM25 over tantivy: one index for every group and kind, with the group
//! and kind filtered inside the query, and the vectors stored alongside so
//! one commit makes text, vectors and checkpoint durable together.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use chronicle_model::GroupId;
use tantivy::collector::{Count, TopDocs};
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    BytesOptions, FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, SegmentReader, TantivyDocument, Term,
};
use uuid::Uuid;

use crate::{DocKind, Hit, IndexDoc, IndexError, IndexOptions};

/// Longer queries keep their first this many distinct terms: enough for any
/// question, and a bound on the cost of a pasted document.
pub(crate) const MAX_QUERY_TERMS: usize = 64;

/// The tantivy side of the index; the writer is owned by the caller.
pub(crate) struct TextIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// The text field's analyzer, cloned per query (it needs `&mut`).
    analyzer: TextAnalyzer,
}

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
    builder.add_u64_field("kind", INDEXED | FAST);
    builder.add_u64_field("id_hi", FAST);
    builder.add_u64_field("id_lo", FAST);
    builder.add_text_field("scope", STRING);
    builder.add_text_field("group", STORED);
    let text = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
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
            kind: field("kind")?,
            id_hi: field("id_hi")?,
            id_lo: field("id_lo")?,
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
        let fields = Fields::of(&index.schema())?;
        let writer =
            index.writer_with_num_threads(options.writer_threads, options.writer_memory_bytes)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let analyzer = index.tokenizer_for_field(fields.text)?;
        Ok((
            TextIndex {
                index,
                reader,
                fields,
                analyzer,
            },
            writer,
        ))
    }

    /// The payload of the last durable commit.
    pub(crate) fn committed_payload(&self) -> Result<Option<String>, IndexError> {
        Ok(self.index.load_metas()?.payload)
    }

    /// Makes the last commit visible to searches.
    pub(crate) fn reload(&self) -> Result<(), IndexError> {
        Ok(self.reader.reload()?)
    }

    /// The term that names one document, for replacement and deletion.
    pub(crate) fn key_term(&self, kind: DocKind, uuid: Uuid) -> Term {
        Term::from_field_bytes(self.fields.key, &key_bytes(kind, uuid))
    }

    /// The tantivy document for `doc`, with its unit vector if any.
    pub(crate) fn document(&self, doc: &IndexDoc, unit: Option<&[f32]>) -> TantivyDocument {
        let f = &self.fields;
        let (hi, lo) = split(doc.uuid);
        let mut out = TantivyDocument::default();
        out.add_bytes(f.key, &key_bytes(doc.kind, doc.uuid));
        out.add_u64(f.kind, u64::from(doc.kind.code()));
        out.add_u64(f.id_hi, hi);
        out.add_u64(f.id_lo, lo);
        out.add_text(f.scope, scope(doc.kind, &doc.group_id));
        out.add_text(f.group, doc.group_id.as_str());
        out.add_text(f.text, &doc.text);
        if let Some(unit) = unit {
            let bytes: Vec<u8> = unit.iter().flat_map(|x| x.to_le_bytes()).collect();
            out.add_bytes(f.vector, &bytes);
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
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
        let mut columns: Vec<Option<IdColumns>> = Vec::new();
        columns.resize_with(searcher.segment_readers().len(), || None);
        top.into_iter()
            .map(
                |(
                    score,
                    DocAddress {
                        segment_ord,
                        doc_id,
                    },
                )| {
                    let slot = &mut columns[segment_ord as usize];
                    let cols = match slot {
                        Some(cols) => cols,
                        None => slot.insert(IdColumns::of(searcher.segment_reader(segment_ord))?),
                    };
                    let (kind, uuid) = cols.identify(doc_id)?;
                    Ok(Hit { kind, uuid, score })
                },
            )
            .collect()
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
        Ok(self.reader.searcher().search(&query, &Count)? as u64)
    }

    /// Calls `f` with every committed document that has a vector.
    pub(crate) fn for_each_vector(
        &self,
        mut f: impl FnMut(DocKind, Uuid, GroupId, Vec<f32>),
    ) -> Result<(), IndexError> {
        let searcher = self.reader.searcher();
        for segment in searcher.segment_readers() {
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
                if vector.len() % 4 != 0 {
                    return Err(IndexError::Corrupt("vector bytes not a multiple of 4"));
                }
                let vector = vector
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                f(kind, uuid, group, vector);
            }
        }
        Ok(())
    }
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

fn key_bytes(kind: DocKind, uuid: Uuid) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[0] = kind.code();
    key[1..].copy_from_slice(uuid.as_bytes());
    key
}

fn parse_key(key: &[u8]) -> Result<(DocKind, Uuid), IndexError> {
    let (code, uuid) = key
        .split_first()
        .ok_or(IndexError::Corrupt("empty document key"))?;
    let kind = DocKind::from_code(u64::from(*code)).ok_or(IndexError::Corrupt("unknown kind"))?;
    let uuid = Uuid::from_slice(uuid).map_err(|_| IndexError::Corrupt("malformed uuid in key"))?;
    Ok((kind, uuid))
}

fn split(uuid: Uuid) -> (u64, u64) {
    let n = uuid.as_u128();
    ((n >> 64) as u64, n as u64)
}

/// Fast-field columns that identify a hit without touching the doc store.
struct IdColumns {
    kind: Column<u64>,
    hi: Column<u64>,
    lo: Column<u64>,
}

impl IdColumns {
    fn of(segment: &SegmentReader) -> Result<IdColumns, IndexError> {
        let fast = segment.fast_fields();
        Ok(IdColumns {
            kind: fast.u64("kind")?,
            hi: fast.u64("id_hi")?,
            lo: fast.u64("id_lo")?,
        })
    }

    fn identify(&self, doc: u32) -> Result<(DocKind, Uuid), IndexError> {
        let missing = IndexError::Corrupt("hit without id fast fields");
        let kind = self.kind.first(doc).and_then(DocKind::from_code);
        match (kind, self.hi.first(doc), self.lo.first(doc)) {
            (Some(kind), Some(hi), Some(lo)) => Ok((
                kind,
                Uuid::from_u128((u128::from(hi) << 64) | u128::from(lo)),
            )),
            _ => Err(missing),
        }
    }
}
