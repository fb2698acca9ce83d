//! The posting instructions as Markdown: plain text that reads well as it is.

use super::Instructions;
use super::content::{Block, Inline, blocks};

pub(super) fn write(doc: &Instructions) -> String {
    let mut out = String::new();
    for block in blocks(doc) {
        match block {
            Block::Heading(level, text) => {
                out.push_str(&"#".repeat(usize::from(level)));
                out.push(' ');
                out.push_str(&text);
                out.push('\n');
            }
            Block::Paragraph(inlines) => {
                out.push_str(&line(&inlines));
                out.push('\n');
            }
            Block::Code(language, code) => {
                out.push_str(&format!("```{language}\n{code}\n```\n"));
            }
            Block::Table(headers, rows) => {
                out.push_str(&format!("| {} |\n", headers.join(" | ")));
                out.push_str(&format!("|{}\n", "---|".repeat(headers.len())));
                for row in rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|cell| line(cell).replace('|', "\\|"))
                        .collect();
                    out.push_str(&format!("| {} |\n", cells.join(" | ")));
                }
            }
            Block::List(items) => {
                for item in items {
                    out.push_str(&format!("- {}\n", line(&item)));
                }
            }
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// Running text on one line; code in backticks (more of them when the code has some).
fn line(inlines: &[Inline]) -> String {
    let mut text = String::new();
    for inline in inlines {
        match inline {
            Inline::Text(plain) => text.push_str(plain),
            Inline::Code(code) => {
                let fence = if code.contains('`') { "``" } else { "`" };
                let pad = if code.contains('`') { " " } else { "" };
                text.push_str(&format!("{fence}{pad}{code}{pad}{fence}"));
            }
        }
    }
    text
}
