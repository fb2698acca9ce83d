//! Delivery schedules of subscriptions: on which days and at which hours a buyer takes
//! leads, in the workspace's time zone.
//!
//! Owns the operator's syntax (`mon-fri 08:00-18:00`), the stored JSON form and the
//! question "is this schedule open at this instant in this time zone". It does not own
//! where a schedule is stored (`config::buyer`) or what a closed schedule means for a
//! delivery (`eligibility`).
//!
//! Stored form: a JSON array of windows, `[{"days": [1, 2, 3, 4, 5], "from": "08:00",
//! "to": "18:00"}]`, days as ISO weekday numbers (1 = Monday … 7 = Sunday). A schedule is
//! open when any of its windows is. `to` is exclusive and may be `24:00`; a window whose
//! `to` is earlier than its `from` (`22:00-06:00`) runs past midnight into the next day, so
//! `fri 22:00-06:00` is open on Saturday at 05:59. A single window object (the schema's
//! first form) is read as a one-window schedule.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const MINUTES_PER_DAY: u16 = 24 * 60;

/// One window: a set of weekdays and a time range on each of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StoredWindow", into = "StoredWindow")]
pub struct Window {
    /// Bit `d - 1` is set for ISO weekday `d` (1 = Monday).
    days: u8,
    /// Minutes after local midnight, `from` inclusive, `to` exclusive (1440 = 24:00).
    from: u16,
    to: u16,
}

/// The JSON shape of a window.
#[derive(Serialize, Deserialize)]
struct StoredWindow {
    days: Vec<u8>,
    from: String,
    to: String,
}

impl TryFrom<StoredWindow> for Window {
    type Error = String;

    fn try_from(stored: StoredWindow) -> Result<Window, String> {
        let mut days = 0u8;
        for day in stored.days {
            if !(1..=7).contains(&day) {
                return Err(format!("weekday {day} is not 1 (Monday) to 7 (Sunday)"));
            }
            days |= 1 << (day - 1);
        }
        Window::new(days, parse_time(&stored.from)?, parse_time(&stored.to)?)
    }
}

impl From<Window> for StoredWindow {
    fn from(window: Window) -> StoredWindow {
        StoredWindow {
            days: (1..=7u8)
                .filter(|d| window.days & (1 << (d - 1)) != 0)
                .collect(),
            from: format_time(window.from),
            to: format_time(window.to),
        }
    }
}

impl Window {
    fn new(days: u8, from: u16, to: u16) -> Result<Window, String> {
        if days == 0 {
            return Err("a schedule window needs at least one day".into());
        }
        if from == to {
            return Err(format!(
                "a window from {} to {} is empty",
                format_time(from),
                format_time(to)
            ));
        }
        if from >= MINUTES_PER_DAY {
            return Err("a window cannot start at 24:00".into());
        }
        Ok(Window { days, from, to })
    }

    /// Parses the operator's form: `[DAYS] [HH:MM-HH:MM]`, at least one of the two. DAYS is
    /// a comma-separated list of days (`mon`) and day ranges (`mon-fri`, `fri-mon` wraps),
    /// or `daily`; no DAYS means every day, no hours means the whole day. Examples:
    /// `mon-fri 08:00-18:00`, `sat 10:00-14:00`, `mon,wed,fri`, `22:00-06:00`.
    pub fn parse(text: &str) -> Result<Window, String> {
        let problem = |why: &str| {
            format!(
                "schedule '{text}': {why}; expected e.g. 'mon-fri 08:00-18:00', 'sat', \
                 '22:00-06:00'"
            )
        };
        let mut parts = text.split_whitespace();
        let (first, second) = (parts.next(), parts.next());
        if parts.next().is_some() {
            return Err(problem("too many parts"));
        }
        let (days, hours) = match (first, second) {
            (Some(days), Some(hours)) => (Some(days), Some(hours)),
            (Some(only), None) if only.contains(':') => (None, Some(only)),
            (Some(only), None) => (Some(only), None),
            _ => return Err(problem("it is empty")),
        };
        let days = match days {
            Some(days) => parse_days(days).map_err(|why| problem(&why))?,
            None => 0b111_1111,
        };
        let (from, to) = match hours {
            Some(hours) => {
                let (from, to) = hours
                    .split_once('-')
                    .ok_or_else(|| problem("hours are HH:MM-HH:MM"))?;
                (
                    parse_time(from).map_err(|why| problem(&why))?,
                    parse_time(to).map_err(|why| problem(&why))?,
                )
            }
            None => (0, MINUTES_PER_DAY),
        };
        Window::new(days, from, to).map_err(|why| problem(&why))
    }

    /// The window in the operator's syntax (`mon-fri 08:00-18:00`, `sat`, `22:00-06:00`),
    /// which [`Window::parse`] reads back to the same window.
    pub fn to_text(&self) -> String {
        let days = format_days(self.days);
        let whole_day = self.from == 0 && self.to == MINUTES_PER_DAY;
        let hours = format!("{}-{}", format_time(self.from), format_time(self.to));
        match (days, whole_day) {
            (None, true) => "daily".to_string(),
            (None, false) => hours,
            (Some(days), true) => days,
            (Some(days), false) => format!("{days} {hours}"),
        }
    }

    fn has_day(&self, iso_weekday: u8) -> bool {
        self.days & (1 << (iso_weekday - 1)) != 0
    }

    /// Whether the window is open at `minute` after local midnight on ISO weekday `day`.
    fn is_open(&self, day: u8, minute: u16) -> bool {
        if self.from < self.to {
            self.has_day(day) && (self.from..self.to).contains(&minute)
        } else {
            // Past midnight: the evening part belongs to `day`, the early-morning part to the
            // window that started the day before.
            let yesterday = if day == 1 { 7 } else { day - 1 };
            (self.has_day(day) && minute >= self.from)
                || (self.has_day(yesterday) && minute < self.to)
        }
    }
}

/// A subscription's schedule: open when any window is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Schedule {
    windows: Vec<Window>,
}

impl Schedule {
    pub fn new(windows: Vec<Window>) -> Schedule {
        Schedule { windows }
    }

    /// Reads the stored JSON: an array of windows or a single window object.
    pub fn from_json(value: &Value) -> Result<Schedule, String> {
        let windows = match value {
            Value::Array(_) => serde_json::from_value(value.clone()),
            Value::Object(_) => serde_json::from_value(value.clone()).map(|w| vec![w]),
            _ => return Err("a schedule is an array of windows".into()),
        }
        .map_err(|e| format!("invalid schedule: {e}"))?;
        Ok(Schedule { windows })
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a schedule always serialises")
    }

    /// Each window in the operator's syntax, as `--schedule` takes it back.
    pub fn to_texts(&self) -> Vec<String> {
        self.windows.iter().map(Window::to_text).collect()
    }

    /// Whether the schedule is open at `at` in the time zone `tz` (local weekday and time).
    pub fn is_open(&self, at: Timestamp, tz: &TimeZone) -> bool {
        let local = at.to_zoned(tz.clone());
        let day = local.weekday().to_monday_one_offset() as u8;
        let minute = local.hour() as u16 * 60 + local.minute() as u16;
        self.windows.iter().any(|w| w.is_open(day, minute))
    }
}

fn parse_days(text: &str) -> Result<u8, String> {
    if text.eq_ignore_ascii_case("daily") {
        return Ok(0b111_1111);
    }
    let mut days = 0u8;
    for item in text.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (day_number(first)?, day_number(last)?),
            None => (day_number(item)?, day_number(item)?),
        };
        // A range may wrap over the week's end: `fri-mon` is Friday to Monday.
        let mut day = first;
        loop {
            days |= 1 << (day - 1);
            if day == last {
                break;
            }
            day = day % 7 + 1;
        }
    }
    Ok(days)
}

/// `mon` or `monday` (any case) → 1 … `sun` or `sunday` → 7.
/// Days as the operator writes them: runs of three or more consecutive days as ranges
/// (`mon-fri`), others as a list (`mon,wed`); `None` for every day.
fn format_days(days: u8) -> Option<String> {
    if days == 0b111_1111 {
        return None;
    }
    let mut parts = Vec::new();
    let mut day = 0;
    while day < 7 {
        if days & (1 << day) == 0 {
            day += 1;
            continue;
        }
        let start = day;
        while day + 1 < 7 && days & (1 << (day + 1)) != 0 {
            day += 1;
        }
        match day - start {
            0 => parts.push(DAY_NAMES[start].to_string()),
            1 => parts.push(format!("{},{}", DAY_NAMES[start], DAY_NAMES[day])),
            _ => parts.push(format!("{}-{}", DAY_NAMES[start], DAY_NAMES[day])),
        }
        day += 1;
    }
    Some(parts.join(","))
}

fn day_number(text: &str) -> Result<u8, String> {
    const FULL_NAMES: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let lower = text.trim().to_ascii_lowercase();
    (0..7)
        .find(|&index| lower == DAY_NAMES[index] || lower == FULL_NAMES[index])
        .map(|index| index as u8 + 1)
        .ok_or_else(|| format!("unknown day '{text}' (use mon, tue, wed, thu, fri, sat, sun)"))
}

/// `08:00` → 480; `24:00` → 1440 (only meaningful as an end).
fn parse_time(text: &str) -> Result<u16, String> {
    let bad = || format!("invalid time '{text}': use HH:MM from 00:00 to 24:00");
    let (hours, minutes) = text.trim().split_once(':').ok_or_else(bad)?;
    let two_digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !two_digits(hours) || !two_digits(minutes) {
        return Err(bad());
    }
    let (hours, minutes): (u16, u16) = (
        hours.parse().map_err(|_| bad())?,
        minutes.parse().map_err(|_| bad())?,
    );
    if minutes >= 60 || hours > 24 || (hours == 24 && minutes != 0) {
        return Err(bad());
    }
    Ok(hours * 60 + minutes)
}

fn format_time(minute: u16) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("test instants are valid RFC 3339")
    }

    fn berlin() -> TimeZone {
        TimeZone::get("Europe/Berlin").expect("the bundled database knows Berlin")
    }

    fn schedule(windows: &[&str]) -> Schedule {
        Schedule::new(windows.iter().map(|w| Window::parse(w).unwrap()).collect())
    }

    #[test]
    fn parses_the_operator_syntax_into_stored_json() {
        let cases: &[(&str, Value)] = &[
            (
                "mon-fri 08:00-18:00",
                serde_json::json!({"days": [1, 2, 3, 4, 5], "from": "08:00", "to": "18:00"}),
            ),
            (
                "sat",
                serde_json::json!({"days": [6], "from": "00:00", "to": "24:00"}),
            ),
            (
                "22:00-06:00",
                serde_json::json!({"days": [1, 2, 3, 4, 5, 6, 7], "from": "22:00", "to": "06:00"}),
            ),
            (
                "fri-mon 10:00-12:30",
                serde_json::json!({"days": [1, 5, 6, 7], "from": "10:00", "to": "12:30"}),
            ),
            (
                "Mon,Wednesday,fri-sat",
                serde_json::json!({"days": [1, 3, 5, 6], "from": "00:00", "to": "24:00"}),
            ),
            (
                "daily 09:00-24:00",
                serde_json::json!({"days": [1, 2, 3, 4, 5, 6, 7], "from": "09:00", "to": "24:00"}),
            ),
        ];
        for (text, stored) in cases {
            let window = Window::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(&serde_json::to_value(&window).unwrap(), stored, "{text}");
            let back: Window = serde_json::from_value(stored.clone()).unwrap();
            assert_eq!(back, window, "{text} round-trips");
        }
    }

    #[test]
    fn prints_windows_in_the_syntax_it_reads() {
        for text in [
            "mon-fri 08:00-18:00",
            "sat",
            "22:00-06:00",
            "mon,wed,fri 09:00-12:00",
            "daily",
            "sat,sun 10:00-24:00",
        ] {
            let window = Window::parse(text).unwrap();
            assert_eq!(window.to_text(), text);
            assert_eq!(Window::parse(&window.to_text()).unwrap(), window);
        }
        assert_eq!(Window::parse("fri-mon").unwrap().to_text(), "mon,fri-sun");
    }

    #[test]
    fn rejects_malformed_schedules() {
        for bad in [
            "",
            "mon-fri 8:00-18:00",
            "mon-fri 08:00",
            "mon-fri 08:00-08:00",
            "funday 08:00-10:00",
            "mo 08:00-10:00",
            "mon 25:00-26:00",
            "mon 24:00-02:00",
            "mon 08:60-09:00",
            "mon 08:00-18:00 extra",
        ] {
            assert!(Window::parse(bad).is_err(), "'{bad}' should be refused");
        }
        assert!(
            Schedule::from_json(
                &serde_json::json!([{"days": [8], "from": "08:00", "to": "09:00"}])
            )
            .is_err()
        );
        assert!(Schedule::from_json(&serde_json::json!("mon")).is_err());
    }

    #[test]
    fn reads_a_single_window_object_as_a_schedule() {
        let stored = serde_json::json!({"days": [1], "from": "08:00", "to": "09:00"});
        let schedule = Schedule::from_json(&stored).unwrap();
        assert_eq!(schedule.to_json(), serde_json::json!([stored]));
    }

    #[test]
    fn opens_on_local_weekdays_and_hours() {
        let office = schedule(&["mon-fri 08:00-18:00"]);
        let tz = berlin();
        // 2025-01-06 is a Monday; Berlin is UTC+1 in winter.
        let cases = [
            ("2025-01-06T06:59:59Z", false), // 07:59:59 local
            ("2025-01-06T07:00:00Z", true),  // 08:00 local
            ("2025-01-06T16:59:59Z", true),  // 17:59:59 local
            ("2025-01-06T17:00:00Z", false), // 18:00 local: the end is exclusive
            ("2025-01-11T10:00:00Z", false), // Saturday
            ("2025-01-10T23:30:00Z", false), // Saturday 00:30 local, Friday in UTC
        ];
        for (instant, open) in cases {
            assert_eq!(office.is_open(at(instant), &tz), open, "{instant}");
        }
    }

    #[test]
    fn follows_daylight_saving_time() {
        let morning = schedule(&["daily 08:00-09:00"]);
        let tz = berlin();
        // 2025-03-30 clocks go forward in Berlin: 08:00 local is 06:00 UTC after the switch,
        // 07:00 UTC before it.
        assert!(morning.is_open(at("2025-03-29T07:30:00Z"), &tz));
        assert!(
            !morning.is_open(at("2025-03-30T07:30:00Z"), &tz),
            "09:30 local"
        );
        assert!(
            morning.is_open(at("2025-03-30T06:30:00Z"), &tz),
            "08:30 local"
        );
        // 2025-10-26 clocks go back: 08:00 local is 07:00 UTC again.
        assert!(morning.is_open(at("2025-10-26T07:30:00Z"), &tz));
        assert!(
            !morning.is_open(at("2025-10-26T06:30:00Z"), &tz),
            "07:30 local"
        );
    }

    #[test]
    fn windows_past_midnight_belong_to_the_day_they_start() {
        let late = schedule(&["fri 22:00-06:00"]);
        let utc = TimeZone::UTC;
        // 2025-01-10 is a Friday.
        assert!(!late.is_open(at("2025-01-10T21:59:00Z"), &utc));
        assert!(late.is_open(at("2025-01-10T22:00:00Z"), &utc));
        assert!(
            late.is_open(at("2025-01-11T05:59:00Z"), &utc),
            "Saturday early"
        );
        assert!(!late.is_open(at("2025-01-11T06:00:00Z"), &utc));
        assert!(
            !late.is_open(at("2025-01-11T22:30:00Z"), &utc),
            "Saturday evening"
        );
        assert!(
            !late.is_open(at("2025-01-10T05:00:00Z"), &utc),
            "Friday early"
        );
        let sunday_night = schedule(&["sun 23:00-01:00"]);
        assert!(
            sunday_night.is_open(at("2025-01-13T00:30:00Z"), &utc),
            "Monday 00:30 wraps to Sunday"
        );
    }

    #[test]
    fn any_open_window_opens_the_schedule() {
        let split = schedule(&[
            "mon-fri 08:00-12:00",
            "mon-fri 13:00-17:00",
            "sat 10:00-14:00",
        ]);
        let utc = TimeZone::UTC;
        assert!(split.is_open(at("2025-01-06T09:00:00Z"), &utc));
        assert!(!split.is_open(at("2025-01-06T12:30:00Z"), &utc), "lunch");
        assert!(split.is_open(at("2025-01-06T16:00:00Z"), &utc));
        assert!(split.is_open(at("2025-01-11T11:00:00Z"), &utc));
        assert!(!split.is_open(at("2025-01-12T11:00:00Z"), &utc), "Sunday");
    }
}
