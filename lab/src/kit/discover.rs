//! **`rlx-discover` run in a lab host, and its JSON read back**: one
//! `expand --format json` or one browse (the `browse_once` example), with
//! the parts of the report the tests assert on (who was admitted, who was
//! refused and why) as maps by host.

use super::bins::{discover_bin, example_bin};
use super::run::run_ok;
use crate::topology::Lab;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Runs one `browse_once ARGS..` (the example: one mDNS browse, its JSON on
/// stdout) in lab host `i` and returns its JSON.
pub fn browse_once(lab: &Lab, i: usize, args: &[&str]) -> Value {
    let out = run_ok(lab.command(i, example_bin("browse_once")).args(args));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "browse printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The sightings of a browse's JSON by instance name.
pub fn sightings_by_host(v: &Value) -> BTreeMap<String, Value> {
    v["sightings"]
        .as_array()
        .expect("sightings")
        .iter()
        .map(|s| (s["host"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// One `rlx-discover expand --format json EXTRA.. CFG` in lab host 0, with
/// `RUST_LOG=debug` (refusal reasons are then in stderr too).
pub struct Expanded {
    /// The exit code.
    pub code: Option<i32>,
    /// The JSON printed.
    pub json: Value,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr: the report and the log.
    pub stderr: String,
}

/// Runs [`Expanded`]'s command; panics with stdout and stderr when no JSON
/// came out.
pub fn expand(lab: &Lab, cfg: &Path, extra: &[&str]) -> Expanded {
    let out = lab
        .command(0, discover_bin())
        .args(["expand", "--format", "json"])
        .args(extra)
        .arg(cfg)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("expand printed no JSON ({e}); stdout:\n{stdout}\nstderr:\n{stderr}")
    });
    // Whatever else the test asserts, the RLX runtime must read the file
    // as rlx-discover meant it.
    if let Some(text) = json["file"]["text"].as_str() {
        super::runtime::assert_reads_as_meant(text, &json["nodes"]);
    }
    Expanded {
        code: out.status.code(),
        json,
        stdout,
        stderr,
    }
}

/// host -> reason of every refused host in an expand's report.
pub fn refusals(v: &Value) -> BTreeMap<String, String> {
    v["report"]["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (text(f, "host"), text(f, "reason")))
        .collect()
}

/// host -> (id, evidence) of every admitted node.
pub fn admitted(v: &Value) -> BTreeMap<String, (String, String)> {
    v["report"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (text(a, "host"), (text(a, "id"), text(a, "evidence"))))
        .collect()
}

/// The string field `key` of `v`; panics naming it when it is not one.
fn text(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key:?} in {v}"))
        .to_string()
}
