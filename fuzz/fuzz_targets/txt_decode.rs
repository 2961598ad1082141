//! TXT records as they arrive off the wire: the RDATA is split into its
//! length-prefixed strings and decoded (`txt::decode_rdata`). Decoded caps
//! must be valid, and what the agent side encodes from them must decode.
//!
//! `cargo +nightly fuzz run txt_decode fuzz/corpus/txt_decode`
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_proto::txt;

fuzz_target!(|data: &[u8]| {
    if let Ok(caps) = txt::decode_rdata(data) {
        assert!(caps.validate().is_ok(), "decoded caps are valid: {caps:?}");
        if let Ok(pairs) = txt::encode(&caps) {
            assert!(txt::wire_len(&pairs) <= txt::MAX_RECORD_BYTES);
            let back = txt::decode(&txt::to_strings(&pairs));
            assert!(back.is_ok(), "re-encoded caps decode: {back:?}");
        }
    }
});
