//! Reading a presented credential from a request.
//!
//! A secret may come as `X-Service-Webhook-Secret: S` or `Authorization: Bearer S`
//! (SPEC.md section 5). Verification against a stored hash is [`crate::secrets::any_matches`];
//! this module only finds what the caller presented.

use hyper::HeaderMap;

pub(crate) const SECRET_HEADER: &str = "x-service-webhook-secret";

/// The secrets the request presents, in either header (at most two). Empty values count as
/// absent.
pub(crate) fn presented_secrets(headers: &HeaderMap) -> Vec<&str> {
    let mut found = Vec::with_capacity(2);
    if let Some(value) = headers.get(SECRET_HEADER).and_then(|v| v.to_str().ok()) {
        let value = value.trim();
        if !value.is_empty() {
            found.push(value);
        }
    }
    if let Some(value) = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some((scheme, token)) = value.trim().split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
    {
        let token = token.trim();
        if !token.is_empty() {
            found.push(token);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{AUTHORIZATION, HeaderValue};

    #[test]
    fn reads_either_header() {
        let mut headers = HeaderMap::new();
        assert!(presented_secrets(&headers).is_empty());
        headers.insert(SECRET_HEADER, HeaderValue::from_static("s1"));
        assert_eq!(presented_secrets(&headers), vec!["s1"]);
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer s2"));
        assert_eq!(presented_secrets(&headers), vec!["s1", "s2"]);
        headers.remove(SECRET_HEADER);
        headers.insert(AUTHORIZATION, HeaderValue::from_static("bearer  s3 "));
        assert_eq!(presented_secrets(&headers), vec!["s3"]);
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert!(presented_secrets(&headers).is_empty());
    }
}
