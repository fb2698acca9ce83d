//! Money (DESIGN.md section 11): stored as integer minor units (cents); read from its
//! decimal text, never through a float; rounded half away from zero to cents; bounded; and
//! shown with two decimals as text, as the shortest exact decimal as a JSON number, never in
//! exponent form.
//!
//! Owns the amount syntax, the rounding, the bounds every amount and balance keep, and how
//! an amount is written. It does not own when money moves (the ledger and its callers).
//!
//! JSON amounts are read from the number's text as sent (the HTTP layer hands it over, taken
//! with serde_json's `RawValue`), and this module turns that text into cents.

use serde_json::Value;

/// The largest amount, in cents: 1,000,000,000.00. Every amount (a price, a fund, an
/// adjustment, a credit limit, a supplier cost) is within ±this.
pub(crate) const MAX_CENTS: i64 = 100_000_000_000;

/// The largest balance, in cents, in either direction: a fund or an adjustment that would
/// take a prepaid balance past it is refused. With credit limits bounded by [`MAX_CENTS`],
/// balance plus credit never leaves ±2·10¹¹ cents, far inside `i64`.
pub(crate) const MAX_BALANCE_CENTS: i64 = MAX_CENTS;

/// [`MAX_CENTS`] as people read it, for messages.
pub const BOUND_TEXT: &str = "1,000,000,000.00";

/// Why a text is not an acceptable amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("invalid amount '{0}': expected a number like 12, 12.5 or 12.50")]
    Invalid(String),
    #[error("amount '{0}' is out of range: amounts are bounded to ±{BOUND_TEXT}")]
    OutOfRange(String),
    #[error("amount '{0}' must not be negative")]
    Negative(String),
}

/// Whether a text may carry an exponent (`1.5e2`): JSON numbers may, amounts typed by
/// people on the command line may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Plain,
    Json,
}

/// Reads `text` (`12`, `12.5`, `-0.005`, and with [`Syntax::Json`] `1.25e2`) into cents,
/// exactly: the digits are kept as digits, the value rounded half away from zero to a cent
/// and checked against ±[`MAX_CENTS`] after rounding.
fn parse(text: &str, syntax: Syntax) -> Result<i64, AmountError> {
    let invalid = || AmountError::Invalid(text.to_string());
    let out_of_range = || AmountError::OutOfRange(text.to_string());
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(_) if syntax == Syntax::Plain => return Err(invalid()),
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !all_digits(whole)
        || !all_digits(fraction)
        || (mantissa.contains('.') && fraction.is_empty())
    {
        return Err(invalid());
    }
    // The value is `digits` × 10^(exponent − fraction length); in cents, × 10^2 more.
    let exponent = match exponent {
        None => 0,
        Some(text) => parse_exponent(text).ok_or_else(invalid)?,
    };
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(0);
    }
    let shift = exponent + 2 - fraction.len() as i64;
    // MAX_CENTS has 12 digits: more digits before the cent are out of range for sure, and
    // at most 12 always fit an i64 for the comparison below.
    const MAX_DIGITS: i64 = 12;
    let magnitude = if shift >= 0 {
        if digits.len() as i64 + shift > MAX_DIGITS {
            return Err(out_of_range());
        }
        let whole: i64 = digits.parse().map_err(|_| out_of_range())?;
        whole * 10i64.pow(shift as u32)
    } else {
        let dropped = shift.unsigned_abs();
        if dropped > digits.len() as u64 {
            // Every digit is below a tenth of a cent: the value rounds to 0.
            0
        } else {
            let keep = digits.len() - dropped as usize;
            if keep as i64 > MAX_DIGITS {
                return Err(out_of_range());
            }
            let kept: i64 = if keep == 0 {
                0
            } else {
                digits[..keep].parse().map_err(|_| out_of_range())?
            };
            // Half away from zero: the magnitude goes up when the first dropped digit is
            // 5 or more, whatever follows it.
            let round_up = digits.as_bytes()[keep] >= b'5';
            kept + i64::from(round_up)
        }
    };
    if magnitude > MAX_CENTS {
        return Err(out_of_range());
    }
    Ok(if negative { -magnitude } else { magnitude })
}

/// An exponent's value (`+5`, `-3`, `12`), saturated far beyond any exponent that leaves a
/// nonzero amount in range (so `1e-99999999999` is 0 and `1e99999999999` out of range,
/// without overflow).
fn parse_exponent(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    let value = if digits.len() > 6 {
        1_000_000
    } else {
        digits.parse::<i64>().unwrap_or(0)
    };
    Some(if negative { -value } else { value })
}

/// A non-negative amount typed by the operator (`--price 12.50`, `--credit-limit 500`),
/// in cents.
pub fn parse_cents(text: &str) -> Result<i64, AmountError> {
    let cents = parse_signed_cents(text)?;
    if cents < 0 {
        return Err(AmountError::Negative(text.to_string()));
    }
    Ok(cents)
}

/// An amount typed by the operator that may be negative (`--amount=-5` of an adjustment),
/// in cents.
pub fn parse_signed_cents(text: &str) -> Result<i64, AmountError> {
    parse(text.trim(), Syntax::Plain)
}

/// A JSON number's text as sent (e.g. a buyer's `buyerPrice`), in cents.
pub fn cents_from_json_text(text: &str) -> Result<i64, AmountError> {
    parse(text, Syntax::Json)
}

/// Cents as a JSON number: 1250 → `12.5`, 2500 → `25.0`, 199 → `1.99`, the form the HTTP
/// interface has always had. Exact and never in exponent form for every amount leadrelay
/// keeps: cents below 2^53 are exact in a float, the division by 100 is correctly rounded
/// to the float nearest the decimal, and its shortest form (what serde_json writes) is that
/// decimal; serde_json writes an exponent only from 10^16 on, far past any bound here.
pub fn to_json(cents: i64) -> Value {
    Value::from(as_f64(cents))
}

/// Cents as the JSON number of euros that [`to_json`] gives, for typed serialisation.
pub fn as_f64(cents: i64) -> f64 {
    cents as f64 / 100.0
}

/// Cents as text with two decimals: 1250 → "12.50", -5 → "-0.05". Takes any integer up
/// to `i128`, so a message can show a sum that leaves `i64`.
pub fn display(cents: impl Into<i128>) -> String {
    let cents: i128 = cents.into();
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

/// A balance moved by `delta`, if it stays within ±[`MAX_BALANCE_CENTS`]; `None` when it
/// would leave that range (or overflow, which a bounded balance never does).
pub fn moved_balance(balance_cents: i64, delta_cents: i64) -> Option<i64> {
    balance_cents
        .checked_add(delta_cents)
        .filter(|after| after.unsigned_abs() <= MAX_BALANCE_CENTS as u64)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rounds_half_away_from_zero_to_cents() {
        for (text, cents) in [
            ("12", 1200),
            ("12.5", 1250),
            ("12.50", 1250),
            ("0.07", 7),
            ("1.005", 101),
            ("2.675", 268),
            ("1.004999", 100),
            ("-1.005", -101),
            ("-0.004", 0),
            ("0.005", 1),
            ("0.0049999999999999999999", 0),
            ("007.1", 710),
            ("1000000000", MAX_CENTS),
            ("1000000000.004", MAX_CENTS),
            ("-1000000000.00", -MAX_CENTS),
        ] {
            assert_eq!(parse_signed_cents(text), Ok(cents), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_no_amount_or_out_of_range() {
        for bad in [
            "", "-", "abc", "1.", ".5", "1e3", "+1", "1,5", "1 000", "--1", "0x10",
        ] {
            assert_eq!(
                parse_signed_cents(bad),
                Err(AmountError::Invalid(bad.trim().to_string())),
                "{bad}"
            );
        }
        for big in [
            "1000000000.005",
            "1000000000.01",
            "-1000000000.01",
            "92233720368547758",
            "99999999999999999999999999",
        ] {
            assert_eq!(
                parse_signed_cents(big),
                Err(AmountError::OutOfRange(big.to_string())),
                "{big}"
            );
        }
        assert_eq!(parse_cents("-5"), Err(AmountError::Negative("-5".into())));
        assert_eq!(
            parse_cents("-0.001"),
            Ok(0),
            "rounds to zero, which is not negative"
        );
        assert!(
            AmountError::OutOfRange("1e12".into())
                .to_string()
                .contains("1,000,000,000.00")
        );
    }

    #[test]
    fn json_numbers_are_read_from_their_text() {
        for (text, cents) in [
            ("1.005", Ok(101)),
            ("2.675", Ok(268)),
            ("19.99", Ok(1999)),
            ("1.25e2", Ok(12500)),
            ("1E-3", Ok(0)),
            ("5e-3", Ok(1)),
            ("1e9", Ok(MAX_CENTS)),
            ("0e999999999999", Ok(0)),
            ("1e-999999999999", Ok(0)),
            ("1e10", Err(AmountError::OutOfRange("1e10".into()))),
            (
                "1e999999999999",
                Err(AmountError::OutOfRange("1e999999999999".into())),
            ),
            ("-2.5", Ok(-250)),
        ] {
            assert_eq!(cents_from_json_text(text), cents, "{text}");
        }
    }

    #[test]
    fn shows_two_decimals_never_an_exponent() {
        assert_eq!(display(1250), "12.50");
        assert_eq!(display(-5), "-0.05");
        assert_eq!(display(MAX_CENTS), "1000000000.00");
        assert_eq!(to_json(1250).to_string(), "12.5");
        assert_eq!(to_json(2500).to_string(), "25.0");
        assert_eq!(to_json(1999).to_string(), "19.99");
        assert_eq!(to_json(-5).to_string(), "-0.05");
        assert_eq!(to_json(-MAX_CENTS).to_string(), "-1000000000.0");
        assert_eq!(to_json(0).to_string(), "0.0");
        // The same text serde_json gives the float, which is what the interface showed.
        for cents in [0, 1, 10, 99, 1250, 2500, 123_456_789, -42, MAX_CENTS] {
            assert_eq!(
                to_json(cents),
                serde_json::json!(cents as f64 / 100.0),
                "{cents}"
            );
        }
    }

    #[test]
    fn a_balance_stays_within_its_bound() {
        assert_eq!(moved_balance(0, MAX_BALANCE_CENTS), Some(MAX_BALANCE_CENTS));
        assert_eq!(moved_balance(1, MAX_BALANCE_CENTS), None);
        assert_eq!(moved_balance(-MAX_BALANCE_CENTS, -1), None);
        assert_eq!(moved_balance(i64::MAX, 1), None, "no overflow");
        assert_eq!(moved_balance(i64::MIN, -1), None, "no overflow");
    }

    /// A decimal text with up to `whole` and `fraction` digits, maybe negative.
    fn decimal_text() -> impl Strategy<Value = (bool, String, String)> {
        (any::<bool>(), "[0-9]{1,13}", "[0-9]{0,8}")
    }

    /// The cents of a decimal text computed another way: in 128-bit integers, scaled to
    /// the text's own precision, then rounded half away from zero.
    fn reference_cents(negative: bool, whole: &str, fraction: &str) -> i128 {
        let scale = 10i128.pow(fraction.len() as u32);
        let fraction_value: i128 = if fraction.is_empty() {
            0
        } else {
            fraction.parse().unwrap()
        };
        let value = whole.parse::<i128>().unwrap() * scale + fraction_value;
        let hundredths = value * 100;
        let cents = (hundredths + scale / 2) / scale;
        if negative { -cents } else { cents }
    }

    proptest! {
        #[test]
        fn parsing_equals_integer_arithmetic((negative, whole, fraction) in decimal_text()) {
            let text = format!(
                "{}{whole}{}{fraction}",
                if negative { "-" } else { "" },
                if fraction.is_empty() { "" } else { "." }
            );
            let expected = reference_cents(negative, &whole, &fraction);
            match parse_signed_cents(&text) {
                Ok(cents) => {
                    prop_assert_eq!(i128::from(cents), expected);
                    prop_assert!(cents.abs() <= MAX_CENTS);
                }
                Err(AmountError::OutOfRange(_)) => {
                    prop_assert!(expected.abs() > i128::from(MAX_CENTS));
                }
                Err(other) => prop_assert!(false, "{text}: {other}"),
            }
        }

        #[test]
        fn every_bounded_amount_survives_display_and_parse(cents in -MAX_CENTS..=MAX_CENTS) {
            prop_assert_eq!(parse_signed_cents(&display(cents)), Ok(cents));
            let shown = to_json(cents);
            prop_assert_eq!(cents_from_json_text(&shown.to_string()), Ok(cents));
            prop_assert!(!shown.to_string().contains(['e', 'E']));
            let text = shown.to_string();
            let (_, decimals) = text.split_once('.').unwrap();
            prop_assert!(decimals.len() == 1 || decimals.len() == 2);
            prop_assert_eq!(shown, serde_json::json!(cents as f64 / 100.0));
        }

        #[test]
        fn an_exponent_moves_the_point(mantissa in 0i64..1_000_000, exponent in -6i64..=3) {
            let text = format!("{mantissa}e{exponent}");
            let plain = if exponent >= 0 {
                format!("{mantissa}{}", "0".repeat(exponent as usize))
            } else {
                let digits = format!("{mantissa:0>7}");
                let point = digits.len() - exponent.unsigned_abs() as usize;
                format!("{}.{}", &digits[..point], &digits[point..])
            };
            prop_assert_eq!(
                cents_from_json_text(&text).ok(),
                parse_signed_cents(&plain).ok(),
                "{} vs {}", text, plain
            );
        }

        #[test]
        fn a_balance_moved_in_bounds_never_overflows(
            balance in -MAX_BALANCE_CENTS..=MAX_BALANCE_CENTS,
            delta in -MAX_CENTS..=MAX_CENTS,
        ) {
            let expected = i128::from(balance) + i128::from(delta);
            match moved_balance(balance, delta) {
                Some(after) => prop_assert_eq!(i128::from(after), expected),
                None => prop_assert!(expected.abs() > i128::from(MAX_BALANCE_CENTS)),
            }
        }
    }
}
