//! An `Observer` of any queue fed arbitrary inputs
//! (`zkelect_fuzz::observer`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::observer::run(data));
