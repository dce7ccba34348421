//! Deterministic simulator (work in progress).
