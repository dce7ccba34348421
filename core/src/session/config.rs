//! A session's settings.

use std::time::Duration;

/// How many of a session's requests are out at once unless configured.
pub const REQUESTS_OUT: usize = 1_000;

/// How long closing a session waits for its machines unless configured.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A session's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    seed: u64,
    requests_out: usize,
    close_timeout: Duration,
    request_timeout: Option<Duration>,
}

impl SessionConfig {
    /// Settings with the defaults, and `seed` for the watch table's keys:
    /// draw it at random in production (so no path can be chosen to collide
    /// in the table), from the run's seed in a simulation.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            requests_out: REQUESTS_OUT,
            close_timeout: CLOSE_TIMEOUT,
            request_timeout: None,
        }
    }

    /// At most `n` requests out at once (default 1,000; at least 1).
    #[must_use]
    pub fn with_requests_out(mut self, n: usize) -> Self {
        self.requests_out = n.max(1);
        self
    }

    /// How long closing the session waits for its machines before it
    /// gives up on those left (default 5 s).
    #[must_use]
    pub fn with_close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// How long a request may be out before the session answers it
    /// `OperationTimeout` itself (the server may still apply it: the
    /// machines recover as from a lost connection). Unset (the default),
    /// the session timeout negotiated at the last `Connected`; at least a
    /// millisecond, the clock's grain, so that no request is due the
    /// moment it goes out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkelect_core::SessionConfig;
    ///
    /// let config = SessionConfig::new(7).with_request_timeout(Duration::from_secs(2));
    /// assert_eq!(config.request_timeout(), Some(Duration::from_secs(2)));
    /// assert_eq!(SessionConfig::new(7).request_timeout(), None);
    /// ```
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout.max(Duration::from_millis(1)));
        self
    }

    /// The request timeout, if set (else the negotiated session timeout).
    pub fn request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// The seed of the watch table's keys.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// How many requests may be out at once.
    pub fn requests_out(&self) -> usize {
        self.requests_out
    }

    /// How long closing the session waits for its machines.
    pub fn close_timeout(&self) -> Duration {
        self.close_timeout
    }
}
