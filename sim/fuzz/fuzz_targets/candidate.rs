//! A `Candidate` of any configuration fed arbitrary inputs
//! (`zkelect_fuzz::candidate`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::candidate::run(data));
