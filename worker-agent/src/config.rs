//! **The agent's config file** — `/etc/rlx/agent.toml` (or `--config FILE`,
//! or `RLX_AGENT_CONFIG`): every setting a flag holds, in one file a package
//! marks as configuration, so that setting a key or a port on a fleet is
//! editing one file, not rewriting a unit's `ExecStart=` or a plist.
//!
//! ```toml
//! # /etc/rlx/agent.toml
//! ckpt_dir = "/data/models"
//! cluster = "lab"
//! key_file = "/etc/rlx/cluster.key"
//! worker_port = 9100
//! interfaces = ["eth0"]
//! ```
//!
//! Every key is a flag's name with `_` for `-` (`--worker-port` is
//! `worker_port`); the repeatable flags take a list under their plural
//! (`interfaces`, `advertise`, `register_addrs`, `targets`). The values mean
//! what the flags do (`rlx-agent --help`; docs/reference.md lists them all).
//!
//! Precedence, highest first: a flag, its `RLX_AGENT_*` environment variable
//! (for a container or a unit's `Environment=`), the file, the default. A
//! key the agent does not know is an error naming the file, the line and
//! the keys it knows, as the cluster file's are: a misspelt `key_flie` must
//! never leave an agent keyless without a word.

use crate::cli::{parse_advertise, parse_node_id, AgentArgs};
use crate::measure::Policy;
use crate::register::RegisterTarget;
use anyhow::Context;
use clap::parser::ValueSource;
use clap::{ArgMatches, ValueEnum};
use rlx_proto::caps::Device;
use rlx_proto::configfile;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Where the agent looks for its config file when neither `--config` nor
/// `RLX_AGENT_CONFIG` names one. A missing file there is no error: an agent
/// needs no config at all.
pub const DEFAULT_CONFIG: &str = "/etc/rlx/agent.toml";

/// The config file's settings: each `None` when the file does not set it.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// `--caps-file`.
    pub caps_file: Option<PathBuf>,
    /// `--name`.
    pub name: Option<String>,
    /// `--port`.
    pub port: Option<u16>,
    /// `--worker-port`.
    pub worker_port: Option<u16>,
    /// `--ckpt-dir`.
    pub ckpt_dir: Option<PathBuf>,
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--key-file`.
    pub key_file: Option<PathBuf>,
    /// `--advertise`.
    #[serde(default, deserialize_with = "advertise")]
    pub advertise: Option<Vec<SocketAddr>>,
    /// `--measure`.
    #[serde(default, deserialize_with = "policy")]
    pub measure: Option<Policy>,
    /// `--measure-per-minute`.
    pub measure_per_minute: Option<u32>,
    /// `--targets`.
    pub targets: Option<Vec<Device>>,
    /// `--interface`.
    pub interfaces: Option<Vec<String>>,
    /// `--responder`.
    pub responder: Option<crate::announce::Responder>,
    /// `--no-bench`.
    pub no_bench: Option<bool>,
    /// `--node-id`.
    #[serde(default, deserialize_with = "node_id")]
    pub node_id: Option<String>,
    /// `--state-dir`.
    pub state_dir: Option<PathBuf>,
    /// `--register`.
    #[serde(default, deserialize_with = "register")]
    pub register: Option<RegisterTarget>,
    /// `--tsig-key`.
    pub tsig_key: Option<PathBuf>,
    /// `--lease-secs`.
    pub lease_secs: Option<u64>,
    /// `--register-addr`.
    pub register_addrs: Option<Vec<IpAddr>>,
    /// `--log-format`.
    pub log_format: Option<crate::cli::LogFormat>,
}

fn policy<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Policy>, D::Error> {
    let s = String::deserialize(d)?;
    Policy::from_str(&s, true).map(Some).map_err(|_| {
        D::Error::custom(format!(
            "`{s}` is not a measure policy: expected \"keyed\", \"any\" or \"off\""
        ))
    })
}

fn advertise<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<SocketAddr>>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    v.iter()
        .map(|s| parse_advertise(s))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
        .map_err(D::Error::custom)
}

fn node_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    parse_node_id(&s).map(Some).map_err(D::Error::custom)
}

fn register<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RegisterTarget>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(D::Error::custom)
}

impl AgentConfig {
    /// Parses `text`, the file at `path` (named in every error), and says
    /// an error as the coordinator says one in its cluster file
    /// ([`rlx_proto::configfile`]): `path:line:column`, the line cut when
    /// long, a caret, the nearest key for a misspelt one.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<AgentConfig> {
        toml::from_str(text).map_err(|e| {
            let said = configfile::explain(text, e.span(), e.message(), |_| None);
            let place = e.span().map(|s| configfile::Place::of(text, s));
            anyhow::anyhow!(
                "the agent config {}",
                configfile::render(path, place.as_ref(), &said)
            )
        })
    }

    /// The config file in effect: `explicit` (`--config`, or
    /// `RLX_AGENT_CONFIG`), which must exist, else [`DEFAULT_CONFIG`] when it
    /// exists, else none.
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Option<(PathBuf, AgentConfig)>> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None if Path::new(DEFAULT_CONFIG).exists() => PathBuf::from(DEFAULT_CONFIG),
            None => return Ok(None),
        };
        // Bounded: a wrong --config (a log, /dev/zero) is refused at the
        // cap, not read whole.
        let text =
            configfile::read_bounded(&path, configfile::MAX_CONFIG_FILE_BYTES).map_err(|e| {
                match explicit {
                    Some(_) => anyhow::anyhow!(
                        "the agent config {} (given by --config or RLX_AGENT_CONFIG)",
                        e
                    ),
                    None => anyhow::anyhow!(
                        "the agent config {} (read by default when it exists; --config FILE \
                     names another)",
                        e
                    ),
                }
            })?;
        Ok(Some((path.clone(), AgentConfig::parse(&text, &path)?)))
    }

    /// Fills in `args` from the file where neither a flag nor its
    /// environment variable set the value (`m` tells which did).
    pub fn apply(self, args: &mut AgentArgs, m: &ArgMatches) {
        let from_file = |id: &str| {
            !matches!(
                m.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        macro_rules! plain {
            ($($field:ident),*) => {$(
                if let Some(v) = self.$field {
                    if from_file(stringify!($field)) {
                        args.$field = v;
                    }
                }
            )*};
        }
        macro_rules! optional {
            ($($field:ident),*) => {$(
                if let Some(v) = self.$field {
                    if from_file(stringify!($field)) {
                        args.$field = Some(v);
                    }
                }
            )*};
        }
        plain!(
            port,
            worker_port,
            advertise,
            measure,
            measure_per_minute,
            targets
        );
        plain!(
            interfaces,
            responder,
            no_bench,
            lease_secs,
            register_addrs,
            log_format
        );
        optional!(caps_file, name, ckpt_dir, cluster, key_file, node_id, state_dir);
        optional!(register, tsig_key);
    }
}

/// The agent's settings from every source: the command line `m`, the
/// `RLX_AGENT_*` variables (clap reads both), and the config file (the
/// one `--config`/`RLX_AGENT_CONFIG` names, else [`DEFAULT_CONFIG`] when it
/// exists); then `--addr`'s port as the worker port
/// ([`AgentArgs::worker_port_from_addr`]); checked together once merged.
/// Returns the file read, if any.
pub fn resolve(m: &ArgMatches) -> anyhow::Result<(AgentArgs, Option<PathBuf>)> {
    use clap::FromArgMatches;
    let mut args = AgentArgs::from_arg_matches(m)?;
    let loaded = AgentConfig::load(args.config.as_deref())?;
    let path = loaded.as_ref().map(|(p, _)| p.clone());
    if let Some((_, c)) = loaded {
        c.apply(&mut args, m);
    }
    args.worker_port_from_addr(m.value_source("worker_port") == Some(ValueSource::CommandLine));
    args.validate().with_context(|| match &path {
        Some(p) => format!("the settings of the flags, RLX_AGENT_* and {}", p.display()),
        None => "the settings of the flags and RLX_AGENT_*".to_string(),
    })?;
    Ok((args, path))
}

/// The keys of the config file, in the order docs/reference.md lists them
/// (a test holds the two together).
pub const KEYS: &[&str] = &[
    "caps_file",
    "name",
    "port",
    "worker_port",
    "ckpt_dir",
    "cluster",
    "key_file",
    "advertise",
    "measure",
    "measure_per_minute",
    "targets",
    "interfaces",
    "responder",
    "no_bench",
    "node_id",
    "state_dir",
    "register",
    "tsig_key",
    "lease_secs",
    "register_addrs",
    "log_format",
];

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    #[test]
    fn settings_that_need_each_other_are_checked_after_the_file_is_merged() {
        let a = args_with(
            &["--tsig-key", "/etc/rlx/update.key"],
            "register = \"dns://10.0.0.53/rlx.example.org\"\n",
        );
        assert!(a.validate().is_ok());
        let a = args_with(&[], "register = \"dns://10.0.0.53/rlx.example.org\"\n");
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("tsig_key"), "{e}");
        let a = args_with(&[], "measure_per_minute = 0\n");
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("measure_per_minute"), "{e}");
    }

    fn args_with(cli: &[&str], file: &str) -> AgentArgs {
        let m = AgentArgs::command()
            .try_get_matches_from(std::iter::once("rlx-agent").chain(cli.iter().copied()))
            .unwrap();
        let mut args = AgentArgs::from_arg_matches(&m).unwrap();
        AgentConfig::parse(file, Path::new("agent.toml"))
            .unwrap()
            .apply(&mut args, &m);
        args
    }

    #[test]
    fn the_file_sets_what_no_flag_gives_and_a_flag_wins_over_it() {
        let file =
            "ckpt_dir = \"/data/models\"\nworker_port = 9200\ninterfaces = [\"eth0\", \"eth1\"]\n\
                    measure = \"any\"\nno_bench = true\n";
        let a = args_with(&[], file);
        assert_eq!(a.ckpt_dir.as_deref(), Some(Path::new("/data/models")));
        assert_eq!(a.worker_port, 9200);
        assert_eq!(a.interfaces, ["eth0", "eth1"]);
        assert_eq!(a.measure, Policy::Any);
        assert!(a.no_bench);
        let a = args_with(&["--worker-port", "9300", "--interface", "ib0"], file);
        assert_eq!(a.worker_port, 9300);
        assert_eq!(a.interfaces, ["ib0"]);
        assert_eq!(a.ckpt_dir.as_deref(), Some(Path::new("/data/models")));
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_the_file_the_line_and_the_keys_known() {
        let e = AgentConfig::parse(
            "cluster = \"lab\"\nkey_flie = \"/etc/rlx/k\"\n",
            Path::new("/etc/rlx/agent.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/etc/rlx/agent.toml:2:1:"), "{e}");
        assert!(e.contains("did you mean `key_file`?"), "{e}");
        assert!(e.contains("^^^^^^^^"), "a caret under the key: {e}");
    }

    #[test]
    fn a_bad_value_is_an_error_naming_its_line_and_what_was_expected() {
        for (text, want) in [
            (
                "measure = \"sometimes\"\n",
                "expected \"keyed\", \"any\" or \"off\"",
            ),
            ("\nnode_id = \"xyz\"\n", "16 lowercase hex"),
            ("advertise = [\"0.0.0.0:9100\"]\n", "a coordinator can dial"),
            ("port = \"6184\"\n", "expected u16"),
            ("port = 70000\n", "a port is a whole number 1-65535"),
            ("targets = [\"tpu\"]\n", "tpu"),
        ] {
            let e = AgentConfig::parse(text, Path::new("agent.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("agent.toml:"), "{text}: {e}");
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    /// The packages install `worker-agent/agent.toml` as
    /// `/etc/rlx/agent.toml`: as shipped it must start an agent with the
    /// defaults, and every example line in it, once uncommented, must be a
    /// key the agent takes with a value it accepts, so that editing the file
    /// as its comments say never fails at the next restart.
    #[test]
    fn the_packaged_config_file_is_valid_as_shipped_and_with_every_example_uncommented() {
        let shipped = include_str!("../agent.toml");
        let a = args_with(&[], shipped);
        assert!(a.validate().is_ok());
        assert_eq!(a.worker_port, 9100);
        let examples: Vec<&str> = shipped
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .filter(|l| l.split_once(" = ").is_some_and(|(k, _)| KEYS.contains(&k)))
            .collect();
        assert!(examples.len() >= 12, "{examples:?}");
        let uncommented = examples.join("\n");
        let a = args_with(&[], &uncommented);
        a.validate().unwrap();
        assert_eq!(
            a.key_file.as_deref(),
            Some(Path::new("/etc/rlx/cluster.key"))
        );
        for k in KEYS {
            let shown = examples.iter().any(|l| l.starts_with(&format!("{k} = ")));
            // The keys a packaged box has no use for are documented in
            // docs/reference.md only.
            let rare = [
                "caps_file",
                "advertise",
                "measure_per_minute",
                "no_bench",
                "node_id",
                "state_dir",
                "lease_secs",
                "register_addrs",
            ];
            assert!(
                shown || rare.contains(k),
                "{k} has no example line in agent.toml"
            );
        }
    }

    /// A 200 MB config file took 985 MB to parse: a file over the cap is
    /// refused before it is parsed, naming it, its size and the cap.
    #[test]
    fn a_config_file_over_the_cap_is_refused_naming_its_size_and_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        let big = configfile::MAX_CONFIG_FILE_BYTES + 1;
        std::fs::write(&path, "#".repeat(big as usize)).unwrap();
        let e = format!("{:#}", AgentConfig::load(Some(&path)).unwrap_err());
        assert!(e.contains("agent.toml"), "{e}");
        assert!(e.contains(&format!("is {big} bytes")), "{e}");
        assert!(
            e.contains(&format!("{}-byte cap", configfile::MAX_CONFIG_FILE_BYTES)),
            "{e}"
        );
    }

    /// "No such file or directory" was said twice: once in the message,
    /// once more as its cause.
    #[test]
    fn a_missing_config_file_says_its_cause_once() {
        let e = format!(
            "{:#}",
            AgentConfig::load(Some(Path::new("/nonexistent/agent.toml"))).unwrap_err()
        );
        assert_eq!(e.matches("No such file").count(), 1, "{e}");
    }

    /// Guards against a key added to [`AgentConfig`] and not to [`KEYS`]
    /// (so not to docs/reference.md), or the other way round.
    #[test]
    fn every_key_the_file_takes_is_listed_and_nothing_else() {
        let e = AgentConfig::parse("nonsense = 1\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        for k in KEYS {
            assert!(e.contains(&format!("`{k}`")), "{k} missing from {e}");
        }
        let listed = e.matches('`').count() / 2 - 1; // minus `nonsense`
        assert_eq!(listed, KEYS.len(), "{e}");
    }
}
