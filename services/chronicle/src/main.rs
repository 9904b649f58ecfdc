use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = chronicle::cli::Cli::parse();
    chronicle::commands::main(cli)
}
