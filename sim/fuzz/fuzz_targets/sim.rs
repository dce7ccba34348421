//! Bytes → a scenario plus the world's choices → the simulator with every
//! checker (`zkelect_sim::fuzz`); a checker's failure is a panic, which
//! libFuzzer reports with the input that caused it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkelect_fuzz::sim(data));
