//! The rule for every URL leadrelay sends requests to (DESIGN.md section 16): buyers'
//! webhook URLs and bid URLs. [`check`] is the one function that decides on a URL; buyer
//! create and update call it when the URL is set, and the outbox calls [`check_with`] again
//! before each send, so a URL stored before the rule (or by hand) is not sent to either.
//! [`check_resolved`] applies the same rule to each address a host name resolves to; the
//! outbound clients call it before connecting (`outbox/connect.rs`), so a name that
//! resolves to the metadata address is refused like the address itself.
//!
//! Refused: anything but an absolute `http://` or `https://` URL; a user name or password
//! in the URL (`buyer show` would print it, and plain HTTP would carry it in clear in
//! every request); a host that is a link-local address (169.254.0.0/16, fe80::/10), where
//! cloud metadata services answer with the machine's credentials. Loopback and private
//! addresses are allowed by default: a buyer's system on the same host or network is normal
//! for an edge box. An operator whose buyers are all on the internet narrows the rule with
//! `serve --public-outbound-only` ([`Reach::PublicOnly`]): loopback, private, unique-local
//! and unspecified addresses are refused too.
//!
//! Config-time checks read the URL only (the server's `--public-outbound-only` is not known
//! to a CLI call, and a name may resolve differently later); the resolved addresses are
//! checked at each connection, which is also what defeats DNS rebinding: the address
//! checked is the address connected to.

use std::net::{IpAddr, Ipv4Addr};

/// Why a URL is not one leadrelay sends to. The messages never repeat a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundUrlError {
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
    #[error(
        "{host} is a {kind} address, and this server sends only to public addresses \
         (serve --public-outbound-only)"
    )]
    NotPublic { host: String, kind: &'static str },
}

/// Which addresses leadrelay sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reach {
    /// DESIGN.md section 16: any address but a link-local one.
    #[default]
    AnyButLinkLocal,
    /// `serve --public-outbound-only`: public addresses only.
    PublicOnly,
}

impl Reach {
    /// The reach `serve --public-outbound-only` asks for.
    pub fn public_only(public_only: bool) -> Reach {
        if public_only {
            Reach::PublicOnly
        } else {
            Reach::AnyButLinkLocal
        }
    }
}

/// Whether leadrelay may send requests to `url` under the default reach (the rule when a
/// URL is set).
pub fn check(url: &str) -> Result<(), OutboundUrlError> {
    check_with(url, Reach::default())
}

/// Whether leadrelay may send requests to `url` under `reach` (the rule before each send).
/// A host name passes here; its addresses are checked by [`check_resolved`].
pub fn check_with(url: &str, reach: Reach) -> Result<(), OutboundUrlError> {
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
    match ip_of_host(host) {
        Some(ip) => check_address(ip, reach, || host.to_string()),
        None => Ok(()),
    }
}

/// Whether leadrelay may connect to `ip`, which the host name `name` resolved to.
pub fn check_resolved(name: &str, ip: IpAddr, reach: Reach) -> Result<(), OutboundUrlError> {
    check_address(ip, reach, || format!("{name} (resolved to {ip})"))
}

fn check_address(
    ip: IpAddr,
    reach: Reach,
    host: impl FnOnce() -> String,
) -> Result<(), OutboundUrlError> {
    if is_link_local(ip) {
        return Err(OutboundUrlError::LinkLocal { host: host() });
    }
    if reach == Reach::PublicOnly
        && let Some(kind) = not_public(ip)
    {
        return Err(OutboundUrlError::NotPublic { host: host(), kind });
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

/// What kind of non-public address `ip` is, if it is one that `--public-outbound-only`
/// refuses (link-local is refused always).
fn not_public(ip: IpAddr) -> Option<&'static str> {
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4,
            None if v6.is_loopback() => return Some("loopback"),
            None if v6.is_unspecified() => return Some("unspecified"),
            None if v6.is_unique_local() => return Some("unique-local"),
            None => return None,
        },
    };
    if v4.is_loopback() {
        Some("loopback")
    } else if v4.is_private() {
        Some("private")
    } else if v4.is_unspecified() {
        Some("unspecified")
    } else {
        None
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
    fn public_only_refuses_loopback_private_and_unspecified_addresses() {
        for url in [
            "http://127.0.0.1:9000/hook",
            "http://10.0.0.7/hook",
            "http://192.168.1.20:8080/",
            "http://172.16.0.1/",
            "http://0.0.0.0/",
            "http://[::1]:8080/hook",
            "http://[fd00::1]/hook",
            "http://[::ffff:127.0.0.1]/",
            "http://2130706433/",
        ] {
            assert_eq!(check(url), Ok(()), "{url}: allowed by default");
            let error = check_with(url, Reach::PublicOnly).unwrap_err();
            assert!(
                matches!(error, OutboundUrlError::NotPublic { .. }),
                "{url}: {error}"
            );
            assert!(
                error.to_string().contains("--public-outbound-only"),
                "{error}"
            );
        }
        for url in [
            "https://buyer.example/hooks/leads",
            "http://localhost/hook",
            "http://8.8.8.8/",
            "http://[2001:db8::1]/",
        ] {
            assert_eq!(check_with(url, Reach::PublicOnly), Ok(()), "{url}");
        }
        assert!(matches!(
            check_with("http://169.254.169.254/", Reach::PublicOnly),
            Err(OutboundUrlError::LinkLocal { .. })
        ));
    }

    #[test]
    fn resolved_addresses_follow_the_same_rule_and_name_the_host() {
        let metadata = IpAddr::from([169, 254, 169, 254]);
        let loopback = IpAddr::from([127, 0, 0, 1]);
        let error = check_resolved("buyer.example", metadata, Reach::default()).unwrap_err();
        assert_eq!(
            error,
            OutboundUrlError::LinkLocal {
                host: "buyer.example (resolved to 169.254.169.254)".into()
            }
        );
        assert_eq!(
            check_resolved("localhost", loopback, Reach::default()),
            Ok(())
        );
        let error = check_resolved("localhost", loopback, Reach::PublicOnly).unwrap_err();
        assert_eq!(
            error.to_string(),
            "localhost (resolved to 127.0.0.1) is a loopback address, and this server sends \
             only to public addresses (serve --public-outbound-only)"
        );
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
