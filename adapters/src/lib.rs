//! # zkelect
//!
//! Leader election on Apache ZooKeeper for tokio services. The election logic is
//! the sans-IO state machine of [`zkelect_core`]; this crate runs it: a driver
//! task feeds it replies, watch events, session events and the time, performs
//! its requests through a [`Transport`], and publishes what the application
//! needs — the role, notices, the lease.
//!
//! ```no_run
//! # async fn example() -> Result<(), zkelect::ElectionError> {
//! use zkelect::{ConnectOptions, Election, LeadOutcome, ZkAsyncTransport};
//!
//! let (transport, events) = ZkAsyncTransport::connect(ConnectOptions::new("127.0.0.1:2181")).await?;
//! let election = Election::builder(transport, events)
//!     .path("/services/scheduler/leader")
//!     .id("node-a")
//!     .join()
//!     .await?;
//! // Runs the closure while leading; it is dropped the moment leadership is lost.
//! let outcome = election
//!     .lead(|token| async move {
//!         // ... act as leader, passing `token` to every fenced write ...
//!         token
//!     })
//!     .await?;
//! if let LeadOutcome::Interrupted(role) = outcome {
//!     eprintln!("lost leadership: {role:?}");
//! }
//! election.close().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod driver;
#[cfg(test)]
mod driver_tests;
mod election;
mod error;
#[cfg(feature = "memory")]
pub mod memory;
pub mod transport;
#[cfg(feature = "zookeeper-async")]
pub mod zk_async;

pub use driver::Metrics;
pub use election::{Election, ElectionBuilder, LeadOutcome};
pub use error::ElectionError;
pub use transport::{EventStream, Transport, TransportEvent};
#[cfg(feature = "zookeeper-async")]
pub use zk_async::{ConnectOptions, ZkAsyncTransport};
pub use zkelect_core::{
    Acl, CandidateError, ConnectionPolicy, DemotionReason, FencingToken, Notice, Role,
    WatchStrategy,
};
