//! Money: stored as integer minor units (cents), shown in JSON as a number with two decimals,
//! read from the CLI as a decimal string.

/// Parses `"12"`, `"12.5"` or `"12.50"` into cents. Rejects signs, more than two decimals,
/// and amounts that do not fit.
pub fn parse_cents(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (whole, fraction, fraction_ok) = match text.split_once('.') {
        Some((w, f)) => (w, f, digits(f) && f.len() <= 2),
        None => (text, "", true),
    };
    if !digits(whole) || !fraction_ok {
        return Err(format!(
            "invalid amount '{text}': expected a number like 12 or 12.50"
        ));
    }
    let whole: i64 = whole
        .parse()
        .map_err(|_| format!("amount '{text}' is too large"))?;
    let fraction: i64 = format!("{fraction:0<2}")
        .parse()
        .expect("two ASCII digits always parse");
    whole
        .checked_mul(100)
        .and_then(|c| c.checked_add(fraction))
        .ok_or_else(|| format!("amount '{text}' is too large"))
}

/// A JSON number's text as sent (e.g. a buyer's bid), in cents: read from its decimal
/// digits, never through a float, and rounded half away from zero to a cent (`1.005` →
/// 101, DESIGN.md section 11). The syntax is [`parse_cents`]'s with any number of decimals:
/// no sign, no exponent.
pub fn cents_from_json_text(text: &str) -> Result<i64, String> {
    match text.split_once('.') {
        Some((whole, fraction))
            if fraction.len() > 2 && fraction.bytes().all(|b| b.is_ascii_digit()) =>
        {
            let cents = parse_cents(&format!("{whole}.{}", &fraction[..2]))?;
            // Half away from zero: up when the first dropped digit is 5 or more.
            let round_up = fraction.as_bytes()[2] >= b'5';
            cents
                .checked_add(i64::from(round_up))
                .ok_or_else(|| format!("amount '{text}' is too large"))
        }
        _ => parse_cents(text),
    }
}

/// Cents from a JSON number (e.g. a buyer's `buyerPrice`), rounded to the nearest cent.
pub fn cents_from_f64(amount: f64) -> Option<i64> {
    if !amount.is_finite() || amount.abs() > 1e13 {
        return None;
    }
    Some((amount * 100.0).round() as i64)
}

/// Cents as a JSON number: 1250 → 12.5 (the JSON value 12.50).
pub fn to_json(cents: i64) -> serde_json::Value {
    serde_json::json!(cents as f64 / 100.0)
}

/// Cents as text with two decimals: 1250 → "12.50", -5 → "-0.05".
pub fn display(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_amounts() {
        assert_eq!(parse_cents("12"), Ok(1200));
        assert_eq!(parse_cents("12.5"), Ok(1250));
        assert_eq!(parse_cents("0.07"), Ok(7));
        for bad in [
            "",
            "-1",
            "1.234",
            "abc",
            "1.",
            ".5",
            "1e3",
            "99999999999999999999",
        ] {
            assert!(parse_cents(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_text_rounds_half_away_from_zero() {
        assert_eq!(cents_from_json_text("1.005"), Ok(101));
        assert_eq!(cents_from_json_text("2.675"), Ok(268));
        assert_eq!(cents_from_json_text("2.6749"), Ok(267));
        assert_eq!(cents_from_json_text("0.004"), Ok(0));
        assert_eq!(cents_from_json_text("27.5"), Ok(2750));
        assert_eq!(cents_from_json_text("3"), Ok(300));
        for bad in ["-1", "-1.005", "1e3", "1.", ".555", "1.2x5", ""] {
            assert!(cents_from_json_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shows_two_decimals() {
        assert_eq!(display(1250), "12.50");
        assert_eq!(display(-5), "-0.05");
        assert_eq!(to_json(1250), serde_json::json!(12.5));
        assert_eq!(cents_from_f64(19.99), Some(1999));
        assert_eq!(cents_from_f64(f64::NAN), None);
    }
}
