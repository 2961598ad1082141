//! Cluster files (`ClusterConfig::parse`): hand-edited TOML. Errors must
//! name the file and a line inside it; accepted files must be in range.
//!
//! `cargo +nightly fuzz run config fuzz/corpus/config`
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_discover::config::ClusterConfig;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ClusterConfig::parse(Path::new("cluster.toml"), text) {
        Ok(cfg) => {
            if let Some(d) = &cfg.discover {
                assert!(d.port != 0);
                assert!((1..=60_000).contains(&d.timeout_ms));
            }
        }
        Err(e) => {
            assert!(e.to_string().starts_with("cluster.toml"), "{e}");
            if let Some(line) = e.line {
                assert!(line >= 1 && line <= text.lines().count().max(1) + 1, "{e}");
            }
        }
    }
});
