//! **rlx-agent** — the small program that runs on every machine of an RLX
//! cluster: it probes the box, announces it as `_rlx._tcp` over mDNS and
//! answers the coordinator's handshake with the box's capabilities.
//!
//! ```text
//! rlx-agent --probe --no-bench          # print this box's caps JSON
//! rlx-agent --probe --addr gpu-a:9100 --ckpt /data/models   # as the RLX runtime runs it over ssh
//! rlx-agent --ckpt-dir /data/models/GLM-5.3-Flash --cluster lab
//! ```
//!
//! The capabilities model and its JSON are [`rlx_proto::caps`]: one type
//! on both ends of the wire.
//!
//! # Layout
//! - [`cli`]: the command line ([`cli::AgentArgs`]), shared by `main` and run mode.
//! - [`check`]: `rlx-agent check`, the worker's self-check (ports, firewall, key, state dir).
//! - [`credential`]: key files handed over by systemd (`LoadCredential=`): which copy stands for which path, and that path's own checks.
//! - [`config`]: `/etc/rlx/agent.toml`, every flag as a key, merged under the flags and `RLX_AGENT_*`.
//! - [`probe`]: what this machine has (cores, RAM, disk, every accelerator, node id).
//! - [`run`]: run mode, which starts the parts below and hands each the [`shutdown`].
//! - [`shutdown`]: the process-wide stop (SIGINT, SIGTERM), passed to every part as an argument.
//! - [`naming`]: the host label and the instance name, the same for mDNS and DNS.
//! - [`change`]: when changed caps are re-announced (the material-change rule and the pacer).
//! - [`announce`]: `_rlx._tcp` over mDNS, re-announced when the caps change, goodbye on exit.
//! - [`links`]: the kernel's notifications of interfaces coming and going, so that nothing polls.
//! - [`server`]: the handshake on the agent's own port (`--port`).
//! - [`proved`]: the peers the server accepted, told to the mDNS responder
//!   (they may get QU answers bigger than their questions).
//! - [`measure`]: link measurement on that port: who may ask (`--measure`), its bounds, the per-source limits ([`measure::limit`]).
//! - [`peer_measure`]: measuring another agent for the coordinator's link map (key holders only).
//! - [`worker`]: whether the box's RLX worker listens on its port (`--worker-port`).
//! - [`sshd`]: whether an SSH server listens on the box, and on which port (the runtime probes and launches workers over ssh).
//! - [`register`]: the same records in a unicast DNS zone (`--register`), by TSIG-signed DNS UPDATE, for coordinators beyond the LAN ([`register::tsig`]: its key file).
//!
//! The modules depend one way: `run` on everything; `announce` and
//! `register` on `change`, `naming` and `shutdown`; `cli` on `probe`,
//! `naming`, `worker`, `sshd`, the lease settings of `register` and the rules of `measure`;
//! `config` on `cli`, `measure` and `register`;
//! `peer_measure` on `measure`; `server` on `worker`, `measure`, `peer_measure` and `proved`; nothing back.

// Every public item is documented, and nothing is `pub` that the crate
// root does not export (`main` and the tests in tests/ use what it does).
#![deny(missing_docs, unreachable_pub)]

pub mod announce;
pub mod change;
pub mod check;
pub mod cli;
pub mod config;
pub mod credential;
pub mod links;
pub mod listen;
pub mod measure;
pub mod naming;
pub mod path_check;
pub mod peer_measure;
pub mod probe;
pub mod proved;
pub mod register;
pub mod run;
pub mod server;
pub mod shutdown;
pub mod sshd;
pub mod worker;
