//! **The hardware probe**, without a network: the real `rlx-agent` binary
//! (`--probe`, `--caps-file`, `--root`), the probe library against the
//! checked-in fixture trees (`worker-agent/fixtures/`) with fake GPU
//! libraries, every accelerator's details and link facts, and the real GPU
//! libraries of the machine running the tests.
//!
//! - `cli`: the binary, as a coordinator's ssh runs it.
//! - `runtime`: the binary as the RLX runtime runs it over ssh
//!   (`--probe --addr HOST:PORT --ckpt DIR`), read as the runtime reads it.
//! - `fixtures`: what each kind of machine must report.
//! - `details`: what a placement planner reads from the caps.
//! - `libs`: NVML and the Vulkan loader answer, whatever is installed.

mod cli;
mod details;
mod fixtures;
mod libs;
mod runtime;

use rlx_agent::probe::{probe, ProbeOptions};
use rlx_proto::caps::NodeCaps;
use std::path::{Path, PathBuf};

/// The checked-in fixture tree `name` (a fake `/sys` and `/proc` of one
/// kind of machine).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// The caps the probe reports on fixture `name`.
fn probe_fixture(name: &str) -> NodeCaps {
    probe(&ProbeOptions::fixture(fixture(name)).unwrap())
        .unwrap_or_else(|e| panic!("probe of fixture {name}: {e:#}"))
}
