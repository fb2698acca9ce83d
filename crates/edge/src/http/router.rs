//! The route table and dispatch: a path is matched against [`ROUTES`]; an unknown path is
//! 404, a known path with the wrong method 405 with `Allow`, and a match goes to its
//! handler in [`super::handlers`]. HEAD is answered wherever GET is (RFC 9110 section
//! 9.3.2), by the GET handler: hyper sends the headers, with the length of the body it
//! leaves out. Any error a handler ends with becomes its response in
//! [`error_to_http_response`], in the error form of the endpoint.

use hyper::Method;

use super::error::{Form, HttpError, error_to_http_response};
use super::{AppState, Request, Response, handlers};

/// What a route leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Health,
    ChannelIngest,
    TableIngest,
    Ping,
    PartnerConfirmation,
    PartnerPayoutPending,
    PartnerPayout,
    PartnerCancellation,
    SupplierCancellationConfirmation,
    Metrics,
    OpenApi,
}

impl Endpoint {
    /// The endpoint's label in metrics: stable, lower-case, one word.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Health => "health",
            Endpoint::ChannelIngest => "channel_ingest",
            Endpoint::TableIngest => "table_ingest",
            Endpoint::Ping => "ping",
            Endpoint::PartnerConfirmation => "partner_confirmation",
            Endpoint::PartnerPayoutPending => "partner_payout_pending",
            Endpoint::PartnerPayout => "partner_payout",
            Endpoint::PartnerCancellation => "partner_cancellation",
            Endpoint::SupplierCancellationConfirmation => "supplier_cancellation_confirmation",
            Endpoint::Metrics => "metrics",
            Endpoint::OpenApi => "openapi",
        }
    }

    /// The body form of the endpoint's errors: the lifecycle endpoints answer every error
    /// in the partner form (SPEC.md section 7), even one found before their own checks.
    fn error_form(self) -> Form {
        match self {
            Endpoint::PartnerConfirmation
            | Endpoint::PartnerPayoutPending
            | Endpoint::PartnerPayout
            | Endpoint::PartnerCancellation
            | Endpoint::SupplierCancellationConfirmation => Form::Partner,
            Endpoint::Health
            | Endpoint::ChannelIngest
            | Endpoint::TableIngest
            | Endpoint::Ping
            | Endpoint::Metrics
            | Endpoint::OpenApi => Form::Plain,
        }
    }
}

pub struct Route {
    pub method: Method,
    /// The path with `{name}` for each parameter, as SPEC.md writes it.
    pub pattern: &'static str,
    pub endpoint: Endpoint,
}

/// Every route the server knows. The OpenAPI document is checked against this list.
pub const ROUTES: &[Route] = &[
    Route {
        method: Method::GET,
        pattern: "/api/health",
        endpoint: Endpoint::Health,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/channels/{channelId}/sources/{sourceId}/leads",
        endpoint: Endpoint::ChannelIngest,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/lead-tables/{tableId}/sources/{sourceId}/leads",
        endpoint: Endpoint::TableIngest,
    },
    Route {
        method: Method::POST,
        pattern: "/api/ping/channels/{channelId}/sources/{sourceId}",
        endpoint: Endpoint::Ping,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/partner-confirmation",
        endpoint: Endpoint::PartnerConfirmation,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/partner-payout-pending",
        endpoint: Endpoint::PartnerPayoutPending,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/partner-payout",
        endpoint: Endpoint::PartnerPayout,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/partner-cancellation",
        endpoint: Endpoint::PartnerCancellation,
    },
    Route {
        method: Method::POST,
        pattern: "/api/webhooks/supplier-cancellation-confirmation",
        endpoint: Endpoint::SupplierCancellationConfirmation,
    },
    Route {
        method: Method::GET,
        pattern: "/metrics",
        endpoint: Endpoint::Metrics,
    },
    Route {
        method: Method::GET,
        pattern: "/api/openapi.json",
        endpoint: Endpoint::OpenApi,
    },
];

/// The path parameters of a matched route, in pattern order.
pub type Params = Vec<String>;

/// Matches `path` against `pattern`; the parameters on success. Segments are compared as
/// sent: ids never contain characters that need percent-encoding (`ids::is_valid`), so an
/// encoded segment simply names nothing.
fn match_pattern(pattern: &str, path: &str) -> Option<Params> {
    let mut params = Vec::new();
    let mut pattern_segments = pattern.split('/');
    let mut path_segments = path.split('/');
    loop {
        match (pattern_segments.next(), path_segments.next()) {
            (None, None) => return Some(params),
            (Some(p), Some(s)) if p.starts_with('{') => {
                if s.is_empty() {
                    return None;
                }
                params.push(s.to_string());
            }
            (Some(p), Some(s)) if p == s => {}
            _ => return None,
        }
    }
}

/// Finds the route for `method` and `path`: the endpoint and its parameters, or the
/// error for an unknown path (404) or a wrong method (405 with `Allow`). A HEAD request
/// takes the GET route of its path.
pub(crate) fn resolve(method: &Method, path: &str) -> Result<(Endpoint, Params), HttpError> {
    let mut allowed: Vec<&str> = Vec::new();
    for route in ROUTES {
        if let Some(params) = match_pattern(route.pattern, path) {
            let head_of_get = *method == Method::HEAD && route.method == Method::GET;
            if route.method == *method || head_of_get {
                return Ok((route.endpoint, params));
            }
            allowed.push(route.method.as_str());
            if route.method == Method::GET {
                allowed.push(Method::HEAD.as_str());
            }
        }
    }
    if allowed.is_empty() {
        return Err(HttpError::NoSuchPath {
            path: path.to_string(),
        });
    }
    Err(HttpError::MethodNotAllowed {
        method: method.clone(),
        path: path.to_string(),
        allow: allowed.join(", "),
    })
}

/// Routes one request to its handler (`route` is what [`resolve`] found for it) and turns
/// any error into its response.
pub(crate) async fn dispatch(
    state: &AppState,
    request: Request,
    route: Result<(Endpoint, Params), HttpError>,
) -> Response {
    let (endpoint, params) = match route {
        Ok(found) => found,
        Err(e) => {
            super::body::discard(request.into_body(), state.config.body_limit).await;
            return error_to_http_response(e.into(), Form::Plain);
        }
    };
    let result = match endpoint {
        Endpoint::Health => handlers::health::get(state).await,
        Endpoint::ChannelIngest => handlers::ingest::channel(state, request, params).await,
        Endpoint::TableIngest => handlers::ingest::table(state, request, params).await,
        Endpoint::Ping => handlers::ping::post(state, request, params).await,
        Endpoint::Metrics => handlers::metrics::get(state, request.uri().path()).await,
        Endpoint::OpenApi => Ok(handlers::openapi::get()),
        Endpoint::PartnerConfirmation => handlers::lifecycle::confirmation(state, request).await,
        Endpoint::PartnerPayoutPending => handlers::lifecycle::payout_pending(state, request).await,
        Endpoint::PartnerPayout => handlers::lifecycle::payout(state, request).await,
        Endpoint::PartnerCancellation => handlers::lifecycle::cancellation(state, request).await,
        Endpoint::SupplierCancellationConfirmation => {
            handlers::lifecycle::supplier_answer(state, request).await
        }
    };
    result.unwrap_or_else(|e| error_to_http_response(e, endpoint.error_form()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_parameters_and_literals() {
        let (endpoint, params) = resolve(
            &Method::POST,
            "/api/webhooks/channels/ch1/sources/src1/leads",
        )
        .unwrap();
        assert_eq!(endpoint, Endpoint::ChannelIngest);
        assert_eq!(params, vec!["ch1", "src1"]);
        assert_eq!(
            resolve(&Method::GET, "/api/health").unwrap().0,
            Endpoint::Health
        );
    }

    #[test]
    fn unknown_paths_and_wrong_methods() {
        for path in [
            "/",
            "/api",
            "/api/health/",
            "/api/webhooks/channels//sources/s/leads",
            "/api/webhooks/channels/c/sources/s/leads/x",
        ] {
            let e = resolve(&Method::POST, path).unwrap_err();
            assert!(matches!(e, HttpError::NoSuchPath { .. }), "{path}");
        }
        let e = resolve(&Method::DELETE, "/api/health").unwrap_err();
        assert!(
            matches!(&e, HttpError::MethodNotAllowed { allow, .. } if allow == "GET, HEAD"),
            "{e:?}"
        );
        let e = resolve(&Method::HEAD, "/api/webhooks/partner-payout").unwrap_err();
        assert!(
            matches!(&e, HttpError::MethodNotAllowed { allow, .. } if allow == "POST"),
            "{e:?}"
        );
    }

    #[test]
    fn head_takes_the_get_route() {
        for route in ROUTES.iter().filter(|route| route.method == Method::GET) {
            let (endpoint, _) = resolve(&Method::HEAD, route.pattern).unwrap();
            assert_eq!(endpoint, route.endpoint);
        }
    }
}
