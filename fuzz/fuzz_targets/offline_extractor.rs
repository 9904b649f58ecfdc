//! The offline extractor on any content of any source type: entities and
//! facts or nothing, never a panic (case mappings that change byte lengths
//! once sliced a string off a char boundary).
#![no_main]

use chronicle_engine::OfflineExtractor;
use chronicle_engine::ontology::Ontology;
use chronicle_model::EpisodeType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((kind, content)) = data.split_first() else {
        return;
    };
    let source = match kind % 4 {
        0 => EpisodeType::Message,
        1 => EpisodeType::Text,
        2 => EpisodeType::Json,
        _ => EpisodeType::FactTriple,
    };
    let content = String::from_utf8_lossy(content);
    let extraction = OfflineExtractor.extract_content(&content, source, &Ontology::default());
    for fact in &extraction.facts {
        assert!(!fact.source.trim().is_empty() && !fact.target.trim().is_empty());
    }
});
