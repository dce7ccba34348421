//! The `zkelect` command line, parsed and checked before any I/O
//! (`zkelect_fuzz::cli`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::cli::run(data));
