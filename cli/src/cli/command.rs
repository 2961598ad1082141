//! **The command line's shape** — the clap definitions of `rlx-discover`
//! and its subcommands; their doc comments are the `--help` text, and
//! completions ([`super::completions`]) and man pages ([`super::man`]) are
//! generated from them.
//!
//! Doc comments on the clap types are the `--help` text, where `[discover]`
//! and `[[node]]` mean the TOML tables, not documentation links.
#![allow(rustdoc::broken_intra_doc_links)]

use super::runtime::EXIT_CODES;
use super::{
    browse, check, completions, demo, doctor, expand, keygen, links, man, pins, scan, watch,
};
use clap::{Parser, Subcommand};

/// Find the machines of an RLX cluster and write their [[node]] list.
///
/// rlx-discover runs on the coordinator. It finds the cluster's machines
/// (rlx-agents announcing themselves over mDNS, SSH hosts, a subnet scan or
/// a DNS-SD zone, as the cluster file's [discover] stanza says), asks each
/// for its hardware, and prints or writes the [[node]] list the RLX runtime
/// loads: address, ssh, checkpoint directory and the device each box can
/// run. It also lists the agents on the LAN (browse), follows the cluster
/// live (watch) and finds what keeps agents from being found (doctor).
//
// The about text is this doc comment, not the package's description: that
// one describes the crate to its developers ("parses flags, calls the
// library"), this one the program to its users.
#[derive(Debug, Parser)]
#[command(name = "rlx-discover", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// Print less: errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print more (repeat for debug output); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Colour the logs: auto (on a terminal, unless NO_COLOR is set),
    /// always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = super::runtime::Color::Auto)]
    pub color: super::runtime::Color,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Expand CONFIG's [discover] stanza into [[node]] entries and print the
    /// result, or update CONFIG in place (--write); the report goes to stderr.
    Expand(expand::ExpandArgs),
    /// Browse the LAN once for rlx-agents and print a table (or --json).
    Browse(browse::BrowseArgs),
    /// Run the whole product on a private network of namespaces: simulated
    /// machines with rlx-agent, discovered from an empty [discover].
    Demo(demo::DemoArgs),
    /// Check this box for what keeps agents from being found: interfaces,
    /// multicast route, firewall, a test query, handshakes, clocks; each with a fix.
    Doctor(doctor::DoctorArgs),
    /// TCP-scan a CIDR block for listeners on the worker port.
    Scan(scan::ScanArgs),
    /// Watch the LAN: joined / updated / left events as agents come and go.
    Watch(watch::WatchArgs),
    /// Measure every pair of CONFIG's boxes, by their agents, both ways:
    /// the all-pairs link map (the cluster key is required).
    Links(links::LinksArgs),
    /// Before launch: can every rank dial what it will dial? Worker ports,
    /// each rank's address and port, every path with full-size packets.
    Check(check::CheckArgs),
    /// Write a new cluster key (32 random bytes, hex, mode 0600).
    Keygen(keygen::KeygenArgs),
    /// List the node id -> node key pins, or forget one after a machine
    /// was reinstalled (the next run pins its new key).
    Pins(pins::PinsArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the manual page, or write every page into a directory.
    Man(man::ManArgs),
    /// A stand-in RLX worker for the lab, the demo and the tests: holds
    /// the worker port and greets every connection.
    #[command(hide = true)]
    LabWorker(demo::LabWorkerArgs),
}

#[cfg(test)]
mod tests;
