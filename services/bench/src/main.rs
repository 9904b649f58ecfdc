use clap::Parser;

/// glibc's per-thread arenas fragment under the projector's and the
/// processor's many short-lived allocations; jemalloc keeps resident memory
/// close to the live heap (`bench scale`, 60k episodes: peak RSS 1.98 GB
/// with glibc, 1.62 GB with jemalloc).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = chronicle_bench::cli::BenchCli::parse();
    chronicle::commands::block_on(chronicle_bench::run(cli))
}
