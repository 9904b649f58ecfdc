use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = chronicle_bench::cli::BenchCli::parse();
    chronicle::commands::block_on(chronicle_bench::run(cli))
}
