//! Real-server test fixtures (work in progress).
