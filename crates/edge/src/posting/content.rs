//! What the posting instructions say, as a list of blocks (headings, paragraphs, code,
//! tables, lists) that `markdown` and `html` each write out, so the two formats cannot say
//! different things.

use serde_json::Value;

use super::{Instructions, SECRET_PLACEHOLDER};
use crate::config::container::ContainerKind;
use crate::config::source::{DedupeAction, DedupeScope};

/// A piece of running text: plain, or code (a name, a value, a header).
pub(crate) enum Inline {
    Text(String),
    Code(String),
}

pub(crate) enum Block {
    /// Level 1 to 3.
    Heading(u8, String),
    Paragraph(Vec<Inline>),
    /// A code block and its language (`sh`, `json`).
    Code(&'static str, String),
    /// Header cells, then rows; each cell is running text.
    Table(Vec<&'static str>, Vec<Vec<Vec<Inline>>>),
    List(Vec<Vec<Inline>>),
}

fn t(text: impl Into<String>) -> Inline {
    Inline::Text(text.into())
}

fn c(text: impl Into<String>) -> Inline {
    Inline::Code(text.into())
}

fn json_block(value: &Value) -> Block {
    Block::Code(
        "json",
        serde_json::to_string_pretty(value).expect("a Value serialises"),
    )
}

/// The whole document.
pub(crate) fn blocks(doc: &Instructions) -> Vec<Block> {
    let source = &doc.source;
    let container = match source.container_kind {
        ContainerKind::Channel => "channel",
        ContainerKind::Table => "lead table",
    };
    let mut out = vec![
        Block::Heading(1, format!("Posting instructions: {}", source.name)),
        Block::Paragraph(vec![
            t("Source "),
            c(source.id.as_str()),
            t(format!(" of {container} ")),
            c(&source.container_id),
            t(", workspace "),
            c(&source.workspace_id),
            t(". Every request body is JSON; every answer is JSON."),
        ]),
        Block::Heading(2, "Endpoint".into()),
        Block::Paragraph(vec![
            c(format!("POST {}", doc.endpoint)),
            t(" with "),
            c("Content-Type: application/json"),
            t(". The body may be gzip-compressed ("),
            c("Content-Encoding: gzip"),
            t(")."),
        ]),
        Block::Heading(2, "Authentication".into()),
    ];
    if source.secret.is_set() {
        out.push(Block::Paragraph(vec![
            t(
                "Send the source's secret with every request, in either header (the same \
               value; ",
            ),
            c(SECRET_PLACEHOLDER),
            t(" stands for it here):"),
        ]));
        out.push(Block::List(vec![
            vec![c(format!("X-Service-Webhook-Secret: {SECRET_PLACEHOLDER}"))],
            vec![c(format!("Authorization: Bearer {SECRET_PLACEHOLDER}"))],
        ]));
        out.push(Block::Paragraph(vec![
            t("A missing or wrong secret is answered "),
            c("401 unauthorized"),
            t(". The operator gives you the secret; keep it out of pages and logs."),
        ]));
    } else {
        out.push(Block::Paragraph(vec![t(
            "This source takes leads without a secret. When the operator gives it one, send \
             it in either header, with the same value:",
        )]));
        out.push(Block::List(vec![
            vec![c(format!("X-Service-Webhook-Secret: {SECRET_PLACEHOLDER}"))],
            vec![c(format!("Authorization: Bearer {SECRET_PLACEHOLDER}"))],
        ]));
    }
    out.push(Block::Heading(2, "Example".into()));
    out.push(Block::Paragraph(vec![
        t("One complete request; with your secret in place of "),
        c(SECRET_PLACEHOLDER),
        t(" it is answered 201 (sent again, 200 with "),
        c("idempotent_replay"),
        t("):"),
    ]));
    out.push(Block::Code("sh", doc.curl()));
    out.push(Block::Paragraph(vec![t("The answer (ids differ):")]));
    out.push(json_block(&doc.example_answer));
    body_section(doc, &mut out);
    products_section(doc, &mut out);
    answers_section(doc, &mut out);
    out.extend([
        Block::Heading(2, "Idempotency and retries".into()),
        Block::List(vec![
            vec![
                t("Give every lead your own "),
                c("externalId"),
                t(". Sending it again to this source answers "),
                c("idempotent_replay"),
                t(
                    " with the first lead's id: a safe retry. Never resend a lead under a new \
                   id.",
                ),
            ],
            vec![
                t("Retry network errors, "),
                c("429"),
                t(" and "),
                c("503"),
                t(" with exponential backoff and jitter, waiting at least "),
                c("Retry-After"),
                t(" seconds, with the same body and the same "),
                c("externalId"),
                t("."),
            ],
            vec![
                t("Do not retry "),
                c("400"),
                t(", "),
                c("401"),
                t(", "),
                c("404"),
                t(", "),
                c("413"),
                t(" or "),
                c("415"),
                t(" until the body or the configuration is corrected."),
            ],
            vec![t(
                "Read the answer's body even on success: each lead's result is there.",
            )],
        ]),
        Block::Heading(2, "Limits".into()),
        Block::List(vec![
            vec![
                t(format!(
                    "A batch holds 1 to {} leads in ",
                    doc.limits.max_batch
                )),
                c("leads"),
                t("."),
            ],
            vec![t(format!(
                "A body is at most {} bytes ({} MiB), after decompression.",
                doc.limits.body_bytes,
                doc.limits.body_bytes / (1024 * 1024)
            ))],
            vec![
                c("externalId"),
                t(format!(
                    ": 1 to {} characters; ",
                    doc.limits.external_id_chars
                )),
                c("firstName"),
                t(" and "),
                c("lastName"),
                t(": at least 1 character."),
            ],
            vec![
                t("Requests per client address are rate-limited: past the limit, "),
                c("429 rate_limited"),
                t(" with "),
                c("Retry-After"),
                t("."),
            ],
        ]),
    ]);
    errors_section(doc, &mut out);
    ping_section(doc, &mut out);
    out
}

fn body_section(doc: &Instructions, out: &mut Vec<Block>) {
    out.push(Block::Heading(2, "Body".into()));
    if let Some((version, sample)) = &doc.mapping {
        out.push(Block::Paragraph(vec![t(format!(
            "This source takes your own JSON, as agreed with the operator (mapping version \
             {version}); the service turns it into leads. A body of this shape, for example:"
        ))]));
        out.push(json_block(sample));
        out.push(Block::Paragraph(vec![
            t("A body that does not fit the mapping is answered "),
            c("400 mapping_error"),
            t(" with a JSON pointer into your body for each problem."),
        ]));
        return;
    }
    let mut shapes = vec![
        vec![t("one lead: a Lead object (the example above);")],
        vec![
            t("a batch: "),
            c("{\"leads\": [Lead, …]}"),
            t(format!(
                ", 1 to {} leads, each with its own result;",
                doc.limits.max_batch
            )),
        ],
    ];
    if doc.source.container_kind == ContainerKind::Channel {
        shapes.push(vec![
            t("a person wrapper: "),
            c("{\"person\": Lead, \"interests\": [Interest, …]}"),
            t(" (also "),
            c("externalId"),
            t(", "),
            c("request"),
            t(", "),
            c("requests"),
            t(", "),
            c("triggerAutoDelivery"),
            t(")."),
        ]);
    }
    out.push(Block::Paragraph(vec![t("Exactly one of these shapes:")]));
    out.push(Block::List(shapes));
    out.push(Block::Paragraph(vec![t("A batch:")]));
    out.push(json_block(&doc.batch_example));
    let mut rows: Vec<Vec<Vec<Inline>>> = crate::fields::FIELD_NAMES
        .iter()
        .map(|name| {
            let required = matches!(*name, "firstName" | "lastName");
            let note = match *name {
                "externalId" => "your id of the lead (idempotency)",
                "firstName" | "lastName" => "required",
                "email" | "phone" => "at least one makes a valid contact",
                _ => "",
            };
            vec![
                vec![c(*name)],
                vec![t(if required { "yes" } else { "no" })],
                vec![t(note)],
            ]
        })
        .collect();
    for (name, note) in [
        (
            "productSlug",
            "the product's slug (or productId): the lead's interest",
        ),
        ("fieldValues", "the product's fields, name to text"),
        ("routingReady", "true or false"),
        (
            "triggerAutoDelivery",
            "true asks the service to sell the lead at once",
        ),
        (
            "request, requests",
            "interests as objects of the four fields above",
        ),
        ("capture", "capture fields grouped, with free-form metadata"),
    ] {
        rows.push(vec![vec![c(name)], vec![t("no")], vec![t(note)]]);
    }
    out.push(Block::Paragraph(vec![t(
        "A Lead's fields (all text unless noted; other properties are kept):",
    )]));
    out.push(Block::Table(vec!["field", "required", "notes"], rows));
}

fn products_section(doc: &Instructions, out: &mut Vec<Block>) {
    out.push(Block::Heading(2, "Products".into()));
    if doc.products.is_empty() {
        out.push(Block::Paragraph(vec![t(
            "The workspace has no products yet: send leads without an interest.",
        )]));
        return;
    }
    out.push(Block::Paragraph(vec![
        t("A lead's interest names one of these by "),
        c("productSlug"),
        t(" (or "),
        c("productId"),
        t(") and answers its fields in "),
        c("fieldValues"),
        t(". A required field must be given; a field with allowed values takes only those."),
    ]));
    for product in &doc.products {
        out.push(Block::Heading(3, product.name.clone()));
        out.push(Block::Paragraph(vec![
            t("slug "),
            c(&product.slug),
            t(", id "),
            c(&product.id),
        ]));
        if product.fields.is_empty() {
            out.push(Block::Paragraph(vec![t("No fields.")]));
            continue;
        }
        let rows = product
            .fields
            .iter()
            .map(|field| {
                let allowed = match &field.allowed_values {
                    Some(values) => values
                        .iter()
                        .enumerate()
                        .flat_map(|(index, value)| {
                            let separator = (index > 0).then(|| t(", "));
                            separator.into_iter().chain([c(value)])
                        })
                        .collect(),
                    None => vec![t("any text")],
                };
                vec![
                    vec![c(&field.name)],
                    vec![t(if field.required { "yes" } else { "no" })],
                    allowed,
                ]
            })
            .collect();
        out.push(Block::Table(
            vec!["field", "required", "allowed values"],
            rows,
        ));
    }
}

fn answers_section(doc: &Instructions, out: &mut Vec<Block>) {
    let dedupe = &doc.source.dedupe;
    let duplicates = if dedupe.fields.is_empty() {
        vec![t("This source has no duplicate rule.")]
    } else {
        let scope = match dedupe.scope {
            DedupeScope::Container => "this source's channel or lead table",
            DedupeScope::Workspace => "the whole workspace",
        };
        let window = match dedupe.window_days {
            0 => "ever".to_string(),
            days => format!("in the last {days} days"),
        };
        let action = match dedupe.action {
            DedupeAction::Review => "stored and held for the operator's review",
            DedupeAction::Reject => "not stored (answered 200)",
        };
        vec![t(format!(
            "A lead whose {} matches a lead of {scope} sent {window} is a duplicate: {action}.",
            dedupe.fields.join(" or ")
        ))]
    };
    out.extend([
        Block::Heading(2, "Answers".into()),
        Block::List(vec![
            vec![
                c("201"),
                t(": a single lead was stored; the body is "),
                c("{\"item\": {…}}"),
                t("."),
            ],
            vec![
                c("200"),
                t(": nothing new was stored: an "),
                c("idempotent_replay"),
                t(" or a rejected duplicate, same shape."),
            ],
            vec![
                t("A batch: "),
                c("{\"summary\": {\"received\", \"accepted\", \"duplicate\", \"idempotentReplay\", \"rejected\"}, \"items\": [{\"index\", \"status\", …}]}"),
                t(", 201 when at least one lead was stored, else 200. A bad item is "),
                c("rejected"),
                t(" with its "),
                c("errors"),
                t("; the others are stored."),
            ],
            vec![
                t("Each item's "),
                c("status"),
                t(": "),
                c("accepted"),
                t(", "),
                c("duplicate"),
                t(", "),
                c("idempotent_replay"),
                t(" or "),
                c("rejected"),
                t("; "),
                c("ingest.qualityStatus"),
                t(": "),
                c("ok"),
                t(", "),
                c("suspect"),
                t(" or "),
                c("invalid"),
                t(", with "),
                c("qualityReasons"),
                t("."),
            ],
            duplicates,
        ]),
    ]);
}

fn errors_section(doc: &Instructions, out: &mut Vec<Block>) {
    out.push(Block::Heading(2, "Errors".into()));
    out.push(Block::Paragraph(vec![
        t("An error is answered "),
        c("{\"error\": {\"code\", \"message\", \"details\"?}}"),
        t(". Every code, with an example:"),
    ]));
    let rows = doc
        .errors
        .iter()
        .map(|error| {
            vec![
                vec![t(error.status.to_string())],
                vec![c(&error.code)],
                vec![t(error.when)],
                vec![c(error.example.to_string())],
            ]
        })
        .collect();
    out.push(Block::Table(
        vec!["status", "code", "when", "example"],
        rows,
    ));
}

fn ping_section(doc: &Instructions, out: &mut Vec<Block>) {
    out.push(Block::Heading(2, "Pings".into()));
    let Some(ping) = &doc.ping else {
        out.push(Block::Paragraph(vec![t(
            "This source's lead table takes no pings: send whole leads.",
        )]));
        return;
    };
    out.extend([
        Block::Paragraph(vec![
            t(
                "To learn whether and for how much a lead sells before its personal data \
               leaves you, ping first: ",
            ),
            c(format!("POST {}", ping.url)),
            t(
                ", with the same secret, the lead without names, email, phone, street or \
               house number (give ",
            ),
            c("emailSha256"),
            t(" or "),
            c("phoneSha256"),
            t(
                ", the hex SHA-256 of the email trimmed and lower-cased or of the phone's \
               digits):",
            ),
        ]),
        json_block(&ping.example),
        Block::Paragraph(vec![
            t("The answer: "),
            c("{\"pingId\", \"status\": \"accepted\", \"payout\", \"expiresAt\"}"),
            t(" or "),
            c("{\"pingId\", \"status\": \"rejected\", \"reason\"}"),
            t(format!(
                ". An accepted ping is reserved for {} seconds: post the whole lead to the \
                 endpoint above with ",
                ping.ttl_secs
            )),
            c("\"pingId\""),
            t(" in the Lead, and it is sold as promised."),
        ]),
    ]);
}
