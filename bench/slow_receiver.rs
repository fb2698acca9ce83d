//! Slow buyers on their own: `cargo run --release --example slow_receiver -- --buyers 20
//! --delay 200 --hang 2` listens on one port per buyer (127.0.0.1, ports chosen by the
//! system), prints `buyer N http://127.0.0.1:PORT/leads` per buyer, answers 200 after the
//! delay (milliseconds) and never answers on the last `--hang` buyers. With `--bid EUROS`
//! every buyer is a bidding buyer's endpoint instead: after the delay buyer N answers a bid
//! of EUROS + N (bench/ping.sh). Runs until killed; prints the number of requests received
//! every 5 seconds on stderr.

#[path = "support/receiver.rs"]
mod receiver;

use std::time::Duration;

use receiver::{Behaviour, Receivers};

fn main() {
    let (mut buyers, mut delay, mut hang) = (20usize, 200u64, 0usize);
    let mut bid: Option<i64> = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair
            .get(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| {
                panic!("usage: slow_receiver [--buyers N] [--delay MS] [--hang N] [--bid EUROS]")
            });
        match pair[0].as_str() {
            "--buyers" => buyers = value as usize,
            "--delay" => delay = value,
            "--hang" => hang = value as usize,
            "--bid" => bid = Some(value as i64),
            other => panic!("unknown flag {other}"),
        }
    }
    let behaviours = (0..buyers)
        .map(|n| {
            if let Some(euros) = bid {
                Behaviour::Bid {
                    delay: Duration::from_millis(delay),
                    cents: (euros + n as i64) * 100,
                }
            } else if n >= buyers.saturating_sub(hang) {
                Behaviour::Hang
            } else {
                Behaviour::Delay(Duration::from_millis(delay))
            }
        })
        .collect();
    let receivers = Receivers::start(behaviours, 1);
    for n in 0..buyers {
        println!("buyer {n} {}", receivers.url(n));
    }
    loop {
        std::thread::sleep(Duration::from_secs(5));
        eprintln!(
            "received {}",
            receivers
                .arrivals
                .count
                .load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}
