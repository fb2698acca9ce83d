//! zstd frames against a "raw content" dictionary (the mechanism of `zstd --patch-from`),
//! for the stored forms compressed against what their reader can rebuild: the decision
//! trace's formats 1 and 2 (`trace`, against its shape; only a ping's trace is still written,
//! in format 1), and the raw body's format 1 (`body`, against the lead's columns; read, no
//! longer written). Contexts are made once per thread and reused (one compressor, and a
//! decompressor for raw dictionaries and one for prepared ones): creating one costs more than
//! compressing a small input. Every frame carries a checksum, so a frame decoded against
//! another dictionary is refused rather than returned wrong.
//!
//! A format whose dictionary never changes prepares it once for reading ([`Prepared`]):
//! loading a raw one builds its tables anew for every frame.
//!
//! The level and the checksum are part of both stored formats' frames as written; the
//! formats themselves (their dictionaries, their format bytes) are their owners'.

use std::cell::RefCell;

/// zstd's level: the inputs are a few hundred bytes to a few kilobytes, where higher levels
/// find little more and cost more time on the request's task or the writer.
const LEVEL: i32 = 3;

/// A raw dictionary prepared for decompressing, for a format's lifetime.
pub(super) struct Prepared {
    decoder: zstd::dict::DecoderDictionary<'static>,
}

impl Prepared {
    /// `dict` prepared for decompressing.
    pub(super) fn new(dict: &[u8]) -> Prepared {
        Prepared {
            decoder: zstd::dict::DecoderDictionary::copy(dict),
        }
    }
}

thread_local! {
    static PREPARED_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
    static PREFIX_COMPRESSOR: RefCell<Option<zstd::zstd_safe::CCtx<'static>>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

type Slot<T> = std::thread::LocalKey<RefCell<Option<T>>>;

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
///
/// The dictionary is referenced as the frame's prefix (`ZSTD_CCtx_refPrefix`), not loaded:
/// loading a raw dictionary builds a dictionary object with match tables sized for an input
/// of unknown length (level 3: some 700 KB cleared per frame), where a prefix's tables are
/// sized for the prefix and the input together. For a dictionary of a few hundred bytes that
/// was 62 k of the 64 k instructions of a compression (callgrind of `serve` under
/// `bench/instructions.sh single`, when the body was written in format 1). Raw content
/// referenced as a prefix is what a loaded raw dictionary means to the decoder, so
/// [`decompress`] reads both.
pub(super) fn compress(dict: &[u8], data: &[u8]) -> Vec<u8> {
    PREFIX_COMPRESSOR.with(|cell| {
        let context = cell.borrow_mut().take().unwrap_or_else(prefix_context);
        // Covariance: the context may borrow `dict` for this one frame.
        let mut context: zstd::zstd_safe::CCtx<'_> = context;
        let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
        context
            .ref_prefix(dict)
            .and_then(|_| context.compress2(&mut frame, data))
            // zstd fails only to allocate, which aborts the process anyway.
            .expect("zstd compresses any input into a buffer of its bound");
        // SAFETY: a prefix serves exactly one frame: ZSTD_compress2 ended that frame
        // (it succeeded), and with it the context's reference to `dict`, so the context
        // borrows nothing any more and may be kept for the thread's next frame.
        let context: zstd::zstd_safe::CCtx<'static> = unsafe { std::mem::transmute(context) };
        *cell.borrow_mut() = Some(context);
        frame
    })
}

/// A compression context at [`LEVEL`] writing checksums, for [`compress`].
fn prefix_context() -> zstd::zstd_safe::CCtx<'static> {
    use zstd::zstd_safe::CParameter;
    let mut context = zstd::zstd_safe::CCtx::create();
    context
        .set_parameter(CParameter::CompressionLevel(LEVEL))
        .and_then(|_| context.set_parameter(CParameter::ChecksumFlag(true)))
        .expect("a level and a checksum flag zstd knows");
    context
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
