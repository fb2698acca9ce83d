//! Alerts (DESIGN.md section 23): the rules a workspace watches, where their messages go,
//! and each alert's life from `firing` to `resolved`.
//!
//! `store` owns the three tables (`alert_targets`, `alert_rules`, `alerts`); `conditions`
//! reads what is true now (a read connection, never the writer); [`message`] is the one
//! body every target gets. Deciding what changed is the small writer job
//! [`store::apply`]: an open alert whose condition no longer holds is resolved, a
//! condition without an open alert fires. Sending is the edge's (`outbox::alert`), after
//! the job has committed. Nothing here runs on the ingest path: a rule is evaluated from
//! the stored figures (breaker, cap counters, balances, the leads index, the outbox, the
//! report aggregate), never per lead.

pub mod conditions;
pub mod store;

use serde::Serialize;
use serde_json::Value;

use crate::db::stored::stored_enum;

stored_enum! {
    /// A condition an operator can be alerted about.
    pub enum Rule as "alert rule" {
        /// A buyer's circuit breaker has been open for `for`.
        BuyerEndpointDown = "buyer_endpoint_down",
        /// A buyer's daily cap for a product is full.
        CapReached = "cap_reached",
        /// A prepaid buyer's balance is under the threshold.
        BalanceLow = "balance_low",
        /// No lead from an enabled source for `for`.
        SourceSilent = "source_silent",
        /// The oldest pending outbox event is older than `for`.
        OutboxBacklog = "outbox_backlog",
        /// The free space of the database's file system is under the threshold (percent).
        DiskLow = "disk_low",
        /// A buyer's or a source's returns are over the threshold (percent) of its sales
        /// of the last 7 days.
        ReturnRateHigh = "return_rate_high",
    }
}

stored_enum! {
    /// An alert's state: its condition holds, or held and ended.
    pub enum State as "alert state" {
        Firing = "firing",
        Resolved = "resolved",
    }
}

stored_enum! {
    /// Where a target's messages go.
    pub enum TargetKind as "alert target kind" {
        Webhook = "webhook",
        Email = "email",
    }
}

/// What a rule's threshold measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// No threshold.
    None,
    /// An amount (cents).
    Money,
    /// A percentage (stored in basis points).
    Percent,
}

impl Rule {
    pub fn measure(self) -> Measure {
        match self {
            Rule::BalanceLow => Measure::Money,
            Rule::DiskLow | Rule::ReturnRateHigh => Measure::Percent,
            _ => Measure::None,
        }
    }

    /// The threshold when none is given (basis points), if the rule has one; `balance_low`
    /// has none: the amount is the operator's to choose.
    pub fn default_threshold(self) -> Option<i64> {
        match self {
            Rule::DiskLow => Some(1_000),
            Rule::ReturnRateHigh => Some(2_000),
            _ => None,
        }
    }

    /// The `for` when none is given (ms), for the rules that take one.
    pub fn default_for_ms(self) -> Option<i64> {
        match self {
            Rule::BuyerEndpointDown => Some(5 * 60_000),
            Rule::SourceSilent => Some(60 * 60_000),
            Rule::OutboxBacklog => Some(15 * 60_000),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    #[error("{0}")]
    Invalid(String),
    #[error("unknown alert target '{0}'")]
    UnknownTarget(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
}

impl AlertError {
    /// A stable code for the error, printed under `--json`.
    pub fn code(&self) -> &'static str {
        match self {
            AlertError::Invalid(_) => "invalid",
            AlertError::UnknownTarget(_) => "not_found",
            AlertError::Config(e) => e.code(),
            AlertError::Sql(_) | AlertError::Db(_) => "database_error",
        }
    }
}

/// A rule switched on for a workspace, with its threshold and duration in stored units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSetting {
    pub workspace_id: String,
    pub rule: Rule,
    pub threshold: Option<i64>,
    pub for_ms: Option<i64>,
}

impl RuleSetting {
    pub fn view(&self) -> RuleSettingView<'_> {
        RuleSettingView {
            workspace: &self.workspace_id,
            rule: self.rule.as_str(),
            threshold: self.threshold.map(|t| threshold_text(self.rule, t)),
            duration: self.for_ms.map(|ms| {
                crate::duration::format(std::time::Duration::from_millis(ms.max(0).unsigned_abs()))
            }),
        }
    }

    /// [`RuleSetting::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A rule as `alert rule list --json` shows it: threshold and duration as the operator
/// writes them.
#[derive(Debug, Serialize)]
pub struct RuleSettingView<'a> {
    workspace: &'a str,
    rule: &'static str,
    threshold: Option<String>,
    #[serde(rename = "for")]
    duration: Option<String>,
}

/// A threshold as the operator wrote it: an amount (`25.00`) or a percentage (`12.5`).
pub fn threshold_text(rule: Rule, stored: i64) -> String {
    match rule.measure() {
        Measure::Money => crate::money::display(stored),
        _ => {
            let (whole, hundredths) = (stored / 100, stored % 100);
            match hundredths {
                0 => whole.to_string(),
                h if h % 10 == 0 => format!("{whole}.{}", h / 10),
                h => format!("{whole}.{h:02}"),
            }
        }
    }
}

/// Reads a percentage of at most two decimals between 0 and 100 into basis points.
pub fn parse_percent(text: &str) -> Result<i64, AlertError> {
    let invalid = || AlertError::Invalid(format!("'{text}' is not a percentage from 0 to 100"));
    let text = text.trim().trim_end_matches('%');
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || fraction.len() > 2
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return Err(invalid());
    }
    let whole: i64 = whole.parse().map_err(|_| invalid())?;
    let fraction: i64 = format!("{fraction:0<2}").parse().map_err(|_| invalid())?;
    let bp = whole.checked_mul(100).and_then(|w| w.checked_add(fraction));
    bp.filter(|bp| *bp <= 10_000).ok_or_else(invalid)
}

/// A delivery target of a workspace's alerts.
#[derive(Debug, Clone)]
pub struct Target {
    pub id: String,
    pub workspace_id: String,
    pub kind: TargetKind,
    /// The webhook's URL or the email address.
    pub address: String,
    /// The webhook's `whsec_…` signing secret (`None` for email).
    pub signing_secret: Option<String>,
    pub created_at: i64,
}

impl Target {
    /// As listed: never the signing secret, which is shown once when the target is added.
    pub fn view(&self) -> TargetView<'_> {
        TargetView {
            id: &self.id,
            workspace: &self.workspace_id,
            kind: self.kind.as_str(),
            address: &self.address,
            created_at: crate::clock::iso(self.created_at),
        }
    }

    /// [`Target::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A target as listed: never the signing secret.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetView<'a> {
    id: &'a str,
    workspace: &'a str,
    kind: &'static str,
    address: &'a str,
    created_at: String,
}

/// One alert: a rule's condition for one subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub id: String,
    pub workspace_id: String,
    pub rule: Rule,
    /// What it is about: `buyer:ID`, `buyer:ID product:ID`, `source:ID`, `outbox`, `disk`.
    pub subject: String,
    pub state: State,
    pub detail: String,
    /// When the condition started.
    pub since: i64,
    pub resolved_at: Option<i64>,
}

impl Alert {
    pub fn view(&self) -> AlertView<'_> {
        AlertView {
            id: &self.id,
            workspace: &self.workspace_id,
            rule: self.rule.as_str(),
            subject: &self.subject,
            state: self.state.as_str(),
            since: crate::clock::iso(self.since),
            resolved_at: self.resolved_at.map(crate::clock::iso),
            detail: &self.detail,
        }
    }

    /// [`Alert::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }

    /// When the alert's current state began: the condition's start while firing, the
    /// resolution once resolved.
    pub fn state_since(&self) -> i64 {
        match self.state {
            State::Firing => self.since,
            State::Resolved => self.resolved_at.unwrap_or(self.since),
        }
    }

    /// The one-line text of a message: what chat tools show.
    pub fn text(&self) -> String {
        let what = match self.state {
            State::Firing => "FIRING",
            State::Resolved => "RESOLVED",
        };
        format!(
            "[{what}] {} {} ({}): {}",
            self.rule.as_str(),
            self.subject,
            self.workspace_id,
            self.detail
        )
    }
}

/// The body of a message to every target: `{"text", "alert": {"rule", "subject", "state",
/// "since", "detail", …}}`, the shape chat tools' incoming webhooks take (they show
/// `text`; a program reads `alert`).
pub fn message(alert: &Alert) -> Value {
    crate::to_value(Message {
        text: alert.text(),
        alert: MessageAlert {
            id: &alert.id,
            workspace: &alert.workspace_id,
            rule: alert.rule.as_str(),
            subject: &alert.subject,
            state: alert.state.as_str(),
            since: crate::clock::iso(alert.state_since()),
            detail: &alert.detail,
        },
    })
}

/// An alert as `alert list --json` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertView<'a> {
    id: &'a str,
    workspace: &'a str,
    rule: &'static str,
    subject: &'a str,
    state: &'static str,
    since: String,
    resolved_at: Option<String>,
    detail: &'a str,
}

/// The body of an alert message (see [`message`]).
#[derive(Serialize)]
struct Message<'a> {
    text: String,
    alert: MessageAlert<'a>,
}

/// The alert in a message: `since` is when its current state began.
#[derive(Serialize)]
struct MessageAlert<'a> {
    id: &'a str,
    workspace: &'a str,
    rule: &'static str,
    subject: &'a str,
    state: &'static str,
    since: String,
    detail: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_read_to_basis_points_and_print_back() {
        for (text, bp) in [
            ("10", 1_000),
            ("12.5", 1_250),
            ("0.05", 5),
            ("100", 10_000),
            ("7%", 700),
        ] {
            assert_eq!(parse_percent(text).unwrap(), bp, "{text}");
            assert_eq!(
                parse_percent(&threshold_text(Rule::DiskLow, bp)).unwrap(),
                bp
            );
        }
        for text in ["", "-1", "100.01", "1.234", "ten", ".5", "1e2"] {
            assert!(parse_percent(text).is_err(), "{text}");
        }
    }
}
