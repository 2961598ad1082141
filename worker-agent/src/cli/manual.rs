//! **The man page's own sections** — what clap cannot derive from the
//! flags: ENVIRONMENT (the variables the agent reads besides the
//! `RLX_AGENT_*` of each flag, which the OPTIONS section lists), FILES (at
//! their real default places) and SEE ALSO. The page itself is rendered
//! at release time by `examples/agent_docs.rs` (the agent carries no
//! man-page generator); it passes clap's page through [`with_sections`].
//! Kept in step with docs/reference.md ("Environment of `rlx-agent`").

use rlx_proto::manpage::Section;

/// The sections [`with_sections`] adds.
pub const SECTIONS: &[Section] = &[
    Section {
        title: "ENVIRONMENT",
        entries: &[
            ("RLX_AGENT_*", "Each flag's variable (RLX_AGENT_PORT for --port, ...; see OPTIONS): it overrides the config file, and a flag overrides it."),
            ("RLX_NETNS_GUARD", "When 1, refuse to announce over mDNS from the machine's initial network namespace: the tests and the demo set it so that nothing reaches the real network. Unset it to run for real."),
            ("RUST_LOG", "The log filter (for example debug); it overrides -q and -v. Without it the agent logs at info, or at warn with --probe or a subcommand."),
            ("NO_COLOR", "Any value but the empty string turns colour off under --color auto."),
            ("CREDENTIALS_DIRECTORY", "Set by systemd: a credential named for the path of key_file or tsig_key (systemd-escape --path) is read instead of that path, once the path itself passed the key file's rules."),
            ("STATE_DIRECTORY, XDG_STATE_HOME, HOME", "Where the state directory is when --state-dir is not given (see FILES)."),
        ],
    },
    Section {
        title: "FILES",
        entries: &[
            ("/etc/rlx/agent.toml", "Settings, every flag as a key (--worker-port is worker_port), read when it exists and --config or RLX_AGENT_CONFIG names no other file."),
            ("/var/lib/rlx-agent", "The state directory as root or under systemd ($STATE_DIRECTORY); else $XDG_STATE_HOME/rlx-agent or ~/.local/state/rlx-agent (--state-dir). It holds node-id (the random node id of a machine without hardware ids), node-key (this agent's own Ed25519 key, mode 0600) and cpu-gflops.json (the cached measurement)."),
            ("/etc/rlx/cluster.key", "The usual place of the cluster key (--key-file, key_file; no default): 32 random bytes in hex from rlx-discover keygen, mode 0600, owned by the agent's user or root."),
            ("/etc/rlx/update.key", "The usual place of the TSIG key for --register (--tsig-key), in BIND's format, mode 0600."),
            ("/etc/machine-id", "One of the hardware ids the node id is derived from, with the board's UUID and the network cards' MACs."),
            ("/lib/systemd/system/rlx-agent.service", "The packaged unit (/usr/lib/systemd/system/ on RPM systems); worker-agent/rlx-agent.plist is the launchd daemon on a Mac."),
        ],
    },
    Section {
        title: "SEE ALSO",
        entries: &[
            ("rlx-discover(1)", "The coordinator that finds agents and writes the cluster's [[node]] list."),
            ("systemd.exec(5), systemd-escape(1)", "StateDirectory= and LoadCredential=, which the packaged unit uses."),
            ("tsig-keygen(8)", "Writes the TSIG key for --register."),
            ("docs/guide.md, docs/reference.md", "The user guide and every key, flag, exit code and timing, in the source tree and the packages' doc directory."),
        ],
    },
];

/// clap's page (`page`, roff) with [`SECTIONS`] added
/// ([`rlx_proto::manpage::with_sections`]).
pub fn with_sections(page: &str) -> String {
    rlx_proto::manpage::with_sections(page, SECTIONS)
}
