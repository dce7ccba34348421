//! Async driver and transports (work in progress).
