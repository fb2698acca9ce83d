//! Reading a request body: content type, content encoding (gzip decoded, others 415), size
//! limit, read timeout, JSON parsing; the console's forms.

use std::io::Read;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::HeaderMap;
use hyper::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::Value;

use super::Request;
use super::error::HttpError;

/// How long a client may take to send a whole body once its headers arrived. A client that
/// trickles a body (slowloris) is answered 408 and cut off.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How a body is encoded (`Content-Encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Identity,
    Gzip,
}

/// The body's encoding: none (or `identity`) or `gzip` (`x-gzip` is its old name); any
/// other, or more than one, is 415.
fn encoding(headers: &HeaderMap) -> Result<Encoding, HttpError> {
    let mut codings = Vec::new();
    for value in headers.get_all(CONTENT_ENCODING) {
        let value = value.to_str().map_err(|_| HttpError::UnsupportedEncoding {
            encoding: String::from_utf8_lossy(value.as_bytes()).into_owned(),
        })?;
        codings.extend(
            value
                .split(',')
                .map(|coding| coding.trim().to_ascii_lowercase())
                .filter(|coding| !coding.is_empty() && coding != "identity"),
        );
    }
    match codings.as_slice() {
        [] => Ok(Encoding::Identity),
        [one] if one == "gzip" || one == "x-gzip" => Ok(Encoding::Gzip),
        _ => Err(HttpError::UnsupportedEncoding {
            encoding: codings.join(", ").chars().take(100).collect(),
        }),
    }
}

/// Decompresses a gzip body, refusing more than `limit` bytes of JSON (413): a small body
/// that inflates to gigabytes stops at the limit.
fn gunzip(compressed: &[u8], limit: usize) -> Result<Bytes, HttpError> {
    let mut decoded = Vec::with_capacity(compressed.len().saturating_mul(4).min(limit));
    flate2::read::MultiGzDecoder::new(compressed)
        .take(limit as u64 + 1)
        .read_to_end(&mut decoded)
        .map_err(|e| HttpError::BadGzip(e.to_string()))?;
    if decoded.len() > limit {
        return Err(HttpError::PayloadTooLarge { limit });
    }
    Ok(Bytes::from(decoded))
}

/// Reads the whole body, refusing more than `limit` bytes (413, also after decompressing a
/// gzip body), non-JSON content types and unknown content encodings (415). A missing
/// content type is accepted: the interface is JSON-only, and many partner tools omit the
/// header.
pub(crate) async fn read_bytes(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    let media_type = media_type(&request);
    if let Some(media_type) = media_type
        && media_type != "application/json"
        && !media_type.ends_with("+json")
    {
        discard(request.into_body(), limit).await;
        return Err(HttpError::UnsupportedMediaType { media_type });
    }
    read_limited(request, limit).await
}

/// Reads an HTML form's body (`application/x-www-form-urlencoded`, which browsers always
/// name), refusing more than `limit` bytes (413) and any other content type (415).
pub(crate) async fn read_form(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    match media_type(&request) {
        Some(media_type) if media_type == "application/x-www-form-urlencoded" => {
            read_limited(request, limit).await
        }
        other => Err(HttpError::NotAForm {
            media_type: other.unwrap_or_default(),
        }),
    }
}

/// The request's media type, lower-case without parameters, when it names one.
fn media_type(request: &Request) -> Option<String> {
    let content_type = request.headers().get(CONTENT_TYPE)?;
    let content_type = content_type.to_str().unwrap_or("").to_ascii_lowercase();
    Some(
        content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
    )
}

/// The body, decoded when gzip-compressed, of at most `limit` bytes (compressed and
/// decoded).
async fn read_limited(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    let encoding = match encoding(request.headers()) {
        Ok(encoding) => encoding,
        Err(refused) => {
            // Refused for its headers, but the unread body would make the closing socket
            // reset the connection under the 415 (`discard`).
            discard(request.into_body(), limit).await;
            return Err(refused);
        }
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(HttpError::PayloadTooLarge { limit });
    }
    let body = Limited::new(request.into_body(), limit);
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, body.collect()).await {
        Err(_) => return Err(HttpError::BodyTimeout),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(HttpError::PayloadTooLarge { limit });
        }
        Ok(Err(e)) => return Err(HttpError::BodyUnreadable(e.to_string())),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    match encoding {
        Encoding::Identity => Ok(bytes),
        Encoding::Gzip => gunzip(&bytes, limit),
    }
}

/// Reads and drops what is left of a request body: at most `limit` bytes, within the body
/// read timeout. Call it before an answer given without reading the body (unknown path,
/// unknown source, wrong secret, rate limited): a socket closed with unread data in it makes
/// the kernel reset the connection, which can destroy the answer before the client has read
/// it, so a partner would see a connection error instead of a clear 401.
pub(crate) async fn discard(body: hyper::body::Incoming, limit: usize) {
    let drain = async {
        let mut body = body;
        let mut read = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return };
            if let Some(data) = frame.data_ref() {
                read += data.len();
                if read > limit {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(BODY_READ_TIMEOUT, drain).await;
}

/// Parses bytes as JSON, 400 `invalid_json` with the position of the problem otherwise.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, HttpError> {
    serde_json::from_slice(bytes).map_err(|json| HttpError::InvalidJson { json })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use hyper::header::HeaderValue;

    use super::*;

    fn headers(encodings: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for encoding in encodings {
            headers.append(CONTENT_ENCODING, HeaderValue::from_str(encoding).unwrap());
        }
        headers
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn encodings_are_identity_or_gzip() {
        for (sent, expected) in [
            (&[][..], Some(Encoding::Identity)),
            (&["identity"][..], Some(Encoding::Identity)),
            (&["gzip"][..], Some(Encoding::Gzip)),
            (&["GZip"][..], Some(Encoding::Gzip)),
            (&["x-gzip"][..], Some(Encoding::Gzip)),
            (&["identity, gzip"][..], Some(Encoding::Gzip)),
            (&["br"][..], None),
            (&["deflate"][..], None),
            (&["gzip, gzip"][..], None),
            (&["gzip", "br"][..], None),
        ] {
            assert_eq!(encoding(&headers(sent)).ok(), expected, "{sent:?}");
        }
    }

    #[test]
    fn gzip_is_decoded_up_to_the_limit() {
        let json = br#"{"firstName": "Ada"}"#;
        assert_eq!(&gunzip(&gzip(json), 1024).unwrap()[..], json);
        // A bomb: a few kilobytes that inflate far past the limit stop at it.
        let bomb = gzip(&vec![b' '; 4 * 1024 * 1024]);
        assert!(bomb.len() < 16 * 1024, "{}", bomb.len());
        assert!(matches!(
            gunzip(&bomb, 1024 * 1024),
            Err(HttpError::PayloadTooLarge { .. })
        ));
        assert!(matches!(
            gunzip(b"not gzip at all", 1024),
            Err(HttpError::BadGzip(_))
        ));
    }
}
