//! The core's integration tests, one module per subject, in one test binary
//! (each test binary links its own copy of the core and of proptest, so one
//! binary compiles in a fraction of the time of eight). The idle-memory test
//! stays a binary of its own (it counts its whole process's allocations with
//! dhat's global allocator), and so does the serde round trip (it exists only
//! with the `serde` feature: `cargo test -p zkelect-core --features serde
//! --test serde_roundtrip`).
//!
//! Run one subject: `cargo test -p zkelect-core --test it transcripts::`.

mod support;

mod economy;
mod held_events;
mod observer;
mod properties;
mod recipes;
mod revocation;
mod startup;
mod transcripts;
