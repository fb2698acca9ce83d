//! Request ids (DESIGN.md section 16): the id an HTTP request is known by in its answer
//! (`X-Request-Id`), in every log line it causes and on the lead requests it stores.
//!
//! Owns what a sane id is, making new ids, and which id is current: a tokio task-local
//! while the request's own task runs, a thread-local while a thread works for it (the
//! writer running one of its jobs, an outbox sender sending an event it caused). The log
//! format (`logging`) reads [`current`]; `Db::write` captures it into the job it submits.
//! It does not own the header (`http::server` reads and writes it) nor the column.

use std::cell::RefCell;
use std::sync::Arc;

/// A request's id, cheap to clone into jobs and log lines.
pub type RequestId = Arc<str>;

/// The longest id taken from a client; a longer one is replaced by a new id.
pub(crate) const MAX_LEN: usize = 128;

tokio::task_local! {
    static TASK: RequestId;
}

thread_local! {
    static THREAD: RefCell<Option<RequestId>> = const { RefCell::new(None) };
}

/// Whether a client's id can be used as it is: 1 to [`MAX_LEN`] characters of ASCII
/// letters, digits and `-_.:/+=@~`. Anything else (spaces, quotes, control characters) could
/// forge or break a log line, so it is replaced.
pub(crate) fn is_sane(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEN
        && id.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'_' | b'.' | b':' | b'/' | b'+' | b'=' | b'@' | b'~'
                )
        })
}

/// A new id: `req_` and a ULID, so ids sort by arrival.
pub fn generate() -> RequestId {
    crate::ids::new("req").into()
}

/// The client's id when it sent a sane one (as bytes of a header value), else a new one.
pub fn from_client(sent: Option<&[u8]>) -> RequestId {
    match sent.and_then(|bytes| std::str::from_utf8(bytes).ok()) {
        Some(id) if is_sane(id) => id.into(),
        _ => generate(),
    }
}

/// Runs `future` (a request's handling) with `id` as the current request id.
pub async fn scope<F: Future>(id: RequestId, future: F) -> F::Output {
    TASK.scope(id, future).await
}

/// Runs `f` on this thread with `id` as the current request id (none when `None`), and
/// restores the previous one after.
pub fn on_thread<R>(id: Option<&RequestId>, f: impl FnOnce() -> R) -> R {
    let previous = THREAD.with(|current| current.replace(id.cloned()));
    let result = f();
    THREAD.with(|current| *current.borrow_mut() = previous);
    result
}

/// The id of the request the running code works for, if any.
pub fn current() -> Option<RequestId> {
    TASK.try_with(Clone::clone)
        .ok()
        .or_else(|| THREAD.with(|current| current.borrow().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_ids_are_kept_and_others_replaced() {
        for sane in [
            "abc",
            "0f8e-12",
            "trace:1/2+3=4@x~y_z.w",
            &"a".repeat(MAX_LEN),
        ] {
            assert!(is_sane(sane), "{sane}");
            assert_eq!(&*from_client(Some(sane.as_bytes())), sane);
        }
        for insane in [
            "",
            "a b",
            "a\nb",
            "\"quoted\"",
            "é",
            &"a".repeat(MAX_LEN + 1),
        ] {
            assert!(!is_sane(insane), "{insane:?}");
            let replaced = from_client(Some(insane.as_bytes()));
            assert!(replaced.starts_with("req_"), "{replaced}");
        }
        assert!(from_client(Some(&[0xff, 0xfe])).starts_with("req_"));
        assert!(from_client(None).starts_with("req_"));
        assert_ne!(generate(), generate());
    }

    #[test]
    fn the_current_id_follows_tasks_and_threads() {
        assert_eq!(current(), None);
        let id: RequestId = "outer".into();
        let seen = on_thread(Some(&id), || {
            let inner: RequestId = "inner".into();
            let nested = on_thread(Some(&inner), current);
            (nested, current())
        });
        assert_eq!(seen, (Some("inner".into()), Some("outer".into())));
        assert_eq!(current(), None);

        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime for the test");
        let in_task = runtime.block_on(scope("task".into(), async { current() }));
        assert_eq!(in_task, Some("task".into()));
    }
}
