//! The rule for every URL leadrelay sends requests to (DESIGN.md section 16): buyers'
//! webhook URLs now, bid URLs later. [`check`] is the one function that decides; buyer
//! create and update call it when the URL is set, and the outbox calls it again before
//! each send, so a URL stored before the rule (or by hand) is not sent to either.
//!
//! Refused: anything but an absolute `http://` or `https://` URL; a user name or password
//! in the URL (`buyer show` would print it, and plain HTTP would carry it in clear in
//! every request); a host that is a link-local address (169.254.0.0/16, fe80::/10), where
//! cloud metadata services answer with the machine's credentials. Loopback and private
//! addresses are allowed: a buyer's system on the same host or network is normal for an
//! edge box.
//!
//! The rule reads the URL only. A host name is not resolved here: a name that resolves to
//! a link-local address needs control of its DNS, and checking the resolved address would
//! need a hook in the HTTP client's connect (ureq's resolver interface is not stable API)
//! to be more than a race with DNS rebinding.

use std::net::{IpAddr, Ipv4Addr};

/// Why a URL is not one leadrelay sends to. The messages never repeat a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OutboundUrlError {
    #[error("'{url}' is not an absolute http:// or https:// URL")]
    NotHttp { url: String },
    #[error(
        "the URL has a user name or password in it; it would be printed by `show` and sent in \
         clear with every request: give the buyer a URL without credentials (leadrelay signs \
         each request instead)"
    )]
    Credentials,
    #[error(
        "{host} is a link-local address (169.254.0.0/16, fe80::/10), where cloud metadata \
         services answer with the machine's credentials: leadrelay does not send there"
    )]
    LinkLocal { host: String },
}

/// Whether leadrelay may send requests to `url`.
pub(crate) fn check(url: &str) -> Result<(), OutboundUrlError> {
    let not_http = || OutboundUrlError::NotHttp {
        url: url.chars().take(200).collect(),
    };
    // The parser hyper uses, so what counts as a URL did not change with this rule.
    let uri: http::Uri = url.parse().map_err(|_| not_http())?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(not_http());
    }
    let authority = uri.authority().ok_or_else(not_http)?;
    if authority.as_str().contains('@') {
        return Err(OutboundUrlError::Credentials);
    }
    let host = authority.host();
    if host.is_empty() {
        return Err(not_http());
    }
    if let Some(ip) = ip_of_host(host)
        && is_link_local(ip)
    {
        return Err(OutboundUrlError::LinkLocal {
            host: host.to_string(),
        });
    }
    Ok(())
}

/// The address a host names literally: an IPv6 literal (`[fe80::1]`), a dotted IPv4
/// address, or one of the older IPv4 forms that resolvers still accept (`2852039166`,
/// `0xa9fea9fe`, `169.254.43518`, octal parts), so the metadata address cannot slip past in
/// another spelling.
fn ip_of_host(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        // A zone (`%25eth0`) only names the interface; the address is before it.
        let address = inner.split('%').next().unwrap_or(inner);
        return address.parse().ok();
    }
    legacy_ipv4(host).map(IpAddr::V4)
}

/// `inet_aton`'s reading of `host`: one to four parts separated by dots, each decimal,
/// octal (leading `0`) or hexadecimal (`0x`); the last part fills the remaining bytes.
fn legacy_ipv4(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) =
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                (hex, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (*part, 10)
            };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        let value = if digits.is_empty() {
            0
        } else {
            u32::from_str_radix(digits, radix).ok()?
        };
        values.push(value);
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&v| v > 255) {
        return None;
    }
    let last_bits = 8 * (4 - leading.len() as u32);
    if last_bits < 32 && *last >= (1u32 << last_bits) {
        return None;
    }
    let mut address = *last;
    for (index, &value) in leading.iter().enumerate() {
        address |= value << (24 - 8 * index as u32);
    }
    Some(Ipv4Addr::from(address))
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_link_local(),
            None => v6.is_unicast_link_local(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_urls_loopback_and_private_hosts_are_allowed() {
        for url in [
            "https://buyer.example/hooks/leads",
            "http://127.0.0.1:9000/hook",
            "http://localhost/hook",
            "http://10.0.0.7/hook",
            "http://192.168.1.20:8080/",
            "http://[::1]:8080/hook",
            "http://[fd00::1]/hook",
            "http://169.253.255.255/",
            "http://169.255.0.1/",
            "http://[fec0::1]/",
            "https://buyer.example/path?user=a@b",
        ] {
            assert_eq!(check(url), Ok(()), "{url}");
        }
    }

    #[test]
    fn urls_that_are_not_http_are_refused() {
        for url in [
            "",
            "buyer.example/hook",
            "ftp://buyer.example/",
            "/hook",
            "http://",
        ] {
            assert!(
                matches!(check(url), Err(OutboundUrlError::NotHttp { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn credentials_are_refused_without_repeating_them() {
        for url in [
            "http://user:hunter2@buyer.example/hook",
            "https://hunter2@buyer.example/hook",
            "http://:hunter2@127.0.0.1/",
        ] {
            let error = check(url).unwrap_err();
            assert_eq!(error, OutboundUrlError::Credentials, "{url}");
            let message = error.to_string();
            assert!(!message.contains("hunter2"), "{message}");
            assert!(message.contains("printed by `show`"), "{message}");
            assert!(message.contains("in clear"), "{message}");
        }
    }

    #[test]
    fn link_local_addresses_are_refused_in_every_spelling() {
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://169.254.0.1:8080/",
            "http://[fe80::1]/",
            "http://[fe80::1%25eth0]/",
            "http://[febf:ffff::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://2852039166/",
            "http://0xa9fea9fe/",
            "http://0251.0376.0251.0376/",
            "http://169.254.43518/",
            "http://169.254.169.254./",
        ] {
            let error = check(url).unwrap_err();
            assert!(
                matches!(error, OutboundUrlError::LinkLocal { .. }),
                "{url}: {error}"
            );
            assert!(error.to_string().contains("metadata"), "{error}");
        }
    }

    #[test]
    fn legacy_ipv4_forms_are_read_as_resolvers_read_them() {
        for (host, expected) in [
            ("1.2.3.4", Some([1, 2, 3, 4])),
            ("16909060", Some([1, 2, 3, 4])),
            ("1.2.772", Some([1, 2, 3, 4])),
            ("1.131844", Some([1, 2, 3, 4])),
            ("0x01020304", Some([1, 2, 3, 4])),
            ("01.02.03.04", Some([1, 2, 3, 4])),
            ("256.1.1.1", None),
            ("1.2.3.4.5", None),
            ("1.2.3.256", None),
            ("buyer.example", None),
            ("08.1.1.1", None),
            ("", None),
        ] {
            assert_eq!(legacy_ipv4(host), expected.map(Ipv4Addr::from), "{host}");
        }
    }
}
