//! Quality of a lead (DESIGN.md section 2): `invalid` when it has no usable contact,
//! `suspect` when a soft check fails, `ok` otherwise, with a reason code per failed check.
//!
//! Owns the checks and their reason codes. It is a pure function of the lead: no database,
//! no configuration. What quality means for delivery is auto-delivery's business.

use super::model::LeadFields;
use super::normalize::{is_valid_email, phone_digits};
use crate::db::stored::stored_enum;

stored_enum! {
    /// `ok`, `suspect` (a soft check failed) or `invalid` (no usable contact).
    pub enum QualityStatus as "quality status" {
        Ok = "ok",
        Suspect = "suspect",
        Invalid = "invalid",
    }
}

/// Neither a valid email nor a valid phone: the lead cannot be contacted.
pub const NO_VALID_CONTACT: &str = "no_valid_contact";
/// An email was given but is not a plausible address.
pub const EMAIL_INVALID: &str = "email_invalid";
/// A phone was given but is not a plausible number.
pub const PHONE_INVALID: &str = "phone_invalid";
pub const DISPOSABLE_EMAIL: &str = "disposable_email";
pub const PLACEHOLDER_NAME: &str = "placeholder_name";
pub const POSTAL_CODE_IMPLAUSIBLE: &str = "postal_code_implausible";
pub const CONSENT_NOT_GRANTED: &str = "consent_not_granted";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quality {
    pub status: QualityStatus,
    /// The rules' reasons, and `check_failed:NAME` / `check_error:NAME` of flagging
    /// check steps (DESIGN.md section 22).
    pub reasons: Vec<std::borrow::Cow<'static, str>>,
}

/// Domains of throw-away mailbox services. Deliberately short: the common ones that lead
/// forms see; a lead from any of them is suspect, not invalid.
const DISPOSABLE_DOMAINS: &[&str] = &[
    "10minutemail.com",
    "discard.email",
    "dispostable.com",
    "emailondeck.com",
    "fakeinbox.com",
    "getnada.com",
    "guerrillamail.com",
    "guerrillamail.net",
    "mailinator.com",
    "maildrop.cc",
    "mailnesia.com",
    "mintemail.com",
    "mohmal.com",
    "sharklasers.com",
    "spamgourmet.com",
    "temp-mail.org",
    "tempmail.com",
    "throwawaymail.com",
    "trashmail.com",
    "trashmail.de",
    "wegwerfmail.de",
    "yopmail.com",
];

/// Names that forms get when someone types anything to get past them.
const PLACEHOLDER_NAMES: &[&str] = &[
    "test",
    "testing",
    "tester",
    "asdf",
    "asd",
    "qwerty",
    "xxx",
    "foo",
    "foobar",
    "dummy",
    "sample",
    "example",
    "none",
    "null",
    "n/a",
    "unknown",
    "abc",
    "lorem",
    "ipsum",
    "mustermann",
];

/// Consent status values that mean consent was given (compared case-insensitively).
pub const CONSENT_GRANTED: &[&str] = &[
    "granted",
    "given",
    "yes",
    "y",
    "true",
    "1",
    "opt-in",
    "optin",
    "opt_in",
    "opted-in",
    "opted_in",
    "double-opt-in",
    "double_opt_in",
    "doi",
    "accepted",
    "agreed",
    "consented",
];

pub fn assess(lead: &LeadFields) -> Quality {
    let mut reasons = Vec::new();
    let email = lead
        .person
        .email
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty());
    let phone = lead
        .person
        .phone
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty());
    let email_valid = email.is_some_and(is_valid_email);
    let phone_valid = phone.is_some_and(|p| phone_digits(p).is_some());
    if !email_valid && !phone_valid {
        reasons.push(NO_VALID_CONTACT.into());
    }
    if email.is_some() && !email_valid {
        reasons.push(EMAIL_INVALID.into());
    }
    if phone.is_some() && !phone_valid {
        reasons.push(PHONE_INVALID.into());
    }
    if let Some(email) = email.filter(|_| email_valid)
        && is_disposable(email)
    {
        reasons.push(DISPOSABLE_EMAIL.into());
    }
    if is_placeholder(&lead.person.first_name) || is_placeholder(&lead.person.last_name) {
        reasons.push(PLACEHOLDER_NAME.into());
    }
    if let (Some(code), Some(country)) = (&lead.person.postal_code, &lead.person.country)
        && postal_code_plausible(code, country) == Some(false)
    {
        reasons.push(POSTAL_CODE_IMPLAUSIBLE.into());
    }
    if let Some(status) = &lead.consent.status
        && !CONSENT_GRANTED
            .iter()
            .any(|granted| status.trim().eq_ignore_ascii_case(granted))
    {
        reasons.push(CONSENT_NOT_GRANTED.into());
    }
    let status = if reasons.iter().any(|r| r == NO_VALID_CONTACT) {
        QualityStatus::Invalid
    } else if reasons.is_empty() {
        QualityStatus::Ok
    } else {
        QualityStatus::Suspect
    };
    Quality { status, reasons }
}

fn is_disposable(email: &str) -> bool {
    let Some((_, domain)) = email.rsplit_once('@') else {
        return false;
    };
    let domain = domain.to_ascii_lowercase();
    DISPOSABLE_DOMAINS.iter().any(|d| {
        domain == *d
            || domain
                .strip_suffix(d)
                .is_some_and(|prefix| prefix.ends_with('.'))
    })
}

/// A placeholder: a listed word, no letter at all, or one letter repeated (`aaa`, `xxxx`).
fn is_placeholder(name: &str) -> bool {
    let name = name.trim().to_lowercase();
    if PLACEHOLDER_NAMES.contains(&name.as_str()) || !name.chars().any(char::is_alphabetic) {
        return true;
    }
    let mut chars = name.chars();
    let first = chars.next();
    name.chars().count() >= 3 && chars.all(|c| Some(c) == first)
}

/// The postal code formats this module knows.
#[derive(Clone, Copy)]
enum PostalFormat {
    Digits(usize),
    Netherlands,
    UnitedStates,
    Poland,
    UnitedKingdom,
}

/// The postal code format of `country`, given as ISO code or English or native name.
fn postal_format(country: &str) -> Option<PostalFormat> {
    let format = match country.trim().to_lowercase().as_str() {
        "de" | "deu" | "germany" | "deutschland" | "fr" | "fra" | "france" | "it" | "ita"
        | "italy" | "italia" | "es" | "esp" | "spain" | "españa" => PostalFormat::Digits(5),
        "at" | "aut" | "austria" | "österreich" | "ch" | "che" | "switzerland" | "schweiz"
        | "suisse" | "be" | "bel" | "belgium" | "belgië" | "belgique" | "dk" | "dnk"
        | "denmark" | "danmark" => PostalFormat::Digits(4),
        "nl" | "nld" | "netherlands" | "the netherlands" | "nederland" => PostalFormat::Netherlands,
        "us" | "usa" | "united states" | "united states of america" => PostalFormat::UnitedStates,
        "pl" | "pol" | "poland" | "polska" => PostalFormat::Poland,
        "gb" | "gbr" | "uk" | "united kingdom" | "great britain" | "england" | "scotland"
        | "wales" | "northern ireland" => PostalFormat::UnitedKingdom,
        _ => return None,
    };
    Some(format)
}

/// Whether `code` fits the postal code format of `country`; `None` for a country whose
/// format is not known here, which passes.
fn postal_code_plausible(code: &str, country: &str) -> Option<bool> {
    let format = postal_format(country)?;
    let code = code.trim().to_ascii_uppercase();
    // Every known format is ASCII, and checking that first keeps the slicing below on
    // character boundaries.
    if !code.is_ascii() {
        return Some(false);
    }
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let plausible = match format {
        PostalFormat::Digits(n) => code.len() == n && digits(&code),
        PostalFormat::Netherlands => {
            let compact: String = code.chars().filter(|c| *c != ' ').collect();
            compact.len() == 6
                && digits(&compact[..4])
                && !compact.starts_with('0')
                && compact[4..].bytes().all(|b| b.is_ascii_uppercase())
        }
        PostalFormat::UnitedStates => {
            (code.len() == 5 && digits(&code))
                || (code.len() == 10
                    && digits(&code[..5])
                    && &code[5..6] == "-"
                    && digits(&code[6..]))
        }
        PostalFormat::Poland => {
            code.len() == 6 && digits(&code[..2]) && &code[2..3] == "-" && digits(&code[3..])
        }
        PostalFormat::UnitedKingdom => uk_postcode(&code),
    };
    Some(plausible)
}

/// A UK postcode: an outward code (`A9`, `A99`, `AA9`, `AA99`, `A9A`, `AA9A`), an optional
/// space, and an inward code (`9AA`).
fn uk_postcode(code: &str) -> bool {
    let compact: Vec<u8> = code.bytes().filter(|b| *b != b' ').collect();
    if !(5..=7).contains(&compact.len()) {
        return false;
    }
    let (outward, inward) = compact.split_at(compact.len() - 3);
    let inward_ok = inward[0].is_ascii_digit()
        && inward[1].is_ascii_uppercase()
        && inward[2].is_ascii_uppercase();
    let shape: String = outward
        .iter()
        .map(|b| {
            if b.is_ascii_digit() {
                '9'
            } else if b.is_ascii_uppercase() {
                'A'
            } else {
                '?'
            }
        })
        .collect();
    inward_ok
        && matches!(
            shape.as_str(),
            "A9" | "A99" | "AA9" | "AA99" | "A9A" | "AA9A"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(first: &str, email: Option<&str>, phone: Option<&str>) -> LeadFields {
        let mut lead = LeadFields::default();
        lead.person.first_name = first.into();
        lead.person.last_name = "Doe".into();
        lead.person.email = email.map(str::to_string);
        lead.person.phone = phone.map(str::to_string);
        lead
    }

    #[test]
    fn contact_decides_invalid() {
        let q = assess(&lead("Jane", Some("jane@example.com"), None));
        assert_eq!(
            q,
            Quality {
                status: QualityStatus::Ok,
                reasons: vec![]
            }
        );
        let q = assess(&lead("Jane", None, Some("+49 30 1234567")));
        assert_eq!(q.status, QualityStatus::Ok);
        let q = assess(&lead("Jane", Some("nope"), Some("12")));
        assert_eq!(q.status, QualityStatus::Invalid);
        assert_eq!(
            q.reasons,
            vec![NO_VALID_CONTACT, EMAIL_INVALID, PHONE_INVALID]
        );
        let q = assess(&lead("Jane", None, None));
        assert_eq!(q.reasons, vec![NO_VALID_CONTACT]);
        let q = assess(&lead("Jane", Some("nope"), Some("030 1234567")));
        assert_eq!(q.status, QualityStatus::Suspect);
        assert_eq!(q.reasons, vec![EMAIL_INVALID]);
    }

    #[test]
    fn soft_checks_make_suspect() {
        let q = assess(&lead("Jane", Some("jane@sub.mailinator.com"), None));
        assert_eq!(q.reasons, vec![DISPOSABLE_EMAIL]);
        assert_eq!(q.status, QualityStatus::Suspect);
        assert!(!is_disposable("jane@notmailinator.com"));
        for name in ["Test", "asdf", "XXXX", "123", " n/a "] {
            assert!(is_placeholder(name), "{name}");
        }
        for name in ["Jane", "Li", "O'Brien", "Anne-Marie", "Ng"] {
            assert!(!is_placeholder(name), "{name}");
        }
        let mut l = lead("Jane", Some("jane@example.com"), None);
        l.consent.status = Some("Opt-In".into());
        assert_eq!(assess(&l).status, QualityStatus::Ok);
        l.consent.status = Some("denied".into());
        assert_eq!(assess(&l).reasons, vec![CONSENT_NOT_GRANTED]);
    }

    #[test]
    fn postal_codes() {
        let cases = [
            ("10115", "DE", Some(true)),
            ("1011", "Germany", Some(false)),
            ("1010", "AT", Some(true)),
            ("8001", "ch", Some(true)),
            ("1012 AB", "NL", Some(true)),
            ("1012AB", "NL", Some(true)),
            ("0123 AB", "NL", Some(false)),
            ("1012", "NL", Some(false)),
            ("90210", "US", Some(true)),
            ("90210-1234", "USA", Some(true)),
            ("9021", "US", Some(false)),
            ("SW1A 1AA", "GB", Some(true)),
            ("M1 1AE", "UK", Some(true)),
            ("EC1A1BB", "gb", Some(true)),
            ("12345", "GB", Some(false)),
            ("00-950", "PL", Some(true)),
            ("anything", "Narnia", None),
            ("1011ü", "DE", Some(false)),
            ("1234ÄB", "NL", Some(false)),
        ];
        for (code, country, expected) in cases {
            assert_eq!(
                postal_code_plausible(code, country),
                expected,
                "{code} {country}"
            );
        }
    }
}
