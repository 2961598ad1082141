//! Caps JSON as it comes from `rlx-agent --probe` over SSH or in a
//! handshake reply (`NodeCaps::from_json`). Accepted caps must be valid and
//! survive a round trip through the JSON the agent sends.
//!
//! `cargo +nightly fuzz run caps_json fuzz/corpus/caps_json`
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_discover::caps::NodeCaps;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(caps) = NodeCaps::from_json(text) {
        assert!(caps.validate().is_ok(), "accepted caps are valid: {caps:?}");
        let back = NodeCaps::from_json(&caps.to_json());
        assert_eq!(back.as_ref(), Ok(&caps), "round trip of {text:?}");
    }
});
