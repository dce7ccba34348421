//! Connection settings that know how to open their transport: the seam
//! between a builder and a client library.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::SessionError;
use crate::transport::{EventStream, Transport};

/// An open transport and its event stream, on its way: what
/// [`Connect::connect`] returns.
pub type Connecting =
    Pin<Box<dyn Future<Output = Result<(Arc<dyn Transport>, EventStream), SessionError>> + Send>>;

/// Connection settings that know how to open their transport, for
/// [`Election::connect`](crate::Election::connect): [`ZkAsyncOptions`](zk_async/type.ZkAsyncOptions.html)
/// (zookeeper-async, feature `zookeeper-async`) and
/// [`ZkClientOptions`](struct.ZkClientOptions.html) (zookeeper-client,
/// feature `zookeeper-client`). Implement it for settings of your own
/// transport to get the same builder.
///
/// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
/// (feature `memory`), so that it runs as a test.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zkelect::memory::MemoryServer;
/// use zkelect::{Connect, Connecting, Transport};
///
/// /// Connects to an in-memory server.
/// struct InMemory(MemoryServer);
///
/// impl Connect for InMemory {
///     fn connect(self: Box<Self>) -> Connecting {
///         Box::pin(async move {
///             let (transport, events) = self.0.connect(Duration::from_secs(4));
///             Ok((Arc::new(transport) as Arc<dyn Transport>, events))
///         })
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), zkelect::ElectionError> {
/// let election = zkelect::Election::connect(InMemory(MemoryServer::new()))
///     .path("/svc/leader")
///     .id("a")
///     .join()
///     .await?;
/// election.wait_leader().await?;
/// election.close().await;
/// # Ok(())
/// # }
/// ```
pub trait Connect: Send + 'static {
    /// Opens the transport; called by [`ElectionBuilder::start`](crate::ElectionBuilder::start) after the
    /// election's configuration is validated.
    fn connect(self: Box<Self>) -> Connecting;
}

/// Boxed settings connect like the settings inside, so code can choose
/// the transport at run time (`Box<dyn Connect>`).
impl<C: Connect + ?Sized> Connect for Box<C> {
    fn connect(self: Box<Self>) -> Connecting {
        (*self).connect()
    }
}
