//! The posting instructions as HTML, written with maud: every configured string (names,
//! allowed values, the examples) is escaped, none is trusted as markup.

use maud::{DOCTYPE, Markup, html};

use super::Instructions;
use super::content::{Block, Inline, blocks};

/// A whole page, without style or script, so it passes any content security policy.
pub(super) fn page(doc: &Instructions) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Posting instructions: " (doc.source.name) }
            }
            body { (body(doc)) }
        }
    }
}

/// The document without the page around it.
pub(super) fn body(doc: &Instructions) -> Markup {
    html! {
        article class="posting-instructions" {
            @for block in blocks(doc) {
                @match block {
                    Block::Heading(1, text) => h1 { (text) },
                    Block::Heading(2, text) => h2 { (text) },
                    Block::Heading(_, text) => h3 { (text) },
                    Block::Paragraph(inlines) => p { (line(&inlines)) },
                    Block::Code(language, code) => {
                        pre { code class=(format!("language-{language}")) { (code) } }
                    }
                    Block::Table(headers, rows) => table {
                        thead { tr { @for header in headers { th { (header) } } } }
                        tbody {
                            @for row in rows {
                                tr { @for cell in row { td { (line(&cell)) } } }
                            }
                        }
                    },
                    Block::List(items) => ul {
                        @for item in items { li { (line(&item)) } }
                    },
                }
            }
        }
    }
}

fn line(inlines: &[Inline]) -> Markup {
    html! {
        @for inline in inlines {
            @match inline {
                Inline::Text(text) => (text),
                Inline::Code(code) => code { (code) },
            }
        }
    }
}
