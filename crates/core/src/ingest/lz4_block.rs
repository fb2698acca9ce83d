//! An LZ4 block against a dictionary, framed with the length of what it holds and a check of
//! it: the stored form of the raw body's format 2 (`body`, a SHA-256 prefix as its check) and
//! of the decision trace's format 3 (`trace`, a CRC-32). LZ4 blocks carry neither their
//! length nor a check; each format chooses its check and what precedes the frame.
//!
//! The frame: the length (u32, little-endian), the check (`N` bytes), the block. Decoding
//! is `lz4_flex`'s safe decoder: a stored value is read back from the file, not trusted.

/// Appends to `stored` the frame of `data` against `dict`, with `check` (of `data`).
pub(super) fn append<const N: usize>(
    stored: &mut Vec<u8>,
    data: &[u8],
    check: [u8; N],
    dict: &[u8],
) {
    let length = u32::try_from(data.len()).expect("a stored body or trace is far below 4 GiB");
    stored.reserve(4 + N + lz4_flex::block::get_maximum_output_size(data.len()));
    stored.extend_from_slice(&length.to_le_bytes());
    stored.extend_from_slice(&check);
    let block = stored.len();
    stored.resize(stored.capacity(), 0);
    let written = lz4_flex::block::compress_into_with_dict(data, &mut stored[block..], dict)
        .expect("the output has the block's maximum size");
    stored.truncate(block + written);
}

/// What the frame `stored` holds, decoded against `dict`; the reason when it claims more
/// than `max` bytes, is not a block of its length, or does not match its check (`check_of`
/// of what it decodes to).
pub(super) fn read<const N: usize>(
    stored: &[u8],
    dict: &[u8],
    max: usize,
    check_of: impl FnOnce(&[u8]) -> [u8; N],
) -> Result<Vec<u8>, &'static str> {
    let (length, rest) = stored
        .split_first_chunk::<4>()
        .ok_or("shorter than its header")?;
    let (expected, block) = rest
        .split_first_chunk::<N>()
        .ok_or("shorter than its header")?;
    let length = u32::from_le_bytes(*length) as usize;
    if length > max {
        return Err("claims more than the limit");
    }
    if block.len() > lz4_flex::block::get_maximum_output_size(length) {
        return Err("a block longer than its length could need");
    }
    let decoded = lz4_flex::block::decompress_with_dict(block, length, dict)
        .map_err(|_| "not an LZ4 block of its length")?;
    if decoded.len() != length || check_of(&decoded) != *expected {
        return Err("does not match its check");
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DICT: &[u8] = b"the dictionary: what the data repeats";
    const DATA: &[u8] = b"the data repeats the dictionary: what the data repeats, twice";

    fn crc(data: &[u8]) -> [u8; 4] {
        crc32fast::hash(data).to_le_bytes()
    }

    #[test]
    fn a_frame_reads_back_after_what_precedes_it_and_never_as_other_data() {
        let mut stored = b"prefix".to_vec();
        append(&mut stored, DATA, crc(DATA), DICT);
        assert!(
            stored.len() < 6 + 4 + 4 + DATA.len(),
            "compressed against the dictionary"
        );
        let frame = &stored[6..];
        assert_eq!(read(frame, DICT, 1024, crc).unwrap(), DATA);
        assert_eq!(
            read(frame, DICT, DATA.len() - 1, crc),
            Err("claims more than the limit")
        );
        assert!(read(frame, b"another dictionary", 1024, crc).is_err());
        // A changed byte is refused, or (a match moved to equal bytes) reads the same data:
        // never other data. The length and the check are refused whenever they change.
        for at in 0..frame.len() {
            let mut changed = frame.to_vec();
            changed[at] ^= 0x01;
            if let Ok(data) = read(&changed, DICT, 1024, crc) {
                assert!(at >= 8, "header byte {at} changed and was accepted");
                assert_eq!(data, DATA, "byte {at} changed");
            }
        }
        assert_eq!(
            read(&frame[..5], DICT, 1024, crc),
            Err("shorter than its header")
        );
    }
}
