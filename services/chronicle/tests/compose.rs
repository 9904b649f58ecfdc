//! The compose file cannot be run here (no container engine), so it is
//! checked instead: every chronicle command in it must be accepted by the
//! CLI's parser, every role must be there, and the URIs must parse.

use std::path::Path;

use chronicle::cli::{Cli, Command};
use chronicle::config::{LogUri, StoreUri};
use clap::Parser;
use serde_norway::Value;

fn compose() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../infra/compose.yaml");
    let mut v: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.apply_merge().unwrap();
    v
}

#[test]
fn every_chronicle_command_in_the_compose_file_parses() {
    let v = compose();
    let services = v["services"].as_mapping().unwrap();
    let mut roles = Vec::new();
    for (name, service) in services {
        if service["image"].as_str() != Some("chronicle:local") {
            continue;
        }
        let args: Vec<String> = service["command"]
            .as_sequence()
            .unwrap_or_else(|| panic!("{name:?}: command must be a list"))
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        let cli = Cli::try_parse_from(std::iter::once("chronicle".to_owned()).chain(args.clone()))
            .unwrap_or_else(|e| {
                panic!(
                    "{name:?}: `chronicle {}` does not parse:\n{e}",
                    args.join(" ")
                )
            });
        roles.push(match cli.command {
            Command::Gateway { .. } => "gateway",
            Command::Processor { .. } => "processor",
            Command::Projector { .. } => "projector",
            Command::Query { .. } => "query",
            Command::Migrate { .. } => "migrate",
            other => panic!("{name:?}: unexpected command {other:?}"),
        });
        let env = &service["environment"];
        env["CHRONICLE_LOG"]
            .as_str()
            .unwrap()
            .parse::<LogUri>()
            .unwrap();
        env["CHRONICLE_STORE"]
            .as_str()
            .unwrap()
            .parse::<StoreUri>()
            .unwrap();
    }
    roles.sort();
    assert_eq!(
        roles,
        ["gateway", "migrate", "processor", "projector", "query"]
    );
    for infra in ["kafka", "scylla", "prometheus", "grafana"] {
        assert!(
            services.contains_key(infra),
            "{infra} is in the compose file"
        );
    }
}
