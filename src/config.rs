//! **The cluster file** — `cluster.toml`'s `[discover]` stanza and its
//! `[[node]]` list, loaded with errors that point at the line to fix.
//!
//! ```toml
//! [discover]                 # empty: browse the LAN for rlx-agents over mDNS
//! ssh_hosts = ["node-a"]     # optional: ~/.ssh/config aliases to probe
//! subnet    = "10.0.0.0/24"  # optional: TCP-scan for running workers
//! ckpt_dir  = "/data/models/GLM-5.3-Flash"
//!
//! [[node]]                   # hand-written nodes are kept as they are
//! addr     = "10.0.0.9:9100"
//! ckpt_dir = "/data/models/GLM-5.3-Flash"
//! device   = "cuda"
//! ```
//!
//! The file belongs to the user, so a mistake in it must never become a panic
//! or a silently ignored key: unknown keys in `[discover]` and `[[node]]` are
//! errors that name the key, and every error carries the file and line. Other
//! top-level tables belong to the RLX runtime and are left alone, unless
//! they look like a mistake (`[discovr]`, `[[nodes]]`, a `[discover]` key
//! above every header): those are warnings (`toplevel.rs`). Errors are shown
//! by `rlx_proto::configfile`, the agent's renderer too, and the file is
//! read through its bounded reader (4 MiB). Relative paths in the file are
//! taken from its directory.
//!
//! One file per section, each type beside the checks it passes at load
//! time: `discover.rs` (`[discover]` and its `dns_sd`), `node.rs`
//! (`[[node]]`), the value types they share in `values.rs`, and key paths
//! for line numbers in `keypath.rs`. This file loads the whole and turns a
//! failed check into an error with its file, line and snippet.

mod discover;
mod keypath;
mod node;
mod runtime;
mod toplevel;
mod values;

pub(crate) use discover::DEFAULT_BROWSE_MS;
pub use discover::{
    DiscoverSection, DnsSdSection, DEFAULT_HOSTS_PORT, DEFAULT_LINK_PROBE_PACKETS,
    DEFAULT_LINK_WINDOW_MS, DEFAULT_SCAN_CONCURRENCY, DEFAULT_TIMEOUT_MS,
};
pub use node::{KvPolicy, NodeConfig, Role};
/// Default worker port, as in the seed, and the agents' own port.
pub use rlx_proto::service::{DEFAULT_AGENT_PORT, DEFAULT_WORKER_PORT};
pub use runtime::{DeviceKind, DEFAULT_PRECISION};
pub use values::{DeviceList, DevicePolicy, Precision, Subnet, ValueError};

use crate::clusterfile::{file_nodes, FileNode, NodesError};
use keypath::{span_of, Invalid};
use rlx_proto::configfile::{read_bounded, Place, MAX_CONFIG_FILE_BYTES};
use serde::Deserialize;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The parts of `cluster.toml` this tool reads, and the runtime's own
/// top-level keys, which are only checked (with the runtime's types) and
/// kept as written. Other keys are the runtime's business: it ignores
/// them, and so does this.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct RawFile {
    #[serde(default)]
    discover: Option<DiscoverSection>,
    #[serde(default)]
    node: Vec<NodeConfig>,
    /// The checkpoint: a Hugging Face id or a local directory. The runtime
    /// requires it; a file without it loads here with a warning, since
    /// `expand` is often run before the model is chosen.
    #[serde(default)]
    model: Option<String>,
    /// The runtime's prompt length, global seed, RAM headroom and
    /// `[placement]`: checked with the runtime's types, kept as written.
    #[serde(default)]
    seq: Option<usize>,
    #[serde(default)]
    rng_seed: Option<u64>,
    #[serde(default)]
    reserve_ram_gb: Option<f64>,
    #[serde(default)]
    placement: Option<runtime::Placement>,
}

/// A loaded cluster file.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Where it was read from (for messages and write-back).
    pub path: PathBuf,
    /// The file's text as read.
    pub text: String,
    /// The `[discover]` stanza, if present.
    pub discover: Option<DiscoverSection>,
    /// The hand-written nodes, in file order (the runtime's pipeline order).
    pub nodes: Vec<NodeConfig>,
    /// The same `[[node]]` tables as written: their lines, spans, `# found
    /// by` comments and the node ids those name, read once here
    /// ([`crate::clusterfile::file_nodes`]; `file_nodes[i].index == i`).
    /// The error says why a file whose `node` is not `[[node]]` tables
    /// (`node = [...]`) has none: nothing can be written back into it.
    pub file_nodes: Result<Vec<FileNode>, NodesError>,
    /// The runtime's `model` (a Hugging Face id or a local directory), if
    /// the file names one: the runtime refuses a file without it.
    pub model: Option<String>,
    /// What the file gets past the runtime but will not do what its
    /// author meant (a `[[node]]` key the runtime ignores, no `model`, a
    /// `layers` range it cannot read...), each with its line. Printed by
    /// every command that loads the file; none stops it.
    pub warnings: Vec<ConfigError>,
}

/// A place in a config file and what is wrong there, with what to do: an
/// error that stops the command, or one of [`ClusterConfig::warnings`].
/// Shown as the agent shows its own config errors
/// ([`rlx_proto::configfile::render`]): `path:line:column: message`, then
/// the line, cut when long, with a caret under the mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, in characters, when known.
    pub column: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
    /// The offending source line and a caret under the mistake, for display.
    pub snippet: Option<String>,
}

impl ConfigError {
    /// The first line alone, `path:line:column: message`: what a report
    /// line shows of a warning.
    pub fn headline(&self) -> String {
        let path = self.path.display();
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{path}:{l}:{c}: {}", self.message),
            (Some(l), None) => format!("{path}:{l}: {}", self.message),
            _ => format!("{path}: {}", self.message),
        }
    }

    /// An error at `span` (byte offsets) of `text`, the file at `path`.
    fn at(path: &Path, text: &str, span: Option<Range<usize>>, message: String) -> ConfigError {
        let place = span.map(|s| Place::of(text, s));
        ConfigError {
            path: path.to_path_buf(),
            line: place.as_ref().map(|p| p.line),
            column: place.as_ref().map(|p| p.column),
            snippet: place.as_ref().map(Place::snippet),
            message,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        if let Some(s) = &self.snippet {
            write!(f, "\n{s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ClusterConfig {
    /// Reads and validates a cluster file.
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = read_bounded(path, MAX_CONFIG_FILE_BYTES).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            column: None,
            message: format!("the cluster file {}", e.reason()),
            snippet: None,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates cluster-file text; `path` is used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<ClusterConfig, ConfigError> {
        let err_at = |span: Option<Range<usize>>, message: String| {
            ConfigError::at(path, text, span, message)
        };
        let at = |Invalid(key_path, message): Invalid| {
            err_at(span_of(text, &key_path).map(|o| o..o), message)
        };
        if let Ok(doc) = toml_edit::ImDocument::parse(text) {
            if let Some(bad) = toplevel::wrong_brackets(&doc) {
                return Err(at(bad));
            }
        }
        let raw: RawFile =
            toml::from_str(text).map_err(|e| err_at(e.span(), describe_toml_error(text, &e)))?;
        let mut discover = raw.discover;
        if let Some(d) = &mut discover {
            d.pins_file = Some(pins_path(path, d.pins_file.as_deref()));
            d.key_file = d.key_file.as_deref().map(|k| beside(path, k));
        }
        let mut cfg = ClusterConfig {
            path: path.to_path_buf(),
            text: text.to_string(),
            discover,
            file_nodes: file_nodes(text),
            nodes: raw.node,
            model: raw.model,
            warnings: Vec::new(),
        };
        if let Some(d) = &cfg.discover {
            d.check().map_err(at)?;
        }
        cfg.warnings = cfg.lint().into_iter().map(at).collect();
        Ok(cfg)
    }

    /// What the file gets past the runtime but will not do what its author
    /// meant, with the key to point at.
    fn lint(&self) -> Vec<Invalid> {
        let mut out = Vec::new();
        if self.model.is_none() {
            out.push(Invalid(
                Vec::new(),
                "the file has no `model`: the RLX runtime refuses a cluster file without \
                 one (\"missing field `model`\"); add model = \"<Hugging Face id or local \
                 directory>\" at the top"
                    .into(),
            ));
        }
        if let Ok(doc) = toml_edit::ImDocument::parse(self.text.as_str()) {
            out.extend(toplevel::warnings(&doc));
        }
        if let Some(d) = &self.discover {
            out.extend(d.warnings());
        }
        out.extend(node::unknown_keys(&self.text));
        out.extend(node::node_warnings(&self.nodes));
        out
    }
}

/// The pins file of the cluster file at `path`: `[discover] pins_file`
/// (relative to the cluster file's directory), else `<stem>.pins` beside it.
fn pins_path(path: &Path, named: Option<&Path>) -> PathBuf {
    match named {
        Some(p) => beside(path, p),
        None => default_pins_path(path),
    }
}

/// A path the cluster file at `cluster_file` names (`key_file`,
/// `pins_file`): a relative one is taken from the cluster file's
/// directory, the one rule for every path in the file, so the file means
/// the same whichever directory a command runs in (a flag's path, such as
/// `--key-file`, is the shell's and taken from the working directory).
fn beside(cluster_file: &Path, named: &Path) -> PathBuf {
    if named.is_absolute() {
        return named.to_path_buf();
    }
    cluster_file.parent().unwrap_or(Path::new("")).join(named)
}

/// The pins file of a cluster file when `[discover] pins_file` names none:
/// `<stem>.pins` in the same directory (`cluster.toml` -> `cluster.pins`).
pub fn default_pins_path(cluster_file: &Path) -> PathBuf {
    let stem = cluster_file
        .file_stem()
        .map_or_else(|| "cluster".into(), |s| s.to_string_lossy().into_owned());
    cluster_file.with_file_name(format!("{stem}.pins"))
}

/// Turns a toml/serde error into a message that names the key and says what
/// to do, keeping toml's own description of the problem (for the runtime's
/// keys, the runtime's words: it reads them with the same types).
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    if msg.starts_with("missing field `ckpt_dir`") {
        return format!(
            "[[node]]: {msg}: the RLX runtime requires each node's checkpoint directory on \
             that host; add ckpt_dir = \"/path/to/model\""
        );
    }
    rlx_proto::configfile::explain(text, e.span(), msg, old_spelling)
}

/// The runtime's spelling of a `[[node]]` value that this project's own
/// older docs and `device_policy = "all"` wrote differently, for the error
/// the runtime's type gives such a value. The migration is by hand: the
/// file is the user's, and the old values have no single meaning in the
/// new vocabulary (docs/guide.md, "Migrating from older rlx-discover").
fn old_spelling(key: &str) -> Option<&'static str> {
    Some(match key {
        "kv_cache" => {
            "the runtime reads kv_cache = \"none\" | \"host\" | \"device\"; the table \
             form (precision, max_tokens) is an older rlx-discover's and the runtime refuses it"
        }
        "layers" => {
            "the runtime reads a range as a string: layers = [0, 24] is now layers = \"0:24\""
        }
        "role" => {
            "the runtime's roles are \"active\" (the default), \"standby\" and \"draining\"; \
             an older rlx-discover's \"worker\" is \"active\""
        }
        "device" => {
            "the runtime names one device per node, primary first, e.g. \"cuda\" or \
             \"metal+cpu\"; indexed devices (cuda:0,cuda:1, from an older \
             device_policy = \"all\") are refused by it: write \"cuda\""
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
