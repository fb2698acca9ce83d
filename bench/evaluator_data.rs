//! Realistic synthetic outcomes for the evaluator (run by `bench/evaluator.sh`): leads sent
//! over HTTP to a running `leadrelay serve`, auto-delivered to one buyer, and answered by
//! that buyer over HTTP (acknowledged, rejected, or acknowledged then cancelled) the way
//! the model below says. Everything goes through the real interface; nothing is written to
//! the database any other way.
//!
//! The configuration (made by the script with the CLI): workspace `ws` (Europe/Berlin),
//! product `solar` with fields `homeowner` (required, yes|no) and `timeframe` (optional,
//! now|3months|12months|researching), three channels with eight sources, each with the
//! default duplicate rule (email, phone; 30 days; review) in its channel, and buyer `b`
//! subscribed to `solar` without filters.
//!
//! # The world it simulates (the assumptions)
//!
//! A solar lead business. Each lead is a person with:
//! - a **source** with its own volume and lead quality: own forms (`landing` 15%,
//!   `calculator` 10%), partners (`partner-a`, `partner-b`, 15% each), affiliates
//!   (`affiliate-x` 15%, `affiliate-y` 10%), social (`fb-ads` 12%) and co-registration
//!   (`coreg` 8%). Quality differs by source beyond anything in the lead's fields
//!   (intent, fraud, incentivised sign-ups): the source's offset on the buyer's log-odds
//!   runs from +0.8 (`landing`) to −1.4 (`coreg`).
//! - contact data whose quality also depends on the source: a valid phone for 92% of own
//!   form leads, 85% of partners', 75% of affiliates' and social, 60% of co-registration;
//!   a valid email for 97%; the full address for 70% of own forms and less elsewhere;
//!   consent granted with a capture time for 90% (own) down to 70% (co-registration),
//!   granted without a time for most of the rest.
//! - answers: `homeowner` yes for 80% (60% for co-registration); `timeframe` given by 70%:
//!   now 20%, 3 months 30%, 12 months 30%, researching 20%.
//! - a **capture time**, spread over 60 days with a daily curve peaking in the evening;
//!   6% of own-form leads come at night (0–5 h local), 15% of affiliate, social and
//!   co-registration leads (bots and incentivised traffic happen at night).
//! - a **postal code** of the German form, its two-digit prefix uniform over 01–99. The
//!   buyer serves the whole country: the region has no effect on the outcome.
//! - **shopped leads**: 12% of the people are sold again later through a source in
//!   another channel (the duplicate rule looks within a channel), one to two more times,
//!   at least 1,000 leads later in the stream.
//!
//! The buyer's answer. With one buyer (`b1`) each lead is sold once; with `--buyers 3`
//! the channels are in multi mode and each lead goes to `b1`, `b2` and `b3`, whose
//! judgement differs by +0.2, 0 and −0.2 on the log-odds, each answering on its own. The
//! chance that a lead is good (acknowledged) is the logistic of
//! `0.6 + source offset + 2.2·(valid phone − 1) + 0.4·valid email + 0.8 consent with time
//! (0.3 without) + 0.3·address share − 2.0·(homeowner = no) + timeframe (now +0.6,
//! 3 months +0.3, 12 months 0, researching −0.6, none −0.2) − 1.1·(times sold before) −
//! 0.4·(captured at night)`. A good lead is acknowledged; a bad one rejected (85%) or
//! acknowledged and then cancelled (15%). 10% of the transactions get no answer yet and
//! stay `delivered`. The labels are drawn with a seeded generator, so a run is repeatable.
//!
//! Usage: `evaluator_data --url URL --secret BUYER_SECRET [--leads N] [--buyers 1|3]
//! [--clients C] [--seed S]`.

use std::sync::Mutex;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

#[path = "client.rs"]
mod client;
use client::{agent, post};

struct Settings {
    url: String,
    /// Buyer `bK`'s secret is this with `-K` appended.
    secret: String,
    buyers: usize,
    leads: usize,
    clients: usize,
    seed: u64,
}

fn settings() -> Settings {
    let mut settings = Settings {
        url: String::new(),
        secret: String::new(),
        buyers: 1,
        leads: 100_000,
        clients: 4,
        seed: 20,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_else(|| {
            panic!(
                "usage: evaluator_data --url URL --secret S [--leads N] [--clients C] [--seed S]"
            )
        });
        let number = || value.parse().expect("a number");
        match pair[0].as_str() {
            "--url" => settings.url = value.clone(),
            "--secret" => settings.secret = value.clone(),
            "--leads" => settings.leads = number(),
            "--buyers" => settings.buyers = number(),
            "--clients" => settings.clients = number(),
            "--seed" => settings.seed = number() as u64,
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!settings.url.is_empty() && !settings.secret.is_empty());
    assert!((1..=MAX_BUYERS).contains(&settings.buyers));
    settings
}

/// (source, channel, volume share, quality offset, kind)
const SOURCES: [(&str, &str, f64, f64, Kind); 8] = [
    ("landing", "web", 0.15, 0.8, Kind::Own),
    ("calculator", "web", 0.10, 0.6, Kind::Own),
    ("partner-a", "partners", 0.15, 0.3, Kind::Partner),
    ("partner-b", "partners", 0.15, 0.0, Kind::Partner),
    ("affiliate-x", "partners", 0.15, -0.6, Kind::Affiliate),
    ("affiliate-y", "partners", 0.10, -0.9, Kind::Affiliate),
    ("fb-ads", "social", 0.12, -0.3, Kind::Affiliate),
    ("coreg", "social", 0.08, -1.4, Kind::Coreg),
];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Own,
    Partner,
    Affiliate,
    Coreg,
}

/// One lead as sent, with each buyer's answer to it.
struct Planned {
    source: usize,
    body: Value,
    answers: [Answer; MAX_BUYERS],
}

/// What buyer `b1`, `b2`, … answers when it gets the lead.
#[derive(Clone, Copy)]
struct Answer {
    good: bool,
    /// Whether the buyer answers at all (else the transaction stays `delivered`).
    answered: bool,
    /// A bad lead the buyer first acknowledges, then cancels.
    cancel: bool,
}

/// Buyers `b1`… of a multi-mode channel set-up; each judges a little differently.
const MAX_BUYERS: usize = 3;
const BUYER_OFFSETS: [f64; MAX_BUYERS] = [0.2, 0.0, -0.2];

/// A person as first seen: their data, reused when the lead is sold again.
#[derive(Clone)]
struct Person {
    id: usize,
    phone: bool,
    email: bool,
    address: usize,
    consent: u8,
    homeowner: bool,
    timeframe: Option<usize>,
    postal: u32,
}

fn pick(rng: &mut StdRng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

fn person(rng: &mut StdRng, id: usize, kind: Kind) -> Person {
    let (phone, address_full, consent_time) = match kind {
        Kind::Own => (0.92, 0.70, 0.90),
        Kind::Partner => (0.85, 0.50, 0.85),
        Kind::Affiliate => (0.75, 0.35, 0.78),
        Kind::Coreg => (0.60, 0.20, 0.70),
    };
    let consent = if rng.random::<f64>() < consent_time {
        2
    } else if rng.random::<f64>() < 0.7 {
        1
    } else {
        0
    };
    Person {
        id,
        phone: rng.random::<f64>() < phone,
        email: rng.random::<f64>() < 0.97,
        address: if rng.random::<f64>() < address_full {
            5
        } else {
            rng.random_range(1..5)
        },
        consent,
        homeowner: rng.random::<f64>() < if kind == Kind::Coreg { 0.6 } else { 0.8 },
        timeframe: (rng.random::<f64>() < 0.7).then(|| pick(rng, &[0.2, 0.3, 0.3, 0.2])),
        postal: rng.random_range(1..100) * 1000 + rng.random_range(0..1000),
    }
}

/// The local hour of a capture: an evening-heavy daily curve, more night traffic for
/// affiliate, social and co-registration sources.
fn hour(rng: &mut StdRng, kind: Kind) -> u32 {
    let night = if kind == Kind::Own { 0.06 } else { 0.15 };
    if rng.random::<f64>() < night {
        return rng.random_range(0..6);
    }
    // 6–23 h, heavier in the evening.
    let weights: Vec<f64> = (6..24).map(|h| if h >= 17 { 2.0 } else { 1.0 }).collect();
    6 + pick(rng, &weights) as u32
}

const TIMEFRAMES: [(&str, f64); 4] = [
    ("now", 0.6),
    ("3months", 0.3),
    ("12months", 0.0),
    ("researching", -0.6),
];

/// When lead `n` of `total` was captured, at `local_hour` in Berlin: the days of the last
/// 60 run in stream order.
fn captured_at(rng: &mut StdRng, n: usize, total: usize, local_hour: u32) -> String {
    let berlin = jiff::tz::TimeZone::get("Europe/Berlin").expect("the bundled zone database");
    let today = jiff::Timestamp::now().to_zoned(berlin.clone()).date();
    let days_back = 60 - (n as i64 * 60) / total.max(1) as i64;
    let date = today
        .checked_sub(jiff::Span::new().days(days_back))
        .expect("60 days back is a date");
    let local = date.at(
        local_hour as i8,
        rng.random_range(0..60),
        rng.random_range(0..60),
        0,
    );
    let at = local.to_zoned(berlin).expect("a Berlin time").timestamp();
    leadrelay::clock::iso(at.as_millisecond())
}

fn plan(
    rng: &mut StdRng,
    (n, total): (usize, usize),
    p: &Person,
    source: usize,
    sold_before: u32,
) -> Planned {
    let (name, _, _, offset, kind) = SOURCES[source];
    let local_hour = hour(rng, kind);
    let mut body = json!({
        "externalId": format!("{name}-{n}"),
        "firstName": "Sam",
        "lastName": format!("Rivers{}", p.id),
        "email": if p.email { format!("sam{}@example.org", p.id) } else { format!("sam{}-at-example", p.id) },
        "productSlug": "solar",
        "triggerAutoDelivery": true,
        "capturedAt": captured_at(rng, n, total, local_hour),
        "fieldValues": {"homeowner": if p.homeowner { "yes" } else { "no" }},
    });
    if p.phone {
        body["phone"] = json!(format!("+49 30 {:08}", p.id));
    } else {
        body["phone"] = json!("12");
    }
    let address = [
        ("postalCode", format!("{:05}", p.postal)),
        ("city", "Berlin".into()),
        ("street", "Hauptstr.".into()),
        ("houseNumber", "5".into()),
        ("country", "DE".into()),
    ];
    for (field, value) in address.iter().take(p.address) {
        body[*field] = json!(value);
    }
    if p.consent > 0 {
        body["consentStatus"] = json!("granted");
        if p.consent == 2 {
            body["consentCapturedAt"] = body["capturedAt"].clone();
        }
    }
    let mut eta = 0.6 + offset;
    eta += 2.2 * (p.phone as u8 as f64 - 1.0);
    eta += 0.4 * p.email as u8 as f64;
    eta += [0.0, 0.3, 0.8][p.consent as usize];
    eta += 0.3 * p.address as f64 / 5.0;
    if !p.homeowner {
        eta -= 2.0;
    }
    match p.timeframe {
        Some(t) => {
            body["fieldValues"]["timeframe"] = json!(TIMEFRAMES[t].0);
            eta += TIMEFRAMES[t].1;
        }
        None => eta -= 0.2,
    }
    eta -= 1.1 * sold_before as f64;
    if local_hour < 6 {
        eta -= 0.4;
    }
    let answers = BUYER_OFFSETS.map(|offset| {
        let good = rng.random::<f64>() < 1.0 / (1.0 + (-(eta + offset)).exp());
        Answer {
            good,
            answered: rng.random::<f64>() >= 0.10,
            cancel: !good && rng.random::<f64>() < 0.15,
        }
    });
    Planned {
        source,
        body,
        answers,
    }
}

/// The whole stream, in order.
fn stream(settings: &Settings) -> Vec<Planned> {
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let shares: Vec<f64> = SOURCES.iter().map(|s| s.2).collect();
    // Resales waiting for their turn: (position, person, source, times sold before).
    let mut resales: Vec<(usize, Person, usize, u32)> = Vec::new();
    let mut planned = Vec::with_capacity(settings.leads);
    let mut people = 0;
    while planned.len() < settings.leads {
        let n = planned.len();
        if let Some(k) = resales.iter().position(|r| r.0 <= n) {
            let (_, p, source, before) = resales.swap_remove(k);
            planned.push(plan(&mut rng, (n, settings.leads), &p, source, before));
            continue;
        }
        let source = pick(&mut rng, &shares);
        people += 1;
        let p = person(&mut rng, people, SOURCES[source].4);
        if rng.random::<f64>() < 0.12 {
            let times = rng.random_range(1..=2);
            let mut at = n;
            for before in 1..=times {
                at += 1000 + rng.random_range(0..5000);
                // Another channel than every earlier sale: the rule looks within one.
                let channel = SOURCES[source].1;
                let others: Vec<usize> = (0..SOURCES.len())
                    .filter(|&s| SOURCES[s].1 != channel)
                    .collect();
                let other = others[rng.random_range(0..others.len())];
                let other_channel = SOURCES[other].1;
                if before == 2 {
                    // The third sale must avoid both earlier channels.
                    let third: Vec<usize> = (0..SOURCES.len())
                        .filter(|&s| SOURCES[s].1 != channel && SOURCES[s].1 != other_channel)
                        .collect();
                    let pick = third[rng.random_range(0..third.len())];
                    resales.push((at, p.clone(), pick, before));
                } else {
                    resales.push((at, p.clone(), other, before));
                }
            }
        }
        planned.push(plan(&mut rng, (n, settings.leads), &p, source, 0));
    }
    planned
}

/// Runs `work(agent, item)` for every item on `clients` threads.
fn parallel<T: Sync>(items: &[T], clients: usize, work: impl Fn(&ureq::Agent, &T) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| {
                let agent = agent();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    work(&agent, item);
                }
            });
        }
    });
}

fn main() {
    let settings = settings();
    let planned = stream(&settings);
    let started = Instant::now();
    // Each window of 1,000 leads goes out as one batch per source (at most 100 leads), on
    // all clients at once; the next window starts when it is done, so a resale (at least
    // 1,000 leads later) always comes after the first sale.
    // (transaction, lead, buyer index)
    let transactions: Mutex<Vec<(String, usize, usize)>> = Mutex::new(Vec::new());
    let mut not_delivered = 0usize;
    let skipped = Mutex::new(0usize);
    for (w, window) in planned.chunks(1000).enumerate() {
        let base = w * 1000;
        let mut batches: Vec<(usize, Vec<usize>)> = Vec::new();
        for source in 0..SOURCES.len() {
            let members: Vec<usize> = (0..window.len())
                .filter(|&i| window[i].source == source)
                .map(|i| base + i)
                .collect();
            for chunk in members.chunks(100) {
                batches.push((source, chunk.to_vec()));
            }
        }
        parallel(&batches, settings.clients, |agent, (source, members)| {
            let (name, channel, ..) = SOURCES[*source];
            let url = format!(
                "{}/api/webhooks/channels/{channel}/sources/{name}/leads",
                settings.url
            );
            let leads: Vec<&Value> = members.iter().map(|&i| &planned[i].body).collect();
            let (status, answer) = post(agent, &url, None, &json!({ "leads": leads }));
            assert_eq!(status, 201, "{answer}");
            let items = answer["items"].as_array().expect("batch items");
            let mut found = Vec::new();
            for (item, &i) in items.iter().zip(members) {
                let deliveries = item["autoDelivery"]["requests"][0]["deliveries"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if deliveries.is_empty() {
                    *skipped.lock().expect("no poisoning") += 1;
                }
                for delivery in deliveries {
                    let txn = delivery["transactionId"]
                        .as_str()
                        .expect("a transaction id");
                    let buyer = delivery["buyerAccountId"].as_str().expect("a buyer");
                    let k: usize = buyer[1..].parse().expect("buyers are b1, b2, b3");
                    found.push((txn.to_string(), i, k - 1));
                }
            }
            transactions.lock().expect("no poisoning").extend(found);
        });
        if w % 100 == 99 {
            eprintln!(
                "{} leads sent in {:.0?}",
                base + window.len(),
                started.elapsed()
            );
        }
    }
    not_delivered += skipped.into_inner().expect("no poisoning");
    let ingested = started.elapsed();
    let mut transactions = transactions.into_inner().expect("no poisoning");
    transactions.sort_by_key(|(_, i, k)| (*i, *k));
    let confirmation = format!("{}/api/webhooks/partner-confirmation", settings.url);
    let cancellation = format!("{}/api/webhooks/partner-cancellation", settings.url);
    let answered = Instant::now();
    let counts = Mutex::new([0usize; 4]);
    parallel(&transactions, settings.clients * 2, |agent, (txn, i, k)| {
        let lead = &planned[*i].answers[*k];
        let secret = format!("{}-{}", settings.secret, k + 1);
        if !lead.answered {
            counts.lock().expect("no poisoning")[3] += 1;
            return;
        }
        let status = if lead.good || lead.cancel {
            "acknowledged"
        } else {
            "rejected"
        };
        let body = json!({"transactionId": txn, "status": status});
        let (code, answer) = post(agent, &confirmation, Some(&secret), &body);
        assert_eq!(code, 200, "{answer}");
        let kind = if lead.cancel {
            let body = json!({"transactionId": txn, "reason": "customer withdrew"});
            let (code, answer) = post(agent, &cancellation, Some(&secret), &body);
            assert_eq!(code, 200, "{answer}");
            2
        } else if lead.good {
            0
        } else {
            1
        };
        counts.lock().expect("no poisoning")[kind] += 1;
    });
    let [good, rejected, cancelled, open] = counts.into_inner().expect("no poisoning");
    println!(
        "evaluator data: {} leads sent in {:.1?}; {} transactions ({} not delivered); answers in {:.1?}: {good} acknowledged, {rejected} rejected, {cancelled} cancelled, {open} unanswered",
        planned.len(),
        ingested,
        transactions.len(),
        not_delivered,
        answered.elapsed(),
    );
}
