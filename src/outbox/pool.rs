//! The sender threads: each takes a claimed event, makes the one blocking HTTP call of its
//! attempt and hands the attempt back to the coordinator through the [`Notifier`].
//!
//! Threads are started as claimed events arrive, up to the in-flight limit, and end after a
//! minute without work, so an idle service holds few. The coordinator never claims more
//! than the limit, so every claimed event has a thread at once: the queue here is never
//! longer than the limit, and a slow or hanging buyer holds only the threads of its own
//! events (at most its per-buyer limit).
//!
//! Owns the threads and the hand-over queue. Why threads and the blocking client rather
//! than tasks on the async runtime: ARCHITECTURE.md ("the outbox").

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::Notifier;
use super::health::Observation;
use super::sender::Sender;
use super::store::{Attempt, Claimed, Verdict};

/// How long an idle sender thread waits for work before it ends.
const IDLE: Duration = Duration::from_secs(60);

pub(crate) struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Work arrived, or the pool closed.
    work: Condvar,
    /// A thread ended.
    ended: Condvar,
    limit: usize,
    sender: Arc<Sender>,
    notifier: Notifier,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Claimed>,
    threads: usize,
    idle: usize,
    closed: bool,
}

impl Pool {
    pub(crate) fn new(limit: usize, sender: Sender, notifier: Notifier) -> Pool {
        Pool {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                ended: Condvar::new(),
                limit: limit.max(1),
                sender: Arc::new(sender),
                notifier,
            }),
        }
    }

    /// Hands `events` to sender threads, starting threads where none is idle.
    pub(crate) fn push(&self, events: Vec<Claimed>) {
        if events.is_empty() {
            return;
        }
        let mut state = self.inner.lock();
        let arriving = events.len();
        state.queue.extend(events);
        let wanted = state.queue.len().saturating_sub(state.idle);
        let start = wanted.min(self.inner.limit.saturating_sub(state.threads));
        let mut started = 0;
        for _ in 0..start {
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("outbox-sender".into())
                .spawn(move || inner.serve());
            match spawned {
                Ok(_) => started += 1,
                // The threads there are take the work in turn; nothing is lost.
                Err(e) => {
                    log::warn!("outbox: cannot start a sender thread: {e}");
                    break;
                }
            }
        }
        state.threads += started;
        drop(state);
        for _ in 0..arriving.min(self.inner.limit) {
            self.inner.work.notify_one();
        }
    }

    /// Stops taking work: returns the events no thread took, and waits until every thread
    /// has finished the attempt it is making.
    pub(crate) fn close(&self) -> Vec<Claimed> {
        let mut state = self.inner.lock();
        state.closed = true;
        let unsent: Vec<Claimed> = state.queue.drain(..).collect();
        self.inner.work.notify_all();
        while state.threads > 0 {
            state = self
                .inner
                .ended
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        unsent
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain data that a panicking holder cannot leave half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A sender thread: sends events until the pool closes or no work came for [`IDLE`].
    fn serve(&self) {
        while let Some(event) = self.take() {
            let attempt = send_catching_panics(&self.sender, &event);
            self.notifier.finished(attempt);
        }
        let mut state = self.lock();
        state.threads -= 1;
        drop(state);
        self.ended.notify_all();
    }

    fn take(&self) -> Option<Claimed> {
        let mut state = self.lock();
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some(event);
            }
            if state.closed {
                return None;
            }
            state.idle += 1;
            let (next, timeout) = self
                .work
                .wait_timeout(state, IDLE)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() {
                return None;
            }
        }
    }
}

/// Sends `event`; a panic in the sender becomes an attempt to retry, so the event is never
/// left held by this process with nobody sending it.
fn send_catching_panics(sender: &Sender, event: &Claimed) -> Attempt {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sender.send(event))) {
        Ok(attempt) => attempt,
        Err(_) => {
            log::error!("outbox: sending event {} panicked", event.id);
            Attempt {
                event_id: event.id.clone(),
                buyer_id: event.buyer_id.clone(),
                claim: event.claim,
                probe: event.probe,
                url: event.url.clone(),
                started_at: crate::clock::now_ms(),
                duration_ms: 0,
                http_status: None,
                error: Some("internal error while sending".into()),
                response_excerpt: None,
                verdict: Verdict::Retry { retry_after: None },
                // Our fault, not the endpoint's.
                observation: Observation::Answered,
            }
        }
    }
}
