//! zstd frames against a "raw content" dictionary (the mechanism of `zstd --patch-from`),
//! for the stored forms compressed against what their reader can rebuild: the raw body
//! (`body`, against the lead's columns) and the decision trace (`trace`, against its
//! shape). One compression and one decompression context per thread, reused: creating one
//! costs more than compressing a body. Every frame carries a checksum, so a frame decoded
//! against another dictionary is refused rather than returned wrong.
//!
//! A format whose dictionary never changes prepares it once ([`Prepared`]): compressing
//! against a prepared dictionary only refers to it, where loading a raw one builds its
//! tables anew for every frame (for a trace, most of the compression's time).
//!
//! The level and the checksum are part of both stored formats' frames as written; the
//! formats themselves (their dictionaries, their format bytes) are their owners'.

use std::cell::RefCell;

/// zstd's level: the inputs are a few hundred bytes to a few kilobytes, where higher levels
/// find little more and cost more time on the request's task or the writer.
const LEVEL: i32 = 3;

/// A raw dictionary prepared for compressing and decompressing, for a format's lifetime.
pub(super) struct Prepared {
    encoder: zstd::dict::EncoderDictionary<'static>,
    decoder: zstd::dict::DecoderDictionary<'static>,
}

impl Prepared {
    /// `dict` prepared for compressing at zstd's `level`.
    pub(super) fn new(dict: &[u8], level: i32) -> Prepared {
        Prepared {
            encoder: zstd::dict::EncoderDictionary::copy(dict, level),
            decoder: zstd::dict::DecoderDictionary::copy(dict),
        }
    }
}

thread_local! {
    static PREPARED_COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static PREPARED_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

type Slot<T> = std::thread::LocalKey<RefCell<Option<T>>>;

/// `f` with this thread's compression context in `slot`, made on first use.
fn with_compressor<R>(
    slot: &'static Slot<zstd::bulk::Compressor<'static>>,
    f: impl FnOnce(&mut zstd::bulk::Compressor<'static>) -> R,
) -> R {
    slot.with(|cell| {
        let mut slot = cell.borrow_mut();
        f(slot.get_or_insert_with(|| {
            zstd::bulk::Compressor::new(LEVEL).expect("a zstd context can be made")
        }))
    })
}

/// `f` with this thread's decompression context in `slot`, made on first use.
fn with_decompressor<R>(
    slot: &'static Slot<zstd::bulk::Decompressor<'static>>,
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> R,
) -> R {
    slot.with(|cell| {
        let mut slot = cell.borrow_mut();
        f(slot.get_or_insert_with(|| {
            zstd::bulk::Decompressor::new().expect("a zstd context can be made")
        }))
    })
}

/// `data` as a zstd frame (with its checksum) against the raw dictionary `dict`.
pub(super) fn compress(dict: &[u8], data: &[u8]) -> Vec<u8> {
    with_compressor(&COMPRESSOR, |compressor| {
        compressor
            .set_dictionary(LEVEL, dict)
            .and_then(|()| compressor.include_checksum(true))
            .and_then(|()| compressor.compress(data))
            // zstd fails only to allocate, which aborts the process anyway.
            .expect("zstd compresses any input into a buffer of its bound")
    })
}

/// What `frame` holds, decoded against the raw dictionary `dict`; refused when it would be
/// longer than `max` bytes, is not a frame, or its checksum does not match.
pub(super) fn decompress(dict: &[u8], frame: &[u8], max: usize) -> std::io::Result<Vec<u8>> {
    with_decompressor(&DECOMPRESSOR, |decompressor| {
        decompressor
            .set_dictionary(dict)
            .and_then(|()| decompressor.decompress(frame, max))
    })
}

/// `data` as a zstd frame (with its checksum) against the prepared dictionary `dict`, at its
/// level; [`decompress`] against the same raw bytes reads it too.
pub(super) fn compress_prepared(dict: &'static Prepared, data: &[u8]) -> Vec<u8> {
    with_compressor(&PREPARED_COMPRESSOR, |compressor| {
        compressor
            .set_prepared_dictionary(&dict.encoder)
            .and_then(|()| compressor.include_checksum(true))
            .and_then(|()| compressor.compress(data))
            // zstd fails only to allocate, which aborts the process anyway.
            .expect("zstd compresses any input into a buffer of its bound")
    })
}

/// What `frame` holds, decoded against the prepared dictionary `dict`; refused as
/// [`decompress`] refuses.
pub(super) fn decompress_prepared(
    dict: &'static Prepared,
    frame: &[u8],
    max: usize,
) -> std::io::Result<Vec<u8>> {
    with_decompressor(&PREPARED_DECOMPRESSOR, |decompressor| {
        decompressor
            .set_prepared_dictionary(&dict.decoder)
            .and_then(|()| decompressor.decompress(frame, max))
    })
}
