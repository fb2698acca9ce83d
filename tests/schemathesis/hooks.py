"""schemathesis hooks for `openapi::schemathesis_finds_nothing`.

schemathesis's `positive_data_acceptance` fails every schema-valid request the service
refuses. Some refusals are rules of the data behind the request, which no JSON Schema can
state: a product slug or id must name a product of the source's workspace, a pingId an
accepted ping of the source, a supplier's leadId one of its leads, `externalId` and `partnerExternalId` (aliases) must not
differ, and one product may not appear in two interests with different answers. The
check below is that check with exactly those refusals allowed, told apart by the error
codes the document lists; every other refusal of a schema-valid request (a type, a
length, a character, a header the document allows) still fails the run.
"""

import json

import schemathesis

# Error codes of rules about the stored data or about two fields at once.
DATA_RULES = {
    "unknown_product",
    "duplicate_product",
    "conflict",
    "ping_unknown",
    "ping_used",
    "ping_expired",
    "ping_mismatch",
    "lead_not_found",
}

# What positive_data_acceptance accepts besides 2xx and 3xx: credentials and resources
# the generated request cannot know, ambiguity, rate limits and server errors (those are
# `not_a_server_error`'s to report).
ACCEPTED = {401, 403, 404, 409, 429}


def _codes(response):
    try:
        body = json.loads(response.content)
    except ValueError:
        return set()
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return set()
    details = error.get("details")
    if isinstance(details, list) and details:
        return {d.get("code") for d in details if isinstance(d, dict)}
    return {error.get("code")}


@schemathesis.check
def positive_data_acceptance_but_data_rules(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    status = response.status_code
    if status < 400 or status >= 500 or status in ACCEPTED:
        return None
    codes = _codes(response)
    if status == 400 and codes and codes <= DATA_RULES:
        return None
    raise AssertionError(
        f"a schema-valid request was refused with {status}: {response.content[:500]!r}"
    )
