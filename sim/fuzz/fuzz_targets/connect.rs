//! Connect strings and both transports' settings, checked before any
//! traffic (`zkelect_fuzz::connect`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::connect::run(data));
