//! zkelect's own `Election`, behind the bench's [`Implementation`] trait.
//!
//! Not wired yet: the async API in `adapters/` (crate `zkelect`) is still
//! being written. [`available`] says whether this build can run it.

use std::sync::Arc;

use anyhow::{bail, Result};
use async_trait::async_trait;

use crate::contender::{ConnectSettings, Contender, Implementation, LeaderBoard, Strategy};

/// Whether this build can run zkelect contenders.
pub fn available() -> bool {
    false
}

/// Makes zkelect contenders with one watch strategy.
pub struct Zkelect {
    #[allow(dead_code)]
    settings: ConnectSettings,
    strategy: Strategy,
}

impl Zkelect {
    /// zkelect contenders using `strategy`.
    pub fn new(settings: ConnectSettings, strategy: Strategy) -> Zkelect {
        Zkelect { settings, strategy }
    }
}

#[async_trait]
impl Implementation for Zkelect {
    fn name(&self) -> &'static str {
        "zkelect"
    }

    fn strategy(&self) -> Option<Strategy> {
        Some(self.strategy)
    }

    async fn start(
        &self,
        _id: u64,
        _path: &str,
        _board: Arc<LeaderBoard>,
    ) -> Result<Box<dyn Contender>> {
        bail!(
            "zkelect's async API (crate `zkelect` in adapters/) is not available in this build yet"
        )
    }
}
