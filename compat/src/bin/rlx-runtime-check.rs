//! `rlx-runtime-check`: the published RLX runtime's reading of a cluster
//! file, a probe line or a node, or its plan of a synthetic model over the
//! probed nodes, as one JSON document on stdout (see the library's docs).
//! Exit 0 when the runtime accepted the input, 1 when it refused it (the
//! JSON says why), 2 on a usage error.

use rlx_compat::{load_path, parse_caps, plan, probe, RUNTIME_VERSION};
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (v, ok) = match args.as_slice() {
        ["load", file] => {
            let v = load_path(Path::new(file));
            let ok = v["ok"] == true;
            (v, ok)
        }
        // The lab's files are written before a model is chosen; rlx-discover
        // warns about that on its own. Everything else is judged as written.
        ["load", file, "--assume-model"] => {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let v = rlx_compat::load_text_assuming_model(&text);
            let ok = v["ok"] == true;
            (v, ok)
        }
        ["caps"] => {
            let mut s = String::new();
            let _ = std::io::stdin().read_to_string(&mut s);
            match parse_caps(&s) {
                Ok(c) => (serde_json::json!({ "ok": true, "caps": c }), true),
                Err(e) => (
                    serde_json::json!({ "ok": false, "error": format!("{e:#}") }),
                    false,
                ),
            }
        }
        ["probe-local", addr, ckpt] => {
            let c = rlx_distributed::cluster::probe_local(addr, ckpt, false);
            (serde_json::to_value(c).unwrap_or_default(), true)
        }
        ["probe", file, bin] => match probe(Path::new(file), bin) {
            Ok(caps) => (serde_json::json!({ "ok": true, "caps": caps }), true),
            Err(e) => (
                serde_json::json!({ "ok": false, "error": format!("{e:#}") }),
                false,
            ),
        },
        ["plan", file, bin] => match plan(Path::new(file), bin) {
            Ok(mut v) => {
                v["ok"] = true.into();
                (v, true)
            }
            Err(e) => (
                serde_json::json!({ "ok": false, "error": format!("{e:#}") }),
                false,
            ),
        },
        ["version"] => (serde_json::json!({ "runtime": RUNTIME_VERSION }), true),
        _ => {
            eprintln!(
                "usage: rlx-runtime-check load FILE [--assume-model] | caps < JSON | probe-local ADDR CKPT | \
                 probe FILE REMOTE_BIN | plan FILE REMOTE_BIN | version"
            );
            return ExitCode::from(2);
        }
    };
    println!("{v}");
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
