//! The session's pump: one task per session that moves what the core's
//! [`Session`](zkelect_core::Session) decides between it and the world. It
//! decides nothing itself (the routing, the probe, the window, the retries
//! and the recipes' rules are the core's; see `hub.rs` for how intents and
//! publication reach it).
//!
//! Each turn:
//!
//! 1. wait for one input, choosing among those ready in a fixed order
//!    (`biased`), so the test kit's replay is exact:
//!    1. **the session's deadline** — first, so a process that was frozen
//!       (GC pause, SIGSTOP) learns from each machine that its lease ran
//!       out before it acts on anything that queued up meanwhile (the core
//!       fires what is due before any input too);
//!    2. **a transport event** (a session event, a watch firing) — before
//!       the answers: a hand-off's notification is the latency that counts,
//!       and events come no faster than the server fires them, so they
//!       cannot hold the answers back for long;
//!    3. **an answer** of a request in flight;
//!    4. **a handle's hand-off** (a request it started, an answer its first
//!       poll got, a nudge after an intent);
//!    5. **a turn for the metrics facade**, when nothing else is ready.
//!
//!    No order can stall the session: after any input at `now`, the core's
//!    next deadline is later than `now`, so the deadline branch is never
//!    ready twice at one instant, and an answer is never followed by its own
//!    retry at the same instant (both proven adversarially in the core). The
//!    order that once spun the test kit's seed 1 forever (deadline first,
//!    then answers, a transport failing fast) is this one.
//! 2. read the clock once;
//! 3. feed the input to the core;
//! 4. publish what it says, then start the requests it emitted: each is
//!    polled once at once, which hands it to the client library, so all of
//!    a turn's requests are on their way before the pump waits again; the
//!    next `select!` polls them to their answers.
//!
//! Deadlines are checked against the clock by the core, not trusted from
//! the sleep having fired (quinn's `drive_timer` lesson), so a spurious or
//! late wake-up is harmless.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};
use zkelect_core::{Input, Reply};

use crate::hop::{self, hop};
use crate::hub::{Answer, Handoff, Hub, Performing};
use crate::transport::{EventStream, Transport, TransportEvent};

/// What woke the pump.
enum Wake {
    Deadline,
    Event(Option<TransportEvent>),
    Answer(Answer),
    Handoff(Handoff),
    /// A turn of its own for the metrics facade.
    Flush,
}

/// The pump of one session.
pub(crate) struct Pump {
    pub(crate) hub: Arc<Hub>,
    /// The one strong hold on the transport: it goes with the pump.
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) events: EventStream,
    pub(crate) handoffs: mpsc::UnboundedReceiver<Handoff>,
    /// How long the transport's close may take.
    pub(crate) close_timeout: Duration,
}

impl Pump {
    /// Runs until the session is finished (closed, its machines done), then
    /// closes the transport.
    pub(crate) async fn run(self) {
        self.run_inner().instrument(info_span!("session")).await;
    }

    async fn run_inner(mut self) {
        let hub = Arc::clone(&self.hub);
        // The requests in flight, polled in the pump's own task rather than
        // spawned: an answer wakes the pump directly (a task each would
        // cost two more wake-ups, often across threads, per request).
        let mut tasks: FuturesUnordered<Performing> = FuturesUnordered::new();
        let mut started = Vec::new();
        let mut events_open = true;
        // The session's deadline, and the one sleep that waits for it.
        let mut armed: Option<Instant> = None;
        let mut sleep = std::pin::pin!(tokio::time::sleep_until(Instant::now()));
        loop {
            let (deadline, finished, told, flush) = {
                let st = hub.lock();
                let (told, flush) = Hub::waiting(&st);
                (
                    st.session.poll_timeout(),
                    st.session.is_finished(),
                    told,
                    flush,
                )
            };
            if finished {
                break;
            }
            if told {
                // The tasks woken by a published demotion or election run
                // before the requests that follow it go out; the requests
                // are polled only in the `select!` below, so one yield is
                // enough (a turn, not a thread's wake-up). News published
                // during the yield (a handle's intent) earns a yield of its
                // own.
                Hub::untold(&mut hub.lock());
                tokio::task::yield_now().await;
                let mut st = hub.lock();
                if Hub::waiting(&st).0 {
                    continue;
                }
                hub.start(&mut st, &mut started);
                drop(st);
                tasks.extend(started.drain(..));
            }
            let wake_at = deadline.map(|t| hub.clock().instant(t));
            if wake_at != armed {
                // Moved only when the deadline moves: a turn that leaves it
                // where it was (most answers of a burst) keeps its place in
                // the runtime's timer, where a new sleep each turn took one
                // and gave it back.
                if let Some(at) = wake_at {
                    sleep.as_mut().reset(at);
                }
                armed = wake_at;
            }
            let wake = tokio::select! {
                biased;
                () = &mut sleep, if armed.is_some() => Wake::Deadline,
                e = self.events.recv(), if events_open => Wake::Event(e),
                Some(answer) = tasks.next(), if !tasks.is_empty() => Wake::Answer(answer),
                Some(h) = self.handoffs.recv() => Wake::Handoff(h),
                // Pending on its first poll (in which the requests of this
                // turn go out, unless another branch is ready first), ready
                // on the next: a turn for the facade when nothing else
                // comes.
                () = tokio::task::yield_now(), if flush => Wake::Flush,
            };
            let stamp = match &wake {
                Wake::Event(Some(TransportEvent::Watch(_))) => Some(hop::PUMP_PUBLISHED),
                Wake::Answer((_, Ok(Reply::Children(_))))
                | Wake::Handoff(Handoff::Answered((_, Ok(Reply::Children(_))))) => {
                    hop!(hop::LISTED, self.transport.hop_tag());
                    Some(hop::LIST_HANDLED)
                }
                _ => None,
            };
            let mut st = hub.lock();
            Hub::flush_metrics(&mut st);
            // One clock reading per turn.
            let now = hub.clock().now();
            match wake {
                Wake::Deadline | Wake::Flush | Wake::Handoff(Handoff::Nudge) => {
                    st.session.handle_timeout(now);
                }
                Wake::Event(Some(TransportEvent::Session(e))) => {
                    info!(event = ?e, "session");
                    st.session.handle(now, Input::Session(e));
                }
                Wake::Event(Some(TransportEvent::Watch(e))) => {
                    hop!(hop::PUMP_WOKEN, self.transport.hop_tag());
                    debug!(kind = ?e.kind, path = e.path, "watch fired");
                    st.session.handle(now, Input::Watch(e));
                }
                Wake::Event(None) => {
                    debug!("the transport's event stream ended");
                    events_open = false;
                }
                Wake::Answer((op, result)) | Wake::Handoff(Handoff::Answered((op, result))) => {
                    if let Err(code) = &result {
                        debug!(session_op = %op, %code, "reply: error");
                    }
                    st.session.handle(now, Input::Reply { op, result });
                }
                Wake::Handoff(Handoff::Started(request)) => {
                    tasks.push(request);
                    st.session.handle_timeout(now);
                }
            }
            hub.turn(&mut st, &mut started);
            drop(st);
            if let Some(stamp) = stamp {
                hop!(stamp, self.transport.hop_tag());
            }
            tasks.extend(started.drain(..));
        }
        // The requests still in flight are dropped before the transport
        // closes, so nothing that holds the transport outlives the pump.
        drop(tasks);
        if tokio::time::timeout(self.close_timeout, self.transport.close())
            .await
            .is_err()
        {
            warn!(timeout = ?self.close_timeout, "close: the transport did not close in time");
        }
        for done in Hub::ended(&mut hub.lock()) {
            let _ = done.send(());
        }
        info!("session closed");
    }
}
