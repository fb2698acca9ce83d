//! Subscription filters applied to a lead and its interest.
//!
//! A filter names a lead field by its interface name (`country`, `postalCode`), an
//! additional property of the lead, an answer as `fieldValues.NAME`, or a value a check step
//! kept as `check.NAME.KEY` (DESIGN.md section 22). Values compare
//! trimmed and without regard to case (`DE` equals `de`); a field that is absent or blank
//! matches no filter. Owns only matching; parsing is `config::buyer::Filter`.

use std::borrow::Cow;

use crate::checks::CheckRecord;
use crate::config::buyer::{Filter, FilterOp};
use crate::ingest::model::{Interest, LeadFields};

/// The index of the first filter of `filters` that the lead (with its check outcomes
/// `checks`) does not meet, if any.
pub(crate) fn first_mismatch(
    filters: &[Filter],
    lead: &LeadFields,
    checks: &[CheckRecord],
    interest: &Interest,
) -> Option<usize> {
    filters
        .iter()
        .position(|filter| !matches(filter, lead, checks, interest))
}

fn matches(
    filter: &Filter,
    lead: &LeadFields,
    checks: &[CheckRecord],
    interest: &Interest,
) -> bool {
    let kept = filter
        .field
        .strip_prefix("check.")
        .and_then(|rest| rest.split_once('.'));
    let actual = match (filter.field.strip_prefix("fieldValues."), kept) {
        (Some(answer), _) => interest.answer(answer).map(Cow::Borrowed),
        (None, Some((name, key))) => CheckRecord::kept_text(checks, name, key)
            .map(|v| Cow::<str>::Owned(v.trim().to_owned()))
            .filter(|v| !v.is_empty()),
        (None, None) => lead.text(&filter.field),
    };
    let Some(actual) = actual else {
        return false;
    };
    let mut wanted = filter.values.iter().map(|v| v.trim());
    match filter.op {
        FilterOp::Equals | FilterOp::OneOf => wanted.any(|v| equal_ignoring_case(&actual, v)),
        FilterOp::Prefix => wanted.any(|v| starts_ignoring_case(&actual, v)),
    }
}

/// `a` and `b` equal without regard to case, as their `to_lowercase` would compare. Every
/// auto-delivered lead checks each subscribed buyer's filters: ASCII text (nearly all of it)
/// compares in place, where lowercased copies were a twentieth of the writer's routing.
fn equal_ignoring_case(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        a.eq_ignore_ascii_case(b)
    } else {
        a.to_lowercase() == b.to_lowercase()
    }
}

/// Whether `text` starts with `prefix` without regard to case, as their `to_lowercase`
/// would compare.
fn starts_ignoring_case(text: &str, prefix: &str) -> bool {
    if text.is_ascii() && prefix.is_ascii() {
        text.len() >= prefix.len()
            && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
    } else {
        text.to_lowercase().starts_with(&prefix.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{interest, lead};
    use super::*;

    fn check(filter: &str, expected: bool) {
        let lead = lead(&[
            ("country", "DE"),
            ("postalCode", " 80331 "),
            ("city", "München"),
            ("utmSource", "google"),
            ("email", ""),
        ]);
        let interest = interest(&[("roof", "Tile"), ("size", "")]);
        let filter = Filter::parse(filter).expect("test filters parse");
        assert_eq!(
            matches(&filter, &lead.fields, &[], &interest),
            expected,
            "filter {filter:?}"
        );
    }

    #[test]
    fn matches_equals_one_of_and_prefix_on_lead_fields_and_answers() {
        let cases = [
            ("country=DE", true),
            ("country=de", true),
            ("country=AT", false),
            ("country=AT|DE|CH", true),
            ("country=AT|CH", false),
            ("postalCode=80*", true),
            ("postalCode=8033*", true),
            ("postalCode=10*", false),
            ("postalCode=80331", true),
            ("city=münchen", true),
            ("city=MÜNCHEN", true),
            ("city=Münch*", true),
            ("city=munchen", false),
            ("country=d", false),
            ("country=DEU", false),
            ("postalCode=803311*", false),
            ("fieldValues.roof=TILE", true),
            ("fieldValues.roof=tile", true),
            ("fieldValues.roof=flat|metal", false),
            ("fieldValues.roof=T*", true),
            ("utmSource=google", true),
            ("utmSource=bing", false),
        ];
        for (filter, expected) in cases {
            check(filter, expected);
        }
    }

    #[test]
    fn absent_or_blank_fields_match_nothing() {
        for filter in [
            "street=x",
            "email=*",
            "fieldValues.size=*",
            "fieldValues.missing=x",
            "nosuchfield=*",
        ] {
            check(filter, false);
        }
    }

    #[test]
    fn names_the_first_failing_filter() {
        let lead = lead(&[("country", "DE"), ("postalCode", "10115")]);
        let interest = interest(&[]);
        let filters: Vec<Filter> = ["country=DE", "postalCode=80*", "country=AT"]
            .iter()
            .map(|f| Filter::parse(f).unwrap())
            .collect();
        assert_eq!(
            first_mismatch(&filters, &lead.fields, &[], &interest),
            Some(1),
            "postalCode"
        );
        assert!(first_mismatch(&filters[..1], &lead.fields, &[], &interest).is_none());
    }
}
