//! Node-name parsing and queue order against a simple reference
//! (`zkelect_fuzz::name`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::name::run(data));
