//! `chronicle ingest FILE.jsonl`: validate, append, wait until processed.

use std::path::Path;

use anyhow::Context;
use chronicle_model::Command;
use indicatif::{ProgressBar, ProgressStyle};

use crate::gateway::{EpisodeInput, Gateway, InputError};
use crate::node::Node;
use crate::processor::ProcessorOptions;
use crate::runtime;

/// What an ingest did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    /// Lines appended.
    pub accepted: usize,
    /// Lines rejected (reported on stderr).
    pub rejected: usize,
}

/// Parses a JSONL file: commands for the good lines, `(line, error)` for the bad ones.
pub fn parse_jsonl(text: &str) -> (Vec<Command>, Vec<(usize, InputError)>) {
    let mut commands = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<EpisodeInput>(line)
            .map_err(|e| InputError::new(json_field(&e), e.to_string()))
            .and_then(|input| input.into_command(None, None));
        match parsed {
            Ok(ep) => commands.push(Command::AddEpisode(ep)),
            Err(e) => errors.push((i + 1, e)),
        }
    }
    (commands, errors)
}

/// The field a serde error is about, when it says.
fn json_field(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    for marker in [
        "unknown field `",
        "missing field `",
        "invalid type: ",
        "duplicate field `",
    ] {
        if let Some(rest) = msg.split(marker).nth(1)
            && marker.ends_with('`')
        {
            return rest.split('`').next().unwrap_or("line").to_owned();
        }
    }
    "line".to_owned()
}

/// Appends the file's episodes; with `wait`, runs the processor and
/// projector until everything is processed.
pub async fn run(
    node: &std::sync::Arc<Node>,
    file: &Path,
    wait: bool,
    progress: bool,
) -> anyhow::Result<IngestOutcome> {
    let text = fs_err::read_to_string(file)?;
    let (commands, errors) = parse_jsonl(&text);
    for (line, e) in &errors {
        eprintln!("{}:{line}: {}: {}", file.display(), e.field, e.message);
    }
    let outcome = IngestOutcome {
        accepted: commands.len(),
        rejected: errors.len(),
    };
    let mut running = wait.then(|| runtime::start(node, ProcessorOptions::default()));
    let gateway = Gateway::new(node.clone());
    for chunk in commands.chunks(1000) {
        gateway
            .submit(chunk.to_vec())
            .await
            .context("appending episodes")?;
    }
    if let Some(running) = running.as_mut() {
        let bar = if progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            let b = ProgressBar::new(commands.len() as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} processing {pos}/{len} episodes {wide_bar} {elapsed}",
                )
                .expect("valid template"),
            );
            b
        } else {
            ProgressBar::hidden()
        };
        running
            .wait_caught_up(node, |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            })
            .await?;
        bar.finish_and_clear();
    }
    if let Some(running) = running {
        running.stop().await?;
    }
    if progress {
        let (pending, processed, dead) = node.status.summary(None);
        eprintln!(
            "{} episodes appended{}; {processed} processed, {dead} dead-lettered, {pending} pending",
            outcome.accepted,
            if outcome.rejected > 0 {
                format!(", {} lines rejected", outcome.rejected)
            } else {
                String::new()
            }
        );
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_name_line_and_field() {
        let text = concat!(
            r#"{"group_id":"g","content":"a","reference_time":"2025-01-01T00:00:00Z"}"#,
            "\n",
            "\n",
            r#"{"group_id":"g","content":"b","reference_time":"nope"}"#,
            "\n",
            r#"{"group_id":"g","contents":"b","reference_time":"2025-01-01T00:00:00Z"}"#,
            "\n",
            "not json\n",
        );
        let (ok, bad) = parse_jsonl(text);
        assert_eq!(ok.len(), 1);
        let lines: Vec<(usize, &str)> = bad.iter().map(|(l, e)| (*l, e.field.as_str())).collect();
        assert_eq!(
            lines,
            vec![(3, "reference_time"), (4, "contents"), (5, "line")]
        );
    }
}
