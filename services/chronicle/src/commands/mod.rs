//! Command implementations.

mod audit;
mod demo;
mod graph;
mod ingest;
mod read;
mod remote;
mod roles;

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Cli, Command, CommunitiesCommand, SagaCommand};
use crate::node::{Node, Role};
pub use remote::Remote;

pub use graph::submit_and_wait;
pub use ingest::{IngestOutcome, parse_jsonl};

/// Appends a JSONL file's episodes and waits until they are processed and
/// projected (quietly; bad lines are reported on stderr).
pub async fn ingest_file(
    node: &std::sync::Arc<Node>,
    file: &std::path::Path,
) -> anyhow::Result<IngestOutcome> {
    ingest::run(node, file, true, false).await
}

/// Rebuilds a node's projection from its log.
pub async fn rebuild(node: &Node) -> anyhow::Result<crate::projector::ProjectorReport> {
    audit::rebuild(node).await
}

/// Replays a node's log up to transaction time `until` into `out`.
pub async fn replay(
    node: &Node,
    until: &str,
    out: &std::path::Path,
) -> anyhow::Result<crate::projector::ProjectorReport> {
    audit::replay(node, until, out).await
}
pub use read::log_stats;

/// Runs the command line: builds the runtime, logs, dispatches.
pub fn main(cli: Cli) -> ExitCode {
    block_on(run(cli))
}

/// Runs a command's future the way every chronicle binary does: tracing
/// to stderr, a multi-threaded runtime, errors printed with their causes.
pub fn block_on(command: impl Future<Output = anyhow::Result<ExitCode>>) -> ExitCode {
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `chronicle bench …`: the benchmarks are a binary of their own,
/// `chronicle-bench`, next to this one (built with `cargo build -p
/// chronicle-bench`); it takes the same command line.
fn bench() -> anyhow::Result<ExitCode> {
    let sibling = sibling_binary("chronicle-bench")?;
    let status = std::process::Command::new(&sibling)
        .args(std::env::args_os().skip(1))
        .status()
        .with_context(|| format!("running {}", sibling.display()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// A binary of this workspace next to the running one (the benchmarks
/// and the product call each other this way), or an error saying how to
/// build it.
pub fn sibling_binary(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe().context("locating the running binary")?;
    let sibling = exe.with_file_name(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        sibling.exists(),
        "{} is not built: run `cargo build --release -p {name}` (or `just bench`)",
        sibling.display()
    );
    Ok(sibling)
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::new(log_directives(
        std::env::var("CHRONICLE_LOG_LEVEL").ok().as_deref(),
    ));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The tracing filter for a `CHRONICLE_LOG_LEVEL` value. rmcp logs whole
/// requests and results (tool arguments: tenants' episode content) at debug
/// and trace, so unless the value names rmcp itself it stays at info; and it
/// warns about every error response, which for a tool call is the caller's
/// mistake (a bad argument, another group), so by default only errors.
fn log_directives(level: Option<&str>) -> String {
    match level.map(str::trim).filter(|l| !l.is_empty()) {
        None => "warn,rmcp::service=error".to_owned(),
        Some(l) if l.contains("rmcp") => l.to_owned(),
        Some(l) => format!("{l},rmcp=info"),
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let Cli { global, command } = cli;
    if let Command::Demo = command {
        return demo::run().await.map(|_| ExitCode::SUCCESS);
    }
    if matches!(command, Command::Bench { .. }) {
        return bench();
    }
    let settings = global.resolve()?;
    match command {
        Command::Demo => unreachable!("handled above"),
        Command::Ingest { file, no_wait } => {
            let node = Node::open(settings).await?;
            let outcome = ingest::run(&node, &file, !no_wait, true).await?;
            Ok(if outcome.rejected > 0 {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Facts {
            group,
            entity,
            time,
            json,
        } => {
            if let Some(remote) = Remote::find(&settings.data).await {
                read::group(&group)?;
                let page = remote.facts(&group, entity.as_deref(), &time).await?;
                read::print_facts(&page.facts, json)?;
                if page.truncated && !json {
                    eprintln!(
                        "(the first {} facts; narrow with --entity)",
                        page.facts.len()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            read::facts(
                &*Node::open(settings).await?,
                &group,
                entity.as_deref(),
                &time,
                json,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { group, json } => {
            if let Some(remote) = Remote::find(&settings.data).await {
                group.as_deref().map(read::group).transpose()?;
                read::print_stats(&remote.stats(group.as_deref()).await?, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            read::stats(&*Node::open(settings).await?, group.as_deref(), json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search {
            group,
            query,
            recipe,
            center,
            limit,
            edge_types,
            labels,
            time,
            json,
        } => {
            let args = read::SearchArgs {
                group: &group,
                query: &query,
                recipe: &recipe,
                center: center.as_deref(),
                limit,
                edge_types,
                labels,
                time: &time,
            };
            if let Some(remote) = Remote::find(&settings.data).await {
                read::group(&group)?;
                read::print_results(&remote.search(&args).await?, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            read::search(&*Node::open(settings).await?, args, json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Context {
            group,
            query,
            max_chars,
            time,
            json,
        } => {
            if let Some(remote) = Remote::find(&settings.data).await {
                read::group(&group)?;
                let block = remote.context(&group, &query, max_chars, &time).await?;
                read::print_context(&block, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            let node = Node::open(settings).await?;
            read::context(&node, &group, &query, max_chars, &time, json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Timeline {
            group,
            entity,
            json,
        } => {
            if let Some(remote) = Remote::find(&settings.data).await {
                read::group(&group)?;
                let (e, facts) = remote.timeline(&group, &entity).await?;
                read::print_timeline(e, &facts, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            read::timeline(&*Node::open(settings).await?, &group, &entity, json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { group, json } => {
            if let Some(remote) = Remote::find(&settings.data).await {
                let group = group.as_deref().context(
                    "`chronicle serve` runs on this data directory: `status` asks it per group \
                     (pass --group), or stop it to read every partition",
                )?;
                read::group(group)?;
                read::print_group_status(&remote.status(group).await?, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            read::status(&*Node::open(settings).await?, group.as_deref(), json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Communities {
            which: CommunitiesCommand::List { group, json },
        } if let Some(remote) = Remote::find(&settings.data).await => {
            let g = read::group(&group)?;
            graph::print_communities(&g, &remote.communities(&group).await?, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Saga {
            which: SagaCommand::Show { group, saga, json },
        } if let Some(remote) = Remote::find(&settings.data).await => {
            read::group(&group)?;
            graph::print_saga(&remote.saga(&group, &saga).await?, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Communities { which } => {
            let node = Node::open(settings).await?;
            match which {
                CommunitiesCommand::Build { group, json } => {
                    graph::communities_build(&node, &group, json).await?
                }
                CommunitiesCommand::List { group, json } => {
                    graph::communities_list(&node, &group, json).await?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Saga { which } => {
            let node = Node::open(settings).await?;
            match which {
                SagaCommand::Summarize { group, saga, json } => {
                    graph::saga_summarize(&node, &group, &saga, json).await?
                }
                SagaCommand::Show { group, saga, json } => {
                    graph::saga_show(&node, &group, &saga, json).await?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Provenance {
            group,
            episodes,
            json,
        } => {
            graph::provenance(&*Node::open(settings).await?, &group, &episodes, json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Rebuild => {
            audit::rebuild(&*Node::open(settings).await?).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay { until, out } => {
            audit::replay(&*Node::open(settings).await?, &until, &out).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp { auth, token } => {
            let caller = crate::mcp::stdio::caller(auth.as_deref(), token.as_deref())?;
            crate::mcp::stdio::serve(settings, caller, roles::shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            listen,
            auth,
            max_body_bytes,
            ready_max_lag,
            max_connections,
            header_timeout_ms,
            body_timeout_ms,
        } => {
            let args = crate::http::ServeArgs {
                listen,
                auth,
                max_body_bytes,
                ready_max_lag,
                connections: crate::http::listen::ConnectionLimits {
                    max_connections,
                    header_timeout: std::time::Duration::from_millis(header_timeout_ms),
                },
                body_timeout: std::time::Duration::from_millis(body_timeout_ms),
            };
            crate::http::serve(settings, args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Processor { metrics_listen } => {
            roles::processor(
                Node::open_role(settings, Role::Processor).await?,
                metrics_listen,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Projector {
            listen,
            advertise,
            auth,
        } => {
            roles::projector(
                Node::open_role(settings, Role::Projector).await?,
                listen,
                advertise,
                auth,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Gateway {
            listen,
            auth,
            max_body_bytes,
        } => {
            roles::gateway(
                Node::open_role(settings, Role::Gateway).await?,
                listen,
                auth,
                max_body_bytes,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Query { listen } => {
            roles::query(Node::open_role(settings, Role::Query).await?, listen).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate {
            replication_factor,
            replication_map,
        } => {
            crate::scylla::migrate(&settings, replication_factor, replication_map.as_deref())
                .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench { .. } => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::log_directives;

    #[test]
    fn tool_arguments_stay_out_of_debug_logs_unless_rmcp_is_asked_for() {
        assert_eq!(log_directives(None), "warn,rmcp::service=error");
        assert_eq!(log_directives(Some(" ")), "warn,rmcp::service=error");
        assert_eq!(log_directives(Some("debug")), "debug,rmcp=info");
        assert_eq!(
            log_directives(Some("info,rmcp=trace")),
            "info,rmcp=trace",
            "an explicit rmcp directive is the operator's choice"
        );
        for level in [None, Some("debug"), Some("chronicle=trace")] {
            let directives = log_directives(level);
            assert!(
                tracing_subscriber::EnvFilter::try_new(&directives).is_ok(),
                "{directives}"
            );
        }
    }
}
