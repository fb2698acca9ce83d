//! Buyer endpoint health: the circuit breaker of DESIGN.md section 13 and what `buyer
//! health` (and the operator console) shows.
//!
//! After [`BreakerConfig::failures`] failed attempts in a row, or none answered for
//! [`BreakerConfig::window`] since the first of a run of failures, a buyer's endpoint is
//! `unhealthy`: the outbox keeps its events waiting and sends one probe attempt at a time,
//! spaced from [`BreakerConfig::first_probe`] doubling up to [`BreakerConfig::max_probe`];
//! the first answer resumes normal sending. Auto-delivery skips an unhealthy buyer
//! (`buyer_unhealthy`), so fresh leads go to buyers who can take them.
//!
//! What counts: a network error, a timeout, 408, 429, 5xx, a redirect and a TLS error are
//! failures (the endpoint cannot take leads); a 2xx is a success; any other 4xx is an
//! answer that refuses one event but proves the endpoint up, so it ends a run of failures
//! without being a success (`lastSuccessAt` stays the last 2xx).
//!
//! Owns the `buyer_health` and `outbox_workers` tables: the breaker's state (written as
//! the outbox records attempts, so it survives a restart), the running server's per-buyer
//! figures (in flight, latency) and its heartbeat, and [`read`], the one read of all that
//! for the CLI and the console. It does not own the attempts themselves (`store`) nor when
//! they are made (`worker`).

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use crate::db::stored::stored_enum;

stored_enum! {
    /// Whether a buyer's endpoint takes leads.
    pub enum State as "buyer health state" {
        Healthy = "healthy",
        Unhealthy = "unhealthy",
    }
}

/// When a buyer's endpoint is given up on and how it is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Failed attempts in a row that make an endpoint unhealthy.
    pub failures: u32,
    /// How long failures may go on without an answer before the endpoint is unhealthy,
    /// however few they were.
    pub window_ms: i64,
    /// The wait before the first probe; it doubles after each failed probe…
    pub first_probe_ms: i64,
    /// …up to this.
    pub max_probe_ms: i64,
}

impl Default for BreakerConfig {
    /// 10 failures or 10 minutes; probes 30 s apart, doubling to 10 minutes.
    fn default() -> Self {
        BreakerConfig {
            failures: 10,
            window_ms: 10 * 60_000,
            first_probe_ms: 30_000,
            max_probe_ms: 10 * 60_000,
        }
    }
}

/// What one attempt says about the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// A 2xx.
    Success,
    /// An answer that is not a success but shows the endpoint up (a 4xx other than 408
    /// and 429).
    Answered,
    /// No usable answer: network error, timeout, 408, 429, 5xx, redirect, TLS error.
    Failure,
}

/// One buyer's breaker as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breaker {
    pub buyer_id: crate::ids::BuyerId,
    pub state: State,
    pub consecutive_failures: i64,
    pub failing_since: Option<i64>,
    pub last_success_at: Option<i64>,
    pub last_failure_at: Option<i64>,
    pub last_error: Option<String>,
    pub unhealthy_since: Option<i64>,
    pub next_probe_at: Option<i64>,
    pub probe_interval_ms: Option<i64>,
}

/// A change of state that [`Breaker::observe`] made, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    BecameUnhealthy,
    Recovered,
}

impl Breaker {
    /// A buyer that was never tried.
    pub(crate) fn new(buyer_id: &crate::ids::BuyerId) -> Breaker {
        Breaker {
            buyer_id: buyer_id.clone(),
            state: State::Healthy,
            consecutive_failures: 0,
            failing_since: None,
            last_success_at: None,
            last_failure_at: None,
            last_error: None,
            unhealthy_since: None,
            next_probe_at: None,
            probe_interval_ms: None,
        }
    }

    /// Takes one attempt's outcome into account. `probe` says whether the attempt was the
    /// probe of an unhealthy endpoint: only a failed probe moves the next probe later (an
    /// attempt that was already under way when the endpoint went unhealthy does not).
    pub fn observe(
        &mut self,
        observation: Observation,
        error: Option<&str>,
        probe: bool,
        at: i64,
        config: &BreakerConfig,
    ) -> Option<Transition> {
        if observation != Observation::Success
            && let Some(error) = error
        {
            self.last_error = Some(error.to_string());
        }
        match observation {
            Observation::Success | Observation::Answered => {
                if observation == Observation::Success {
                    self.last_success_at = Some(at);
                }
                self.consecutive_failures = 0;
                self.failing_since = None;
                if self.state == State::Unhealthy {
                    self.state = State::Healthy;
                    self.unhealthy_since = None;
                    self.next_probe_at = None;
                    self.probe_interval_ms = None;
                    return Some(Transition::Recovered);
                }
                None
            }
            Observation::Failure => {
                self.consecutive_failures += 1;
                self.last_failure_at = Some(at);
                let since = *self.failing_since.get_or_insert(at);
                match self.state {
                    State::Healthy => {
                        let tripped = self.consecutive_failures >= i64::from(config.failures)
                            || at - since >= config.window_ms;
                        if !tripped {
                            return None;
                        }
                        self.state = State::Unhealthy;
                        self.unhealthy_since = Some(at);
                        self.probe_interval_ms = Some(config.first_probe_ms);
                        self.next_probe_at = Some(at + config.first_probe_ms);
                        Some(Transition::BecameUnhealthy)
                    }
                    State::Unhealthy => {
                        if probe {
                            let interval =
                                self.probe_interval_ms.map_or(config.first_probe_ms, |i| {
                                    i.saturating_mul(2).min(config.max_probe_ms)
                                });
                            self.probe_interval_ms = Some(interval);
                            self.next_probe_at = Some(at + interval);
                        }
                        None
                    }
                }
            }
        }
    }
}

const BREAKER_COLUMNS: &str = "buyer_id, state, consecutive_failures, failing_since, \
    last_success_at, last_failure_at, last_error, unhealthy_since, next_probe_at, \
    probe_interval_ms";

fn breaker_from_row(row: &rusqlite::Row) -> rusqlite::Result<Breaker> {
    Ok(Breaker {
        buyer_id: row.get(0)?,
        state: row.get(1)?,
        consecutive_failures: row.get(2)?,
        failing_since: row.get(3)?,
        last_success_at: row.get(4)?,
        last_failure_at: row.get(5)?,
        last_error: row.get(6)?,
        unhealthy_since: row.get(7)?,
        next_probe_at: row.get(8)?,
        probe_interval_ms: row.get(9)?,
    })
}

/// The stored breaker of `buyer_id`, or a fresh one when it was never tried.
pub fn load(conn: &Connection, buyer_id: &crate::ids::BuyerId) -> rusqlite::Result<Breaker> {
    // Built once: the outbox's results load their buyers' breakers in a writer job.
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {BREAKER_COLUMNS} FROM buyer_health WHERE buyer_id = ?1")
    });
    Ok(conn
        .prepare_kept(&SQL)?
        .query_row([buyer_id], breaker_from_row)
        .optional()?
        .unwrap_or_else(|| Breaker::new(buyer_id)))
}

/// Stores the breaker (the reported figures stay as they are).
pub fn save(conn: &Connection, breaker: &Breaker) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO buyer_health (buyer_id, state, consecutive_failures, failing_since,
            last_success_at, last_failure_at, last_error, unhealthy_since, next_probe_at,
            probe_interval_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (buyer_id) DO UPDATE SET state = excluded.state,
            consecutive_failures = excluded.consecutive_failures,
            failing_since = excluded.failing_since, last_success_at = excluded.last_success_at,
            last_failure_at = excluded.last_failure_at, last_error = excluded.last_error,
            unhealthy_since = excluded.unhealthy_since, next_probe_at = excluded.next_probe_at,
            probe_interval_ms = excluded.probe_interval_ms",
    )?
    .execute(params![
        breaker.buyer_id,
        breaker.state,
        breaker.consecutive_failures,
        breaker.failing_since,
        breaker.last_success_at,
        breaker.last_failure_at,
        breaker.last_error,
        breaker.unhealthy_since,
        breaker.next_probe_at,
        breaker.probe_interval_ms
    ])?;
    Ok(())
}

/// Lets an unhealthy buyer's next probe go out now (`outbox retry --buyer`: the operator
/// says the endpoint is back). Nothing changes for a healthy buyer.
pub fn probe_now(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "UPDATE buyer_health SET next_probe_at = ?2 WHERE buyer_id = ?1 AND state = 'unhealthy'",
    )?
    .execute(params![buyer_id, now])?;
    Ok(())
}

/// What the running server knows of one buyer that the database does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    pub in_flight: i64,
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
}

/// How long after its last heartbeat the outbox of a server counts as running.
pub(crate) const HEARTBEAT_FRESH_MS: i64 = 20_000;

/// Records that the outbox workers started at `started_at` are alive at `now`.
pub fn heartbeat(conn: &Connection, started_at: i64, now: i64) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO outbox_workers (id, started_at, heartbeat_at) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at,
            heartbeat_at = excluded.heartbeat_at",
    )?
    .execute(params![started_at, now])?;
    Ok(())
}

/// The workers stopped: nothing is in flight any more.
pub fn stopped(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_kept("DELETE FROM outbox_workers")?
        .execute([])?;
    conn.prepare_kept("UPDATE buyer_health SET in_flight = 0 WHERE in_flight <> 0")?
        .execute([])?;
    Ok(())
}

/// Stores the running server's figures of `buyer_id` as of `now`.
pub fn report(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    figures: &Figures,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO buyer_health (buyer_id, in_flight, latency_p50_ms, latency_p99_ms,
            reported_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (buyer_id) DO UPDATE SET in_flight = excluded.in_flight,
            latency_p50_ms = excluded.latency_p50_ms, latency_p99_ms = excluded.latency_p99_ms,
            reported_at = excluded.reported_at",
    )?
    .execute(params![
        buyer_id,
        figures.in_flight,
        figures.p50_ms,
        figures.p99_ms,
        now
    ])?;
    Ok(())
}

/// One buyer's health as `buyer health` and the console show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuyerHealth {
    pub breaker: Breaker,
    /// Sends in flight now; `None` when no server's outbox is running.
    pub in_flight: Option<i64>,
    /// Median and 99th percentile duration of the recent attempts that a server reported
    /// (the last run's when none runs now); `None` before any.
    pub latency_p50_ms: Option<i64>,
    pub latency_p99_ms: Option<i64>,
    pub reported_at: Option<i64>,
}

impl BuyerHealth {
    /// `{"buyerId", "state", "consecutiveFailures", "lastSuccessAt", "lastError",
    /// "inFlight", "latencyMs": {"p50", "p99"}, …}` (DESIGN.md section 13).
    pub fn view(&self) -> BuyerHealthView<'_> {
        let b = &self.breaker;
        BuyerHealthView {
            buyer_id: &b.buyer_id,
            state: b.state.as_str(),
            consecutive_failures: b.consecutive_failures,
            last_success_at: b.last_success_at.map(crate::clock::iso),
            last_error: b.last_error.as_deref(),
            in_flight: self.in_flight,
            latency_ms: Latency {
                p50: self.latency_p50_ms,
                p99: self.latency_p99_ms,
            },
            last_failure_at: b.last_failure_at.map(crate::clock::iso),
            unhealthy_since: b.unhealthy_since.map(crate::clock::iso),
            next_probe_at: b.next_probe_at.map(crate::clock::iso),
            reported_at: self.reported_at.map(crate::clock::iso),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a buyer's health always serialises")
    }
}

/// A [`BuyerHealth`] as `buyer health` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuyerHealthView<'a> {
    buyer_id: &'a crate::ids::BuyerId,
    state: &'static str,
    consecutive_failures: i64,
    last_success_at: Option<String>,
    last_error: Option<&'a str>,
    in_flight: Option<i64>,
    latency_ms: Latency,
    last_failure_at: Option<String>,
    unhealthy_since: Option<String>,
    next_probe_at: Option<String>,
    reported_at: Option<String>,
}

#[derive(Serialize)]
struct Latency {
    p50: Option<i64>,
    p99: Option<i64>,
}

/// The health of one buyer (`Some(id)`; an empty list when there is no such buyer) or of
/// every buyer, by id, as of `now`. The one read of buyer health for the CLI and the
/// operator console: the breaker from `buyer_health`, in-flight and latency as the running
/// server last reported them (in flight only while a server's heartbeat is fresh).
pub fn read(
    conn: &Connection,
    buyer_id: Option<&crate::ids::BuyerId>,
    now: i64,
) -> rusqlite::Result<Vec<BuyerHealth>> {
    let server: Option<(i64, i64)> = conn
        .prepare_kept("SELECT started_at, heartbeat_at FROM outbox_workers WHERE id = 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let running_since = server
        .filter(|(_, heartbeat)| now - heartbeat <= HEARTBEAT_FRESH_MS)
        .map(|(started, _)| started);
    let mut stmt = conn.prepare_kept(
        "SELECT b.id, coalesce(h.state, 'healthy'), coalesce(h.consecutive_failures, 0),
                h.failing_since, h.last_success_at, h.last_failure_at, h.last_error,
                h.unhealthy_since, h.next_probe_at, h.probe_interval_ms,
                coalesce(h.in_flight, 0), h.latency_p50_ms, h.latency_p99_ms, h.reported_at
         FROM buyers b LEFT JOIN buyer_health h ON h.buyer_id = b.id
         WHERE ?1 IS NULL OR b.id = ?1
         ORDER BY b.id",
    )?;
    let rows = stmt.query_map([buyer_id], |row| {
        let breaker = breaker_from_row(row)?;
        let in_flight: i64 = row.get(10)?;
        let reported_at: Option<i64> = row.get(13)?;
        Ok(BuyerHealth {
            breaker,
            // Figures reported before this server started are a previous run's.
            in_flight: running_since.map(|since| {
                if reported_at.is_some_and(|at| at >= since) {
                    in_flight
                } else {
                    0
                }
            }),
            latency_p50_ms: row.get(11)?,
            latency_p99_ms: row.get(12)?,
            reported_at,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: BreakerConfig = BreakerConfig {
        failures: 3,
        window_ms: 60_000,
        first_probe_ms: 1_000,
        max_probe_ms: 5_000,
    };

    fn fail(breaker: &mut Breaker, at: i64, probe: bool) -> Option<Transition> {
        breaker.observe(Observation::Failure, Some("HTTP 503"), probe, at, &CONFIG)
    }

    #[test]
    fn consecutive_failures_trip_the_breaker_and_an_answer_resets_the_count() {
        let mut b = Breaker::new(&crate::ids::BuyerId::from("b"));
        assert_eq!(fail(&mut b, 1, false), None);
        assert_eq!(fail(&mut b, 2, false), None);
        assert_eq!(
            b.observe(Observation::Answered, Some("HTTP 400"), false, 3, &CONFIG),
            None
        );
        assert_eq!(b.consecutive_failures, 0);
        assert_eq!(b.last_success_at, None, "a 4xx is no success");
        assert_eq!(b.last_error.as_deref(), Some("HTTP 400"));
        assert_eq!(fail(&mut b, 4, false), None);
        assert_eq!(fail(&mut b, 5, false), None);
        assert_eq!(fail(&mut b, 6, false), Some(Transition::BecameUnhealthy));
        assert_eq!(b.state, State::Unhealthy);
        assert_eq!(b.unhealthy_since, Some(6));
        assert_eq!(b.next_probe_at, Some(1_006));
    }

    #[test]
    fn failures_over_the_window_trip_the_breaker_however_few() {
        let mut b = Breaker::new(&crate::ids::BuyerId::from("b"));
        assert_eq!(fail(&mut b, 1_000, false), None);
        assert_eq!(fail(&mut b, 60_999, false), None);
        assert_eq!(b.state, State::Healthy);
        let mut b = Breaker::new(&crate::ids::BuyerId::from("b"));
        fail(&mut b, 1_000, false);
        assert_eq!(
            fail(&mut b, 61_000, false),
            Some(Transition::BecameUnhealthy)
        );
    }

    #[test]
    fn failed_probes_double_the_spacing_up_to_the_maximum_and_a_success_recovers() {
        let mut b = Breaker::new(&crate::ids::BuyerId::from("b"));
        for at in 1..=3 {
            fail(&mut b, at, false);
        }
        assert_eq!(b.next_probe_at, Some(1_003));
        // An attempt that was under way before the breaker tripped moves nothing.
        fail(&mut b, 10, false);
        assert_eq!(b.next_probe_at, Some(1_003));
        let mut spacing = Vec::new();
        let mut at = 1_003;
        for _ in 0..5 {
            fail(&mut b, at, true);
            spacing.push(b.next_probe_at.unwrap() - at);
            at = b.next_probe_at.unwrap();
        }
        assert_eq!(spacing, [2_000, 4_000, 5_000, 5_000, 5_000]);
        assert_eq!(
            b.observe(Observation::Success, None, true, at, &CONFIG),
            Some(Transition::Recovered)
        );
        assert_eq!(b.state, State::Healthy);
        assert_eq!(b.consecutive_failures, 0);
        assert_eq!(b.next_probe_at, None);
        assert_eq!(b.last_success_at, Some(at));
        assert_eq!(
            b.last_error.as_deref(),
            Some("HTTP 503"),
            "the last error stays"
        );
    }
}
