//! A `Session` of several machines, the simultaneous inputs of each instant
//! in any order (`zkelect_fuzz::session`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::session::run(data));
