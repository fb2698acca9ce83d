//! The senders: one thread (`outbox-sender`) running a small tokio runtime of its own, on
//! which each claimed event is one task making the one HTTP call of its attempt; the
//! attempt goes back to the coordinator through the [`Notifier`].
//!
//! The coordinator never claims more than the in-flight limit, so the events handed over
//! here are never more than that: no queue of bodies grows in memory, and a slow or
//! hanging buyer holds only the tasks of its own events (at most its per-buyer limit).
//! Why tasks on a non-blocking client rather than a thread per send: ARCHITECTURE.md ("the
//! outbox"). The runtime is the outbox's own, not the HTTP server's, so a burst of sends
//! never competes with request handling for the server's worker threads.

use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;

use super::Notifier;
use super::health::Observation;
use super::sender::{Sender, SetupError};
use super::store::{Attempt, Claimed, Verdict};

/// Why the senders could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("cannot start the outbox sender thread: {0}")]
    Io(#[from] std::io::Error),
}

impl From<StartError> for std::io::Error {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Io(io) => io,
            other => std::io::Error::other(other.to_string()),
        }
    }
}

enum Message {
    Send(Claimed),
    /// Stop taking events; answer with those not yet started once every attempt under way
    /// has finished.
    Close(std_mpsc::Sender<Vec<Claimed>>),
}

pub(crate) struct Pool {
    inbox: mpsc::UnboundedSender<Message>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// Starts the sender thread with its runtime and HTTP client.
    pub(crate) fn start(
        timeout: std::time::Duration,
        per_host: usize,
        reach: crate::outbound_url::Reach,
        notifier: Notifier,
    ) -> Result<Pool, StartError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // The client's connection pool must be made inside the runtime that drives it.
        let sender = {
            let _entered = runtime.enter();
            Sender::new(timeout, per_host, reach)?
        };
        let (inbox, receiver) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("outbox-sender".into())
            .spawn(move || runtime.block_on(serve(sender, receiver, notifier)))?;
        Ok(Pool {
            inbox,
            thread: Some(thread),
        })
    }

    /// Starts sending `events`.
    pub(crate) fn push(&self, events: Vec<Claimed>) {
        for event in events {
            // The thread only ends on `close`, which the coordinator calls last.
            let _ = self.inbox.send(Message::Send(event));
        }
    }

    /// Stops taking events: returns the events no attempt was started for, once every
    /// attempt under way has finished (and been handed to the notifier).
    pub(crate) fn close(mut self) -> Vec<Claimed> {
        let (answer, unsent) = std_mpsc::channel();
        let closed = self.inbox.send(Message::Close(answer)).is_ok();
        let unsent = if closed {
            unsent.recv().unwrap_or_default()
        } else {
            Vec::new()
        };
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            log::error!("the outbox sender thread panicked");
        }
        unsent
    }
}

/// The sender thread's loop: a task per event, until told to close.
async fn serve(sender: Sender, mut inbox: mpsc::UnboundedReceiver<Message>, notifier: Notifier) {
    let mut sending = tokio::task::JoinSet::new();
    let answer = loop {
        tokio::select! {
            message = inbox.recv() => match message {
                Some(Message::Send(event)) => {
                    let (sender, notifier) = (sender.clone(), notifier.clone());
                    sending.spawn(async move {
                        let attempt = send_catching_panics(sender, event).await;
                        notifier.finished(attempt);
                    });
                }
                Some(Message::Close(answer)) => break Some(answer),
                None => break None,
            },
            Some(_) = sending.join_next(), if !sending.is_empty() => {}
        }
    };
    let mut unsent = Vec::new();
    inbox.close();
    while let Ok(message) = inbox.try_recv() {
        if let Message::Send(event) = message {
            unsent.push(event);
        }
    }
    while sending.join_next().await.is_some() {}
    if let Some(answer) = answer {
        let _ = answer.send(unsent);
    }
}

/// Sends `event` in a task of its own; a panic in the sender becomes an attempt to retry,
/// so the event is never left held by this process with nobody sending it.
async fn send_catching_panics(sender: Sender, event: Claimed) -> Attempt {
    let sent = {
        let event = event.clone();
        // The request that caused the event is current while it is sent (log lines).
        let request_id = event
            .request_id
            .as_deref()
            .map(crate::request_id::RequestId::from);
        tokio::spawn(async move {
            match request_id {
                Some(id) => crate::request_id::scope(id, sender.send(&event)).await,
                None => sender.send(&event).await,
            }
        })
        .await
    };
    match sent {
        Ok(attempt) => attempt,
        Err(_) => {
            log::error!("outbox: sending event {} panicked", event.id);
            Attempt {
                event_id: event.id.clone(),
                row: event.row,
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
                request: None,
            }
        }
    }
}
