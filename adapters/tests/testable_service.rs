//! The crate page's "Make your service testable" code as a user's own
//! integration test: the same `serve` and test function the doc tests
//! compile, under `#[tokio::test(start_paused = true)]` (tokio's
//! `test-util`), as the page tells users to write it.
#![cfg(feature = "testkit")]

/// The service crate, `ticker`.
pub mod ticker {
    include!("../doc/service.rs");
}
include!("../doc/failover.rs");

#[tokio::test(start_paused = true)]
async fn the_documented_service_test_passes_as_a_tokio_test() {
    two_nodes_under_chaos_never_write_with_a_stale_token()
        .await
        .expect("fencing holds and the chaos causes a failover");
}
