//! Per-client rate limiting: a token bucket per client address (`serve --rate-limit N`
//! requests per second, `--rate-burst N`), checked before every request is dispatched.
//!
//! Owns the buckets and their memory bound. It does not own the 429 answer (the HTTP
//! server builds it from [`Limited`]) or which address a request comes from (the peer
//! address of the TCP connection; `X-Forwarded-For` is not trusted, since any client can
//! set it).
//!
//! The table is split into shards, each a mutex around a hash map, so concurrent requests
//! rarely wait on each other and each check is one hash lookup. Memory stays bounded: a
//! shard drops the buckets of idle clients (those whose bucket has refilled completely,
//! which is exactly when forgetting them changes nothing) every [`SWEEP_INTERVAL`], and
//! holds at most [`MAX_CLIENTS_PER_SHARD`] clients. When a shard is full of active clients
//! (hundreds of thousands of addresses at once), a new address is let through untracked:
//! per-address limits cannot stop such a crowd anyway, and refusing strangers would hurt
//! real partners more than it slows the crowd.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Number of independently locked parts of the table.
const SHARDS: usize = 16;

/// How often a shard forgets idle clients.
const SWEEP_INTERVAL: Duration = Duration::from_secs(10);

/// Most clients one shard tracks (so at most `SHARDS` times this in all, a few MiB).
const MAX_CLIENTS_PER_SHARD: usize = 16 * 1024;

/// A full shard sweeps at most this often, so a crowd of new addresses does not turn every
/// request into a scan of the shard.
const FULL_SHARD_SWEEP_GAP: Duration = Duration::from_secs(1);

/// Rate and burst as `serve` takes them; either being 0 turns limiting off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Tokens added per second: the sustained request rate of one client.
    pub per_second: u32,
    /// Bucket size: how many requests a client may send at once after being idle.
    pub burst: u32,
}

impl Default for RateLimit {
    /// Generous enough for a busy partner pushing leads from one address; the ingest
    /// benchmark, which runs far above this from one address, passes `--rate-limit 0`.
    fn default() -> Self {
        RateLimit {
            per_second: 2000,
            burst: 4000,
        }
    }
}

impl RateLimit {
    pub fn is_enabled(&self) -> bool {
        self.per_second > 0 && self.burst > 0
    }
}

/// A request that was refused: the client may retry after this many whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after_secs: u64,
}

/// Clients are keyed by IPv4 address or IPv6 /64 prefix: one IPv6 host usually owns a whole
/// /64 and could otherwise take a fresh bucket per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    V4(u32),
    V6Prefix(u64),
}

impl ClientKey {
    fn of(ip: IpAddr) -> ClientKey {
        match ip {
            IpAddr::V4(v4) => ClientKey::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey::V4(u32::from(v4)),
                None => ClientKey::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

struct Bucket {
    tokens: f64,
    /// Nanoseconds since the limiter's origin when `tokens` was last brought up to date.
    updated: u64,
}

struct Shard {
    buckets: HashMap<ClientKey, Bucket>,
    last_sweep: u64,
}

pub struct RateLimiter {
    per_nano: f64,
    burst: f64,
    /// How long an idle bucket takes to refill completely, in nanoseconds.
    refill_nanos: u64,
    origin: Instant,
    shard_hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
}

impl RateLimiter {
    /// A limiter for `limit`, or `None` when limiting is off.
    pub fn new(limit: RateLimit) -> Option<RateLimiter> {
        if !limit.is_enabled() {
            return None;
        }
        let per_nano = f64::from(limit.per_second) / 1e9;
        let burst = f64::from(limit.burst);
        Some(RateLimiter {
            per_nano,
            burst,
            refill_nanos: (burst / per_nano).ceil() as u64,
            origin: Instant::now(),
            shard_hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        buckets: HashMap::new(),
                        last_sweep: 0,
                    })
                })
                .collect(),
        })
    }

    /// A limiter of `per_minute` tokens a minute with buckets of `burst`, for rare events
    /// such as the console's failed logins; `None` when either is 0.
    pub fn per_minute(per_minute: u32, burst: u32) -> Option<RateLimiter> {
        let mut limiter = RateLimiter::new(RateLimit {
            per_second: per_minute,
            burst,
        })?;
        limiter.per_nano /= 60.0;
        limiter.refill_nanos = (limiter.burst / limiter.per_nano).ceil() as u64;
        Some(limiter)
    }

    /// Takes one token from `ip`'s bucket, or says how long until one is there.
    pub fn check(&self, ip: IpAddr) -> Result<(), Limited> {
        self.check_at(ip, self.now(), true)
    }

    /// Whether `ip` has a token left, without taking it.
    pub fn peek(&self, ip: IpAddr) -> Result<(), Limited> {
        self.check_at(ip, self.now(), false)
    }

    #[cfg(test)]
    fn peek_at(&self, ip: IpAddr, now: u64) -> Result<(), Limited> {
        self.check_at(ip, now, false)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Clients with a bucket right now (a gauge for `/metrics`).
    pub fn tracked_clients(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).buckets.len())
            .sum()
    }

    fn check_at(&self, ip: IpAddr, now: u64, take: bool) -> Result<(), Limited> {
        let key = ClientKey::of(ip);
        let shard = &self.shards[self.shard_hasher.hash_one(key) as usize % SHARDS];
        let mut shard = lock(shard);

        let since_sweep = now.saturating_sub(shard.last_sweep);
        let full = shard.buckets.len() >= MAX_CLIENTS_PER_SHARD;
        if since_sweep >= SWEEP_INTERVAL.as_nanos() as u64
            || (full && since_sweep >= FULL_SHARD_SWEEP_GAP.as_nanos() as u64)
        {
            let refill = self.refill_nanos;
            shard
                .buckets
                .retain(|_, bucket| now.saturating_sub(bucket.updated) < refill);
            shard.last_sweep = now;
        }

        if let Some(bucket) = shard.buckets.get_mut(&key) {
            let elapsed = now.saturating_sub(bucket.updated) as f64;
            bucket.tokens = (bucket.tokens + elapsed * self.per_nano).min(self.burst);
            bucket.updated = now;
            if bucket.tokens >= 1.0 {
                if take {
                    bucket.tokens -= 1.0;
                }
                return Ok(());
            }
            let missing_nanos = (1.0 - bucket.tokens) / self.per_nano;
            let retry_after_secs = (missing_nanos / 1e9).ceil().max(1.0) as u64;
            return Err(Limited { retry_after_secs });
        }
        if take && shard.buckets.len() < MAX_CLIENTS_PER_SHARD {
            shard.buckets.insert(
                key,
                Bucket {
                    tokens: self.burst - 1.0,
                    updated: now,
                },
            );
        }
        Ok(())
    }
}

fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    // A panic while holding a shard lock can only come from the standard library's map;
    // the buckets are still usable, so recover the guard instead of failing every request.
    shard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn limiter(per_second: u32, burst: u32) -> RateLimiter {
        RateLimiter::new(RateLimit { per_second, burst }).expect("limit is enabled")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("test addresses parse")
    }

    #[test]
    fn zero_turns_limiting_off() {
        assert!(
            RateLimiter::new(RateLimit {
                per_second: 0,
                burst: 10
            })
            .is_none()
        );
        assert!(
            RateLimiter::new(RateLimit {
                per_second: 10,
                burst: 0
            })
            .is_none()
        );
    }

    #[test]
    fn burst_then_refill_at_the_rate() {
        let limiter = limiter(2, 3);
        let client = ip("192.0.2.1");
        for _ in 0..3 {
            assert_eq!(limiter.check_at(client, 0, true), Ok(()));
        }
        assert_eq!(
            limiter.check_at(client, 0, true),
            Err(Limited {
                retry_after_secs: 1
            })
        );
        // Two tokens per second: one is back after half a second, not before.
        assert!(limiter.check_at(client, SECOND / 2 - 1_000, true).is_err());
        assert_eq!(limiter.check_at(client, SECOND / 2, true), Ok(()));
        assert!(limiter.check_at(client, SECOND / 2, true).is_err());
        // Other clients have their own bucket.
        assert_eq!(limiter.check_at(ip("192.0.2.2"), SECOND / 2, true), Ok(()));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let limiter = limiter(1, 1);
        let client = ip("192.0.2.1");
        assert_eq!(limiter.check_at(client, 0, true), Ok(()));
        // 0.9 s until the next token: the header says 1, never 0.
        assert_eq!(
            limiter.check_at(client, SECOND / 10, true),
            Err(Limited {
                retry_after_secs: 1
            })
        );
        assert_eq!(limiter.check_at(client, SECOND + SECOND / 10, true), Ok(()));
    }

    #[test]
    fn ipv6_clients_share_their_slash_64() {
        let limiter = limiter(1, 2);
        assert_eq!(limiter.check_at(ip("2001:db8:1:2::1"), 0, true), Ok(()));
        assert_eq!(limiter.check_at(ip("2001:db8:1:2::ffff"), 0, true), Ok(()));
        assert!(
            limiter
                .check_at(ip("2001:db8:1:2:abcd::9"), 0, true)
                .is_err()
        );
        assert_eq!(limiter.check_at(ip("2001:db8:1:3::1"), 0, true), Ok(()));
        // An IPv4-mapped address is the IPv4 client.
        assert_eq!(limiter.check_at(ip("198.51.100.7"), 0, true), Ok(()));
        assert_eq!(limiter.check_at(ip("::ffff:198.51.100.7"), 0, true), Ok(()));
        assert!(limiter.check_at(ip("198.51.100.7"), 0, true).is_err());
    }

    #[test]
    fn idle_clients_are_forgotten() {
        let limiter = limiter(10, 10);
        for n in 0..1000u32 {
            let client = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            assert_eq!(limiter.check_at(client, 0, true), Ok(()));
        }
        assert_eq!(limiter.tracked_clients(), 1000);
        // By the next sweep every bucket has refilled: only the clients seen since remain.
        let late = SWEEP_INTERVAL.as_nanos() as u64;
        for shard in 0..SHARDS * 64 {
            let client = IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + shard as u32));
            let _ = limiter.check_at(client, late, true);
        }
        assert_eq!(limiter.tracked_clients(), SHARDS * 64);
    }

    #[test]
    fn a_full_shard_admits_newcomers_untracked() {
        let limiter = limiter(1, 1);
        let mut n = 0u32;
        // Fill every shard to its bound with clients that stay active (no refill at t=0).
        while limiter.tracked_clients() < SHARDS * MAX_CLIENTS_PER_SHARD {
            let client = IpAddr::V4(std::net::Ipv4Addr::from(n));
            let _ = limiter.check_at(client, 0, true);
            n += 1;
        }
        let stranger = IpAddr::V4(std::net::Ipv4Addr::from(u32::MAX));
        assert_eq!(limiter.check_at(stranger, 1, true), Ok(()));
        assert_eq!(limiter.check_at(stranger, 1, true), Ok(()));
        assert_eq!(limiter.tracked_clients(), SHARDS * MAX_CLIENTS_PER_SHARD);
    }

    #[test]
    fn per_minute_refills_slowly_and_peek_takes_nothing() {
        let limiter = RateLimiter::per_minute(6, 2).expect("limit is enabled");
        let client: IpAddr = "192.0.2.9".parse().unwrap();
        assert_eq!(limiter.peek_at(client, 0), Ok(()));
        assert_eq!(limiter.check_at(client, 0, true), Ok(()));
        assert_eq!(limiter.check_at(client, 0, true), Ok(()));
        assert_eq!(
            limiter.peek_at(client, 0),
            Err(Limited {
                retry_after_secs: 10
            })
        );
        assert!(limiter.peek_at(client, 9 * 1_000_000_000).is_err());
        assert_eq!(limiter.peek_at(client, 10 * 1_000_000_000), Ok(()));
        assert_eq!(
            limiter.peek_at(client, 10 * 1_000_000_000),
            Ok(()),
            "peek took nothing"
        );
    }
}
