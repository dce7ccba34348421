//! The session's connection state, on the memory transport in paused time.

use std::time::Duration;

use tokio::sync::watch;
use zkelect_core::{ConnectionState, DemotionReason};

use crate::testkit::TestZk;
use crate::Session;

const TIMEOUT: Duration = Duration::from_secs(3);

async fn reaches(states: &mut watch::Receiver<ConnectionState>, state: ConnectionState) {
    let waited = tokio::time::timeout(Duration::from_secs(30), states.wait_for(|s| *s == state));
    assert!(
        matches!(waited.await, Ok(Ok(_))),
        "never {state:?}; at {:?}",
        *states.borrow()
    );
}

#[tokio::test(start_paused = true)]
async fn states_follow_the_core_through_a_partition_and_an_expiry() {
    let zk = TestZk::new();
    let (transport, events) = zk.connect(TIMEOUT);
    let client = transport.client();
    let session = Session::from_transport(transport, events);
    let mut states = session.states();
    reaches(&mut states, ConnectionState::Connected).await;
    // Something on the session, so the server is asked things.
    let guard = session.mutex("/locks/a").acquire().await.unwrap();
    // Silent past two thirds of the timeout, back before nine tenths.
    zk.partition(client, Duration::from_millis(2_400));
    reaches(&mut states, ConnectionState::Suspended).await;
    assert!(
        guard.lease().borrow().is_none(),
        "the guard's lease ended too"
    );
    reaches(&mut states, ConnectionState::Reconnected).await;
    // Silent past nine tenths: lost; then the server expires it.
    zk.partition(client, TIMEOUT * 3);
    reaches(&mut states, ConnectionState::Lost).await;
    // `Expired` and the new session's `Connected` may come in one step (a
    // watch keeps the latest): the new session is what is seen.
    reaches(&mut states, ConnectionState::Connected).await;
    // The hold ended when the lease did, at `Lost`.
    assert_eq!(guard.lost().await, DemotionReason::Lost);
    drop(guard);
    session.close().await;
    assert_eq!(*session.states().borrow(), ConnectionState::Closed);
}

#[tokio::test(start_paused = true)]
async fn every_receiver_sees_the_same_state() {
    let zk = TestZk::new();
    let (transport, events) = zk.connect(TIMEOUT);
    let session = Session::from_transport(transport, events);
    let mut early = session.states();
    reaches(&mut early, ConnectionState::Connected).await;
    let late = session.states();
    assert_eq!(*late.borrow(), ConnectionState::Connected);
    session.close().await;
    assert_eq!(*early.borrow(), ConnectionState::Closed);
}
