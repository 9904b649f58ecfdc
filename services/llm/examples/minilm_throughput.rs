//! MiniLM embedding throughput on this machine's CPU, one JSON line per
//! batch size: `cargo run -p chronicle-llm --example minilm_throughput [seconds]`.

use std::time::{Duration, Instant};

use chronicle_llm::{MiniLmEmbedder, default_model_dir};

fn main() {
    let budget = Duration::from_secs_f64(
        std::env::args()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(10.0),
    );
    let dir = default_model_dir();
    if !MiniLmEmbedder::available(&dir) {
        eprintln!(
            "MiniLM weights not in {} (run scripts/fetch-minilm.sh)",
            dir.display()
        );
        std::process::exit(2);
    }
    let started = Instant::now();
    let model = match MiniLmEmbedder::load(&dir) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!(
        "{{\"load_seconds\": {:.3}}}",
        started.elapsed().as_secs_f64()
    );
    let base = [
        "Alice works at Acme Corp",
        "Bob is the CEO of Initech",
        "Paris is the capital of France",
        "The meeting was moved to Tuesday",
        "Carol founded a startup in Berlin",
        "Dave",
        "Acme Corporation",
        "The project deadline is next month",
    ];
    let texts: Vec<String> = (0..512)
        .map(|i| format!("{} {i}", base[i % base.len()]))
        .collect();
    for batch in [1usize, 8, 32] {
        let m = model.clone().with_batch_size(batch);
        if let Err(e) = m.embed_blocking(&texts[..batch]) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        let t = Instant::now();
        let mut done = 0;
        for chunk in texts.chunks(batch) {
            if let Err(e) = m.embed_blocking(chunk) {
                eprintln!("{e}");
                std::process::exit(1);
            }
            done += chunk.len();
            if t.elapsed() > budget {
                break;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{{\"batch\": {batch}, \"texts\": {done}, \"seconds\": {secs:.3}, \"embeddings_per_second\": {:.1}}}",
            done as f64 / secs
        );
    }
}
