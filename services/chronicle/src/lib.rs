//! chronicle's service binary: the roles (gateway, processor, projector,
//! query) on a [`node::Node`], and the command line.

pub mod app;
pub mod cli;
pub mod commands;
pub mod config;
pub mod gateway;
pub mod http;
pub mod kafka;
pub mod mcp;
pub mod node;
pub mod processor;
pub mod projector;
pub mod runtime;
pub mod scylla;
pub mod served;
pub mod status;
pub mod style;
