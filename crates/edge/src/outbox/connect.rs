//! How the outbound clients (the webhook sender, the bid client) reach a buyer: hyper-util's
//! TCP connector over rustls with the public web roots, resolving names with getaddrinfo
//! through [`CheckedResolver`], which holds every address a name resolves to against
//! `outbound_url`'s rule before a connection is made.
//!
//! Owns the connector and the check of resolved addresses; the rule itself (which addresses
//! are refused) is `outbound_url`'s alone. An IP literal in a URL never reaches the
//! resolver (hyper-util connects to it directly): the callers check the URL with
//! `outbound_url::check_with` before each send. Checking at connect time, on the addresses
//! actually connected to, is what makes the rule hold against a name whose DNS answer
//! changes between the check and the connection.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};

use crate::outbound_url::{self, Reach};

/// The connector of both outbound clients.
pub(crate) type Connector = hyper_rustls::HttpsConnector<HttpConnector<CheckedResolver>>;

/// An HTTP and HTTPS connector that connects only where `reach` allows, giving up on a
/// connection after `connect_timeout` when one is given.
pub(crate) fn connector(
    reach: Reach,
    connect_timeout: Option<Duration>,
) -> Result<Connector, rustls::Error> {
    let mut http = HttpConnector::new_with_resolver(CheckedResolver {
        inner: GaiResolver::new(),
        reach,
    });
    http.enforce_http(false);
    http.set_connect_timeout(connect_timeout);
    http.set_nodelay(true);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}

/// getaddrinfo, refusing a name when any address it resolves to is one `reach` refuses (a
/// name with one public and one link-local address is refused, not half-used). The refusal
/// is an I/O error whose inner error is the [`outbound_url::OutboundUrlError`], so the
/// caller can tell it from a failed lookup.
#[derive(Clone)]
pub(crate) struct CheckedResolver {
    inner: GaiResolver,
    reach: Reach,
}

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_string();
        let reach = self.reach;
        let resolving = self.inner.call(name);
        Box::pin(async move {
            let addresses: Vec<SocketAddr> = resolving.await?.collect();
            for address in &addresses {
                outbound_url::check_resolved(&host, address.ip(), reach).map_err(|refused| {
                    std::io::Error::new(std::io::ErrorKind::PermissionDenied, refused)
                })?;
            }
            Ok(addresses.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use tower_service::Service;

    use super::*;

    fn resolve(reach: Reach, host: &str) -> Result<Vec<SocketAddr>, std::io::Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime without drivers always builds");
        let mut resolver = CheckedResolver {
            inner: GaiResolver::new(),
            reach,
        };
        let name: Name = host.parse().expect("a valid host name");
        runtime.block_on(async { resolver.call(name).await.map(Iterator::collect) })
    }

    #[test]
    fn a_name_resolving_to_loopback_passes_by_default_and_is_refused_when_public_only() {
        let addresses = resolve(Reach::AnyButLinkLocal, "localhost").unwrap();
        assert!(
            addresses.iter().all(|a| a.ip().is_loopback()),
            "{addresses:?}"
        );
        let error = resolve(Reach::PublicOnly, "localhost").unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        let refused = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<outbound_url::OutboundUrlError>())
            .expect("the refusal is the rule's error");
        assert!(
            refused.to_string().starts_with("localhost (resolved to "),
            "{refused}"
        );
    }

    #[test]
    fn a_numeric_name_resolving_to_the_metadata_address_is_refused() {
        // getaddrinfo reads the old inet_aton spellings as addresses: the resolver's
        // answer is checked, whatever the spelling.
        let error = resolve(Reach::AnyButLinkLocal, "2852039166").unwrap_err();
        assert!(error.to_string().contains("link-local"), "{error}");
    }
}
