//! Caps JSON as it comes from `rlx-agent --probe` over SSH or in a
//! handshake reply (`NodeCaps::from_json`). Accepted caps must be valid and
//! survive a round trip through the JSON the agent sends (floats to within
//! a few units in the last place).
//!
//! `cargo +nightly fuzz run caps_json fuzz/corpus/caps_json`
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_proto::caps::NodeCaps;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(caps) = NodeCaps::from_json(text) {
        assert!(caps.validate().is_ok(), "accepted caps are valid: {caps:?}");
        let back = NodeCaps::from_json(&caps.to_json()).expect("accepted caps parse back");
        // Floats may come back one unit in the last place off (serde_json's
        // default float parser is not correctly rounded); the rest exactly.
        let close =
            |a: f64, b: f64| a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs());
        assert!(close(back.gflops, caps.gflops) && close(back.io_mbps, caps.io_mbps));
        for (a, b) in back.devices.iter().zip(&caps.devices) {
            assert!(close(a.gflops, b.gflops));
        }
        let strip = |c: &NodeCaps| {
            let mut c = c.clone();
            c.gflops = 0.0;
            c.io_mbps = 0.0;
            c.devices.iter_mut().for_each(|d| d.gflops = 0.0);
            c
        };
        assert_eq!(strip(&back), strip(&caps), "round trip of {text:?}");
    }
});
