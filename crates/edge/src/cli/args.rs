//! Flags of the configuration commands and `serve`. Values are checked while parsing
//! (`value_parser`), so a bad amount, duration, time zone or enum value is a usage error
//! with exit code 2. Every flag has a one-line help and every command an example (its
//! `after_help`); `tests/cli_help.rs` holds both to that.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::autodelivery::schedule::Window;
use crate::config::buyer::Filter;
use crate::config::product::FieldDef;
use crate::config::workspace::SuppressionAction;

/// A non-negative amount (`--price 12.50`), rounded half away from zero to cents. An
/// amount flag's value out of range never gets here: [`super::parse_from`] refuses it first
/// (exit 1, DESIGN.md section 11).
pub(crate) fn money(text: &str) -> Result<i64, String> {
    crate::money::parse_cents(text).map_err(|e| match e {
        crate::money::AmountError::Negative(_) => format!("{e}; {DEBIT_HINT}"),
        e => e.to_string(),
    })
}

/// Where a user who typed a negative price or amount is sent: the one command that debits.
pub(crate) const DEBIT_HINT: &str =
    "to debit a buyer's balance use `leadrelay buyer adjust BUYER --amount=-5 --reason R`";

/// An amount that may be negative (`--amount=-5` of an adjustment).
pub(crate) fn signed_money(text: &str) -> Result<i64, String> {
    crate::money::parse_signed_cents(text).map_err(|e| e.to_string())
}

/// A value that may be `none` to clear it (`--daily-cap none`, `--supplier none`).
#[derive(Debug, Clone)]
pub struct OrNone<T>(pub Option<T>);

fn money_or_none(text: &str) -> Result<OrNone<i64>, String> {
    match text {
        "none" => Ok(OrNone(None)),
        _ => money(text).map(|cents| OrNone(Some(cents))),
    }
}

fn count_or_none(text: &str) -> Result<OrNone<i64>, String> {
    match text {
        "none" => Ok(OrNone(None)),
        _ => match text.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(OrNone(Some(n))),
            _ => Err(format!(
                "expected a whole number of 0 or more, or none, not '{text}'"
            )),
        },
    }
}

/// A percentage with up to two decimals, in hundredths of a percent (`37.5` → 3750).
fn share_or_none(text: &str) -> Result<OrNone<i64>, String> {
    match text {
        "none" => Ok(OrNone(None)),
        _ => match crate::money::parse_cents(text) {
            Ok(bp) if (0..=10_000).contains(&bp) => Ok(OrNone(Some(bp))),
            _ => Err(format!("expected a percentage from 0 to 100, not '{text}'")),
        },
    }
}

/// A ping's time to live: a duration of 1 ms to 1 day, in ms.
fn ping_ttl(text: &str) -> Result<i64, String> {
    let ttl = crate::duration::parse(text).map_err(|e| e.to_string())?;
    match i64::try_from(ttl.as_millis()) {
        Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(ms),
        _ => Err(format!("a ping's time to live is 1ms to 1d, not '{text}'")),
    }
}

fn id_or_none<Id: From<String>>(text: &str) -> Result<OrNone<Id>, String> {
    match text {
        "none" => Ok(OrNone(None)),
        _ => Ok(OrNone(Some(Id::from(text.to_string())))),
    }
}

fn timezone(text: &str) -> Result<String, String> {
    crate::config::workspace::check_timezone(text).map(|()| text.to_string())
}

/// `on` or `off`, exactly as the help says.
pub(crate) fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, not '{text}'")),
    }
}

pub(super) fn positive_duration(text: &str) -> Result<Duration, String> {
    match crate::duration::parse_or_seconds(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("the duration must be greater than 0".into()),
        d => Ok(d),
    }
}

/// A workspace's `--suppression-action`.
fn suppression_action(text: &str) -> Result<SuppressionAction, String> {
    SuppressionAction::parse(text)
        .ok_or_else(|| format!("unknown action '{text}': use reject or flag"))
}

/// A workspace's retention: a duration (`180d`) or `none` (kept for ever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<std::time::Duration>);

fn retention(text: &str) -> Result<Retention, String> {
    if matches!(text.trim(), "none" | "off") {
        return Ok(Retention(None));
    }
    match crate::duration::parse(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("the retention must be longer than 0 (or none)".into()),
        d => Ok(Retention(Some(d))),
    }
}

/// An age (`--older-than 180d`): a whole number with a unit, more than 0.
pub(crate) fn age(text: &str) -> Result<std::time::Duration, String> {
    match crate::duration::parse(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("the age must be longer than 0".into()),
        d => Ok(d),
    }
}

/// A rotation's overlap: any duration, 0 included (cut the old secret off at once).
fn overlap(text: &str) -> Result<Duration, String> {
    crate::duration::parse(text).map_err(|e| e.to_string())
}

fn percent(text: &str) -> Result<i64, String> {
    match text.parse::<i64>() {
        Ok(n) if (0..=100).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from 0 to 100, not '{text}'"
        )),
    }
}

/// A comma-separated list given as one flag value (`--capabilities confirm,payout`).
#[derive(Debug, Clone)]
pub struct List(pub Vec<String>);

fn capability_list(text: &str) -> Result<List, String> {
    crate::config::buyer::parse_capabilities(text).map(List)
}

fn dedupe_field_list(text: &str) -> Result<List, String> {
    crate::config::source::parse_dedupe_fields(text).map(List)
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DeliveryModeArg {
    Exclusive,
    Multi,
}

/// The portal's address in a `source docs --share` link: `serve`'s default portal listener.
pub const DEFAULT_PORTAL_URL: &str = "http://127.0.0.1:8082";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DocsFormatArg {
    Markdown,
    Html,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ResultDetailArg {
    Summary,
    Full,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DedupeScopeArg {
    Channel,
    Table,
    Workspace,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DedupeActionArg {
    Review,
    Reject,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlanArg {
    Postpaid,
    Prepaid,
}

/// How a subscription prices a lead. Only `fixed` today; bids come with ping/post.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PricingArg {
    /// The subscription's --price.
    Fixed,
    /// Asked per lead: a signed bid request to --bid-url.
    Bid,
}

/// A bid timeout: 1 ms to 60 s, in ms.
fn bid_timeout(text: &str) -> Result<i64, String> {
    let timeout = crate::duration::parse(text).map_err(|e| e.to_string())?;
    match i64::try_from(timeout.as_millis()) {
        Ok(ms) if (1..=60_000).contains(&ms) => Ok(ms),
        _ => Err(format!("a bid timeout is 1ms to 60s, not '{text}'")),
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  leadrelay serve --listen 0.0.0.0:8080 --delivery-concurrency 512 --delivery-per-buyer 32"
)]
pub struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, env = "LEADRELAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Webhook sends in flight at most, over all buyers (tasks on the outbox's runtime,
    /// not threads; `--delivery-workers` is an old name of it).
    #[arg(
        long,
        alias = "delivery-workers",
        default_value_t = 256,
        value_parser = clap::value_parser!(u16).range(1..=4096)
    )]
    pub delivery_concurrency: u16,
    /// Webhook sends in flight at most to one buyer: all that a buyer whose endpoint hangs
    /// can hold (the others' events go out as if it did not exist).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub delivery_per_buyer: u16,
    /// Waits between webhook attempts (e.g. 30s,5m,2h; a bare number is seconds), or
    /// none. Each wait varies by ±20%.
    #[arg(
        long,
        default_value_t = crate::outbox::RetrySchedule::default(),
        value_parser = crate::outbox::RetrySchedule::parse
    )]
    pub retry_schedule: crate::outbox::RetrySchedule,
    /// The most one webhook attempt may take, connecting included (e.g. 15s, 500ms).
    #[arg(long, default_value = "15s", value_parser = positive_duration)]
    pub delivery_timeout: std::time::Duration,
    /// Send webhooks and bid requests only to public addresses: a URL or a host name that
    /// resolves to a loopback, private or unique-local address is refused too (link-local
    /// addresses, where cloud metadata answers, are refused always).
    #[arg(long, env = "LEADRELAY_PUBLIC_OUTBOUND_ONLY")]
    pub public_outbound_only: bool,
    /// Requests per second one client address may send on average (token bucket); 0 turns
    /// rate limiting off.
    #[arg(long, env = "LEADRELAY_RATE_LIMIT", default_value_t = crate::ratelimit::RateLimit::default().per_second)]
    pub rate_limit: u32,
    /// Requests one client address may send at once after being idle; 0 turns rate
    /// limiting off.
    #[arg(long, env = "LEADRELAY_RATE_BURST", default_value_t = crate::ratelimit::RateLimit::default().burst)]
    pub rate_burst: u32,
    /// Serve Prometheus metrics at GET /metrics.
    #[arg(
        long,
        env = "LEADRELAY_METRICS",
        default_value = "on",
        value_parser = on_off,
        action = clap::ArgAction::Set
    )]
    pub metrics: bool,
    /// Connections open at once at most; past it a new connection is answered 503 with
    /// Retry-After and closed. Keep it below the open-files limit (ulimit -n).
    #[arg(
        long,
        env = "LEADRELAY_MAX_CONNECTIONS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_connections: u32,
    /// Address and port of the operator console (a read-only web view; `leadrelay operator
    /// create` makes a login token), or off. Keep it on 127.0.0.1 and reach it through an
    /// SSH tunnel.
    #[arg(
        long,
        env = "LEADRELAY_CONSOLE_LISTEN",
        default_value = "127.0.0.1:8081"
    )]
    pub console_listen: String,
    /// Mark the console's session cookie `Secure`, for a console served over HTTPS (a TLS
    /// proxy in front of it).
    #[arg(long, env = "LEADRELAY_CONSOLE_SECURE_COOKIE")]
    pub console_secure_cookie: bool,
    /// Address and port of the buyer and supplier portal (`leadrelay buyer user create` and
    /// `supplier user create` make login tokens), or off. Meant to be reached from the
    /// internet through a TLS proxy.
    #[arg(
        long,
        env = "LEADRELAY_PORTAL_LISTEN",
        default_value = "127.0.0.1:8082"
    )]
    pub portal_listen: String,
    /// Mark the portal's session cookie `Secure`, for a portal served over HTTPS (a TLS proxy
    /// in front of it).
    #[arg(long, env = "LEADRELAY_PORTAL_SECURE_COOKIE")]
    pub portal_secure_cookie: bool,
    /// The API's address as partners reach it (e.g. https://leads.example.com), named by the
    /// posting instructions the portal shows; default: http:// and --listen.
    #[arg(long, env = "LEADRELAY_PORTAL_API_URL")]
    pub portal_api_url: Option<String>,
    /// The SMTP relay that sends alert emails, smtp://HOST:PORT (plain SMTP, no login: a
    /// relay on the host or the local network).
    #[arg(long, env = "LEADRELAY_SMTP_URL", requires = "smtp_from")]
    pub smtp_url: Option<String>,
    /// The sender address of alert emails.
    #[arg(long, env = "LEADRELAY_SMTP_FROM", requires = "smtp_url")]
    pub smtp_from: Option<String>,
    /// How often the alert rules are evaluated (e.g. 5s, 500ms).
    #[arg(long, default_value = "5s", value_parser = positive_duration)]
    pub alert_interval: std::time::Duration,
}

/// `--all` and the workspace filter of a `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only the records of this workspace.
    #[arg(long)]
    pub workspace: Option<String>,
    /// Include archived records.
    #[arg(long)]
    pub all: bool,
}

/// A rotation's new secret and overlap.
#[derive(Debug, Args)]
pub struct RotateArgs {
    /// Use this secret instead of a generated one (at least 16 characters).
    #[arg(long)]
    pub secret: Option<String>,
    /// How long the old secret stays accepted (e.g. 24h, 30m); 0 cuts it off at once.
    #[arg(long, default_value = "0", value_parser = overlap)]
    pub overlap: Duration,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace.
    #[command(
        after_help = "Example:\n  leadrelay workspace create --name 'Acme Leads' --id acme --timezone Europe/Berlin"
    )]
    Create {
        /// The workspace's name.
        #[arg(long)]
        name: String,
        /// The id to use (letters, digits, '.', '_', '-'); generated when not given.
        #[arg(long)]
        id: Option<String>,
        /// IANA time zone for daily caps and schedules.
        #[arg(long, default_value = "UTC", value_parser = timezone)]
        timezone: String,
        /// How long leads are kept (e.g. 180d); older ones are purged by `serve` once an
        /// hour, leaving a tombstone (ids, statuses and money stay). Default: kept for ever.
        #[arg(long, value_parser = retention)]
        retention: Option<Retention>,
        /// What a lead whose email or phone is suppressed gets: `reject` (refused, code
        /// `suppressed`; the default) or `flag` (stored, never delivered).
        #[arg(long, value_parser = suppression_action)]
        suppression_action: Option<SuppressionAction>,
    },
    /// List workspaces (archived ones with --all).
    #[command(after_help = "Example:\n  leadrelay workspace list --all")]
    List {
        /// Include archived workspaces.
        #[arg(long)]
        all: bool,
    },
    /// Show one workspace.
    #[command(after_help = "Example:\n  leadrelay workspace show acme")]
    Show {
        /// The workspace's id.
        id: String,
    },
    /// Change a workspace's name or time zone; prints it after the change.
    #[command(after_help = "Example:\n  leadrelay workspace update acme --timezone Europe/Vienna")]
    Update {
        /// The workspace's id.
        id: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// A new IANA time zone; caps and schedules count in it from the next lead on.
        #[arg(long, value_parser = timezone)]
        timezone: Option<String>,
        /// How long leads are kept (e.g. 180d, or `none` for ever); `serve` purges older
        /// ones within the hour, leaving a tombstone.
        #[arg(long, value_parser = retention)]
        retention: Option<Retention>,
        /// `reject` or `flag`: what a lead whose email or phone is suppressed gets.
        #[arg(long, value_parser = suppression_action)]
        suppression_action: Option<SuppressionAction>,
    },
    /// Delete a workspace that holds nothing; archive one with history. Refused while it
    /// has live channels, tables, products, buyers or suppliers.
    #[command(after_help = "Example:\n  leadrelay workspace delete acme")]
    Delete {
        /// The workspace's id.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct DeliveryOptions {
    /// Automated delivery on or off (channels default on, lead tables off).
    #[arg(long, value_parser = on_off)]
    pub auto_delivery: Option<bool>,
    /// Exclusive: a lead request goes to one buyer; multi: to up to --max-buyers.
    #[arg(long, value_enum, default_value = "exclusive")]
    pub delivery_mode: DeliveryModeArg,
    /// Most buyers one lead request goes to in multi mode.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub max_buyers: i64,
    /// Lowest evaluation score (0 to 100) that auto-delivery accepts.
    #[arg(long, default_value = "50", value_parser = percent)]
    pub score_threshold: i64,
    /// How long an accepted ping holds its buyers and prices for the post, e.g. 90s
    /// (default 120s).
    #[arg(long, value_parser = ping_ttl)]
    pub ping_ttl: Option<i64>,
    /// A lead refused by a buyer's API goes to the next buyer: on (default) or off.
    #[arg(long, value_parser = on_off)]
    pub waterfall: Option<bool>,
    /// How many times at most a lead request falls to the next buyer (default 5).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub waterfall_max: Option<i64>,
}

/// The delivery settings an `update` may change; only those given change.
#[derive(Debug, Args)]
pub struct DeliveryChanges {
    /// Automated delivery on or off.
    #[arg(long, value_parser = on_off)]
    pub auto_delivery: Option<bool>,
    /// Exclusive: a lead request goes to one buyer; multi: to up to --max-buyers.
    #[arg(long, value_enum)]
    pub delivery_mode: Option<DeliveryModeArg>,
    /// Most buyers one lead request goes to in multi mode.
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub max_buyers: Option<i64>,
    /// Lowest evaluation score (0 to 100) that auto-delivery accepts.
    #[arg(long, value_parser = percent)]
    pub score_threshold: Option<i64>,
    /// How long an accepted ping holds its buyers and prices for the post, e.g. 90s.
    #[arg(long, value_parser = ping_ttl)]
    pub ping_ttl: Option<i64>,
    /// A lead refused by a buyer's API goes to the next buyer: on or off.
    #[arg(long, value_parser = on_off)]
    pub waterfall: Option<bool>,
    /// How many times at most a lead request falls to the next buyer.
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub waterfall_max: Option<i64>,
}

#[derive(Debug, Subcommand)]
pub enum ContainerCommand {
    /// Create one.
    #[command(
        after_help = "Example:\n  leadrelay channel create --workspace acme --name 'Web forms' --id web\n  leadrelay table create --workspace acme --name 'Imports' --id imports"
    )]
    Create {
        /// The workspace it belongs to.
        #[arg(long)]
        workspace: String,
        /// Its name.
        #[arg(long)]
        name: String,
        /// The id to use; generated when not given.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        delivery: DeliveryOptions,
    },
    /// List them (archived ones with --all).
    #[command(
        after_help = "Example:\n  leadrelay channel list --workspace acme\n  leadrelay table list --all"
    )]
    List(ListArgs),
    /// Show one.
    #[command(
        after_help = "Example:\n  leadrelay channel show web\n  leadrelay table show imports"
    )]
    Show {
        /// Its id.
        id: String,
    },
    /// Change its name or delivery settings; prints it after the change.
    #[command(
        after_help = "Example:\n  leadrelay channel update web --delivery-mode multi --max-buyers 2\n  leadrelay table update imports --auto-delivery on"
    )]
    Update {
        /// Its id.
        id: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        delivery: DeliveryChanges,
    },
    /// Delete one that holds nothing; archive one with leads. Refused while it has live
    /// sources.
    #[command(
        after_help = "Example:\n  leadrelay channel delete web\n  leadrelay table delete imports"
    )]
    Delete {
        /// Its id.
        id: String,
    },
}

/// The source settings that `create` and `update` share.
#[derive(Debug, Args)]
pub struct SourceSettings {
    /// The supplier leads from this source are bought from (`none` on update: no supplier).
    #[arg(long, value_parser = id_or_none::<crate::ids::SupplierId>)]
    pub supplier: Option<OrNone<crate::ids::SupplierId>>,
    /// What a lead from this source costs, e.g. 4.50 (`none` on update: the product's).
    #[arg(long, value_parser = money_or_none)]
    pub supplier_cost: Option<OrNone<i64>>,
    /// A ping's payout as this percentage of the winning price, e.g. 40 or 37.5, instead
    /// of the supplier cost (`none` on update: the supplier cost again).
    #[arg(long, value_parser = share_or_none)]
    pub revenue_share: Option<OrNone<i64>>,
    /// Fields the duplicate rule compares: email, phone, email,phone or none.
    #[arg(long, value_parser = dedupe_field_list)]
    pub dedupe_fields: Option<List>,
    /// Where duplicates are looked for: the source's channel or table, or the workspace.
    #[arg(long, value_enum)]
    pub dedupe_scope: Option<DedupeScopeArg>,
    /// What the partner's ingest answer shows: summary (outcome and reason per request; the
    /// default) or full (buyers, prices, transactions, score and candidates, for the
    /// operator's own forms). `lead show` always shows everything.
    #[arg(long, value_enum)]
    pub result_detail: Option<ResultDetailArg>,
}

#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Create a source in a channel or a lead table; prints its secret once.
    #[command(
        after_help = "Example:\n  leadrelay source create --channel web --name 'Landing page' --id landing --supplier-cost 4"
    )]
    Create {
        /// The channel it belongs to.
        #[arg(long, conflicts_with = "table", required_unless_present = "table")]
        channel: Option<String>,
        /// The lead table it belongs to.
        #[arg(long)]
        table: Option<String>,
        /// Its name.
        #[arg(long)]
        name: String,
        /// The id to use (part of its ingest path); generated when not given.
        #[arg(long)]
        id: Option<String>,
        /// Use this ingest secret instead of a generated one (at least 16 characters).
        #[arg(long, conflicts_with = "no_secret")]
        secret: Option<String>,
        /// Take leads without a secret (not for production).
        #[arg(long)]
        no_secret: bool,
        #[command(flatten)]
        settings: SourceSettings,
        /// What a duplicate does to the new lead: review (kept, held from auto-delivery) or
        /// reject (not stored).
        #[arg(long, value_enum, default_value = "review")]
        dedupe_action: DedupeActionArg,
        /// How many days back duplicates are looked for; 0 = no limit.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(i64).range(0..=3650))]
        dedupe_window_days: i64,
    },
    /// List sources (archived ones with --all).
    #[command(after_help = "Example:\n  leadrelay source list --channel web")]
    List {
        /// Only the sources of this channel.
        #[arg(long, conflicts_with = "table")]
        channel: Option<String>,
        /// Only the sources of this lead table.
        #[arg(long)]
        table: Option<String>,
        /// Include archived sources.
        #[arg(long)]
        all: bool,
    },
    /// Show one source (never its secret).
    #[command(after_help = "Example:\n  leadrelay source show landing")]
    Show {
        /// The source's id.
        id: crate::ids::SourceId,
    },
    /// Change a source's name, supplier, cost or duplicate rule; prints it after the change.
    #[command(
        after_help = "Example:\n  leadrelay source update landing --supplier-cost 5.50 --dedupe-action reject"
    )]
    Update {
        /// The source's id.
        id: crate::ids::SourceId,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        settings: SourceSettings,
        /// What a duplicate does to the new lead: review or reject.
        #[arg(long, value_enum)]
        dedupe_action: Option<DedupeActionArg>,
        /// How many days back duplicates are looked for; 0 = no limit.
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..=3650))]
        dedupe_window_days: Option<i64>,
    },
    /// Let a disabled source take leads again.
    #[command(after_help = "Example:\n  leadrelay source enable landing")]
    Enable {
        /// The source's id.
        id: crate::ids::SourceId,
    },
    /// Disable a source: its ingest path answers 404 until it is enabled again.
    #[command(after_help = "Example:\n  leadrelay source disable landing")]
    Disable {
        /// The source's id.
        id: crate::ids::SourceId,
    },
    /// Replace a source's secret; prints the new one once. With --overlap the old one
    /// stays accepted that long.
    #[command(after_help = "Example:\n  leadrelay source rotate-secret landing --overlap 24h")]
    RotateSecret {
        /// The source's id.
        id: crate::ids::SourceId,
        #[command(flatten)]
        rotate: RotateArgs,
    },
    /// Print a source's posting instructions for its supplier, generated from its
    /// configuration (never its secret); or share them by a link that needs no login.
    #[command(
        after_help = "Example:\n  leadrelay source docs landing --format html --base-url https://leads.example.com"
    )]
    Docs {
        /// The source's id.
        id: crate::ids::SourceId,
        /// markdown (plain text) or html.
        #[arg(long, value_enum, default_value = "markdown")]
        format: DocsFormatArg,
        /// The address partners post to, named in the document.
        #[arg(long, default_value = crate::posting::DEFAULT_BASE_URL)]
        base_url: String,
        /// Print a new link to the instructions on the portal that works without login
        /// (shown once; replaces the source's earlier link).
        #[arg(long, conflicts_with = "unshare")]
        share: bool,
        /// End the source's shared link.
        #[arg(long)]
        unshare: bool,
        /// The portal's address, for the --share link.
        #[arg(long, default_value = DEFAULT_PORTAL_URL, requires = "share")]
        portal_url: String,
    },
    /// Delete a source without leads; archive one with leads (its path answers 404, its
    /// leads stay readable).
    #[command(after_help = "Example:\n  leadrelay source delete landing")]
    Delete {
        /// The source's id.
        id: crate::ids::SourceId,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProductCommand {
    /// Create a product.
    #[command(
        after_help = "Example:\n  leadrelay product create --workspace acme --slug solar --name 'Solar panels' --field 'roof:required=tile|flat|metal'"
    )]
    Create {
        /// The workspace it belongs to.
        #[arg(long)]
        workspace: String,
        /// The name partners use for it (`productSlug`), unique in the workspace.
        #[arg(long)]
        slug: String,
        /// Its name.
        #[arg(long)]
        name: String,
        /// The id to use (`productId`); generated when not given.
        #[arg(long)]
        id: Option<String>,
        /// A field: NAME, NAME:required, NAME=A|B (allowed values), NAME:required=A|B.
        #[arg(long = "field", value_parser = FieldDef::parse)]
        fields: Vec<FieldDef>,
        /// Default supplier cost of a lead for this product.
        #[arg(long, value_parser = money)]
        supplier_cost: Option<i64>,
    },
    /// List products (archived ones with --all).
    #[command(after_help = "Example:\n  leadrelay product list --workspace acme")]
    List(ListArgs),
    /// Show one product.
    #[command(after_help = "Example:\n  leadrelay product show solar")]
    Show {
        /// The product's id.
        id: String,
    },
    /// Change a product's slug, name, fields or supplier cost; prints it after the change.
    #[command(
        after_help = "Example:\n  leadrelay product update solar --field 'roof:required=tile|flat|metal' --field size --supplier-cost 4.50"
    )]
    Update {
        /// The product's id.
        id: String,
        /// A new slug (partners must send it from then on).
        #[arg(long)]
        slug: Option<String>,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// The fields (replaces all of them): NAME, NAME:required, NAME=A|B, NAME:required=A|B.
        #[arg(long = "field", value_parser = FieldDef::parse, conflicts_with = "clear_fields")]
        fields: Vec<FieldDef>,
        /// Remove every field.
        #[arg(long)]
        clear_fields: bool,
        /// Default supplier cost of a lead for this product, or none.
        #[arg(long, value_parser = money_or_none)]
        supplier_cost: Option<OrNone<i64>>,
    },
    /// Delete a product never asked for; archive one with leads. Refused while buyers are
    /// subscribed to it.
    #[command(after_help = "Example:\n  leadrelay product delete solar")]
    Delete {
        /// The product's id.
        id: String,
    },
}

/// The buyer settings that `create` and `update` share.
#[derive(Debug, Args)]
pub struct BuyerSettings {
    /// Capabilities for lifecycle calls: any of confirm,payout,cancel, or none.
    #[arg(long, value_parser = capability_list)]
    pub capabilities: Option<List>,
    /// How long after delivery the buyer may cancel (e.g. 72h, 30m, 7d).
    #[arg(long, value_parser = crate::duration::parse_whole_seconds)]
    pub cancellation_window: Option<i64>,
    /// postpaid (invoiced) or prepaid (pays from a funded balance).
    #[arg(long, value_enum)]
    pub plan: Option<PlanArg>,
    /// How far a prepaid balance may go below zero.
    #[arg(long, value_parser = money)]
    pub credit_limit: Option<i64>,
    /// The share (0 to 100, e.g. 10 or 12.5) of a month's deliveries the buyer may return,
    /// or none.
    #[arg(long, value_name = "PERCENT", value_parser = percent_or_none)]
    pub return_cap: Option<OrNone<i64>>,
    /// auto (a return applies at once) or manual (it waits for `transaction return
    /// approve|deny`).
    #[arg(long, value_enum)]
    pub return_review: Option<ReturnReviewArg>,
}

/// Whether a buyer's returns wait for the operator.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReturnReviewArg {
    Auto,
    Manual,
}

impl ReturnReviewArg {
    pub(crate) fn review(self) -> crate::config::buyer::ReturnReview {
        match self {
            ReturnReviewArg::Auto => crate::config::buyer::ReturnReview::Auto,
            ReturnReviewArg::Manual => crate::config::buyer::ReturnReview::Manual,
        }
    }
}

/// A percentage from 0 to 100 with at most two decimals, in basis points, or `none`.
fn percent_or_none(text: &str) -> Result<OrNone<i64>, String> {
    if text == "none" {
        return Ok(OrNone(None));
    }
    match crate::money::parse_cents(text) {
        Ok(bp) if (0..=10_000).contains(&bp) => Ok(OrNone(Some(bp))),
        _ => Err(format!(
            "expected a percentage from 0 to 100, or none, not '{text}'"
        )),
    }
}

/// `buyer terms`: list a buyer's subscriptions, or `set` one's terms.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TermsArgs {
    /// The buyer's id.
    #[arg(required = true)]
    pub id: Option<crate::ids::BuyerId>,
    #[command(subcommand)]
    pub set: Option<TermsCommand>,
}

#[derive(Debug, Subcommand)]
pub enum TermsCommand {
    /// Change some terms of a subscription; the others stay as they are.
    #[command(
        after_help = "Example:\n  leadrelay buyer terms set sunco --product solar --price 27.50 --daily-cap none --filter country=DE"
    )]
    Set {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// The product (id or slug).
        #[arg(long)]
        product: String,
        /// Change how the price of a lead is set: fixed or bid.
        #[arg(long, value_enum)]
        pricing: Option<PricingArg>,
        /// A new price per lead (fixed pricing).
        #[arg(long, value_parser = money)]
        price: Option<i64>,
        /// Where bid requests go with --pricing bid (http or https).
        #[arg(long)]
        bid_url: Option<String>,
        /// How long the buyer has to answer a bid request, e.g. 300ms (the default).
        #[arg(long, value_parser = bid_timeout)]
        bid_timeout: Option<i64>,
        /// Bids below this are ignored.
        #[arg(long, value_parser = money)]
        min_price: Option<i64>,
        /// Bids above this are ignored.
        #[arg(long, value_parser = money)]
        max_price: Option<i64>,
        /// Most leads per local day, or none.
        #[arg(long, value_parser = count_or_none)]
        daily_cap: Option<OrNone<i64>>,
        /// Most leads per local month, or none.
        #[arg(long, value_parser = count_or_none)]
        monthly_cap: Option<OrNone<i64>>,
        /// Higher wins among equal prices; may be negative.
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        /// FIELD=VALUE, FIELD=V1|V2 or FIELD=PREFIX*; replaces every filter. Repeat for more.
        #[arg(long = "filter", value_parser = Filter::parse, conflicts_with = "clear_filters")]
        filters: Vec<Filter>,
        /// Remove every filter.
        #[arg(long)]
        clear_filters: bool,
        /// A window "[DAYS] [HH:MM-HH:MM]"; replaces the schedule. Repeat for more.
        #[arg(long = "schedule", value_parser = Window::parse, conflicts_with = "clear_schedule")]
        schedules: Vec<Window>,
        /// Take leads at any time again.
        #[arg(long)]
        clear_schedule: bool,
        /// Offer only leads for which this check step passed.
        #[arg(long, value_name = "STEP", conflicts_with = "clear_require_check")]
        require_check: Option<String>,
        /// Require no check step any more.
        #[arg(long)]
        clear_require_check: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum BuyerCommand {
    /// Create a buyer; prints its inbound secret and signing secret once.
    #[command(
        after_help = "Example:\n  leadrelay buyer create --workspace acme --name SunCo --id sunco --webhook-url https://sunco.example/leads"
    )]
    Create {
        /// The workspace it belongs to.
        #[arg(long)]
        workspace: String,
        /// Its name.
        #[arg(long)]
        name: String,
        /// The id to use (`buyerAccountId`); generated when not given.
        #[arg(long)]
        id: Option<String>,
        /// Where lead.delivered events are POSTed (http or https).
        #[arg(long)]
        webhook_url: String,
        /// Use this inbound lifecycle secret instead of a generated one.
        #[arg(long, conflicts_with = "no_secret")]
        secret: Option<String>,
        /// No inbound secret: lifecycle calls for this buyer answer 403.
        #[arg(long)]
        no_secret: bool,
        /// Use this Standard Webhooks signing secret (whsec_…) instead of a generated one.
        #[arg(long)]
        signing_secret: Option<String>,
        #[command(flatten)]
        settings: BuyerSettings,
        /// Move acknowledged transactions to payout_pending at once.
        #[arg(long)]
        auto_payout_pending: bool,
    },
    /// List buyers (archived ones with --all).
    #[command(after_help = "Example:\n  leadrelay buyer list --workspace acme")]
    List(ListArgs),
    /// Show one buyer (never its secrets).
    #[command(after_help = "Example:\n  leadrelay buyer show sunco")]
    Show {
        /// The buyer's id.
        id: crate::ids::BuyerId,
    },
    /// Change a buyer's name, webhook URL, capabilities, window, plan or credit limit;
    /// prints it after the change. The next event goes to a new URL.
    #[command(
        after_help = "Example:\n  leadrelay buyer update sunco --webhook-url https://crm.sunco.example/leads --credit-limit 500"
    )]
    Update {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// A new webhook URL.
        #[arg(long)]
        webhook_url: Option<String>,
        #[command(flatten)]
        settings: BuyerSettings,
        /// Move acknowledged transactions to payout_pending at once: on or off.
        #[arg(long, value_parser = on_off, num_args = 0..=1, default_missing_value = "on")]
        auto_payout_pending: Option<bool>,
    },
    /// Subscribe a buyer to a product; refused when it is subscribed already (use
    /// `buyer terms set`).
    #[command(
        after_help = "Example:\n  leadrelay buyer subscribe sunco --product solar --price 25 --daily-cap 100 --filter country=DE --schedule 'mon-fri 08:00-18:00'"
    )]
    Subscribe {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// Product id or slug.
        #[arg(long)]
        product: String,
        /// How the price of a lead is set: fixed (the --price) or bid (asked per lead at
        /// --bid-url).
        #[arg(long, value_enum, default_value = "fixed")]
        pricing: PricingArg,
        /// The price per lead (fixed pricing only).
        #[arg(long, value_parser = money, required_if_eq("pricing", "fixed"))]
        price: Option<i64>,
        /// Where bid requests go with --pricing bid (http or https).
        #[arg(long)]
        bid_url: Option<String>,
        /// How long the buyer has to answer a bid request, e.g. 300ms (the default).
        #[arg(long, value_parser = bid_timeout)]
        bid_timeout: Option<i64>,
        /// Bids below this are ignored.
        #[arg(long, value_parser = money)]
        min_price: Option<i64>,
        /// Bids above this are ignored.
        #[arg(long, value_parser = money)]
        max_price: Option<i64>,

        /// Most leads per local day.
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
        daily_cap: Option<i64>,
        /// Most leads per local month.
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
        monthly_cap: Option<i64>,
        /// Higher wins among equal prices; may be negative.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i64,
        /// FIELD=VALUE, FIELD=V1|V2 or FIELD=PREFIX*; FIELD is a Lead field (country,
        /// postalCode, …), fieldValues.NAME of the product, or check.STEP.KEY (a value a
        /// check step kept). Repeat for more.
        #[arg(long = "filter", value_parser = Filter::parse)]
        filters: Vec<Filter>,
        /// When the buyer takes leads, in the workspace's time zone: [DAYS] [HH:MM-HH:MM],
        /// e.g. "mon-fri 08:00-18:00", "sat 10:00-14:00", "22:00-06:00"; repeat for more
        /// windows. Without it: always.
        #[arg(long = "schedule", value_parser = Window::parse)]
        schedules: Vec<Window>,
        /// Offer only leads for which this check step passed.
        #[arg(long, value_name = "STEP")]
        require_check: Option<String>,
    },
    /// A buyer's subscriptions with every term and today's / this month's cap use; `terms
    /// set` changes some terms of one.
    #[command(
        after_help = "Example:\n  leadrelay buyer terms sunco\n  leadrelay buyer terms set sunco --product solar --priority 2"
    )]
    Terms(TermsArgs),
    /// End a buyer's subscription to a product.
    #[command(after_help = "Example:\n  leadrelay buyer unsubscribe sunco --product solar")]
    Unsubscribe {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// Product id or slug.
        #[arg(long)]
        product: String,
    },
    /// Add money to a prepaid buyer's balance.
    #[command(after_help = "Example:\n  leadrelay buyer fund heatco --amount 250")]
    Fund {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// How much to add, e.g. 250 or 99.90.
        #[arg(long, value_parser = money)]
        amount: i64,
    },
    /// Correct a prepaid buyer's balance by hand: an `adjustment` row in the ledger with
    /// the reason and the actor `operator`. A debit is written `--amount=-5`.
    #[command(
        after_help = "Example:\n  leadrelay buyer adjust sunco --amount=-12.50 --reason 'double charge on 3 May'"
    )]
    Adjust {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// The correction: positive credits the buyer, negative (`--amount=-5`) debits.
        #[arg(long, value_parser = signed_money)]
        amount: i64,
        /// Why, kept with the ledger row.
        #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
        reason: String,
    },
    /// Stop deliveries to a buyer (alias: disable).
    #[command(
        visible_alias = "disable",
        after_help = "Example:\n  leadrelay buyer pause sunco"
    )]
    Pause {
        /// The buyer's id.
        id: crate::ids::BuyerId,
    },
    /// Resume deliveries to a buyer (alias: enable).
    #[command(
        visible_alias = "enable",
        after_help = "Example:\n  leadrelay buyer resume sunco"
    )]
    Resume {
        /// The buyer's id.
        id: crate::ids::BuyerId,
    },
    /// Replace a buyer's inbound lifecycle secret; prints the new one once. With --overlap
    /// the old one stays accepted that long.
    #[command(after_help = "Example:\n  leadrelay buyer rotate-secret sunco --overlap 24h")]
    RotateSecret {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        #[command(flatten)]
        rotate: RotateArgs,
    },
    /// Replace a buyer's signing secret; prints the new one once. During --overlap every
    /// event carries a signature with each secret.
    #[command(after_help = "Example:\n  leadrelay buyer rotate-signing-secret sunco --overlap 24h")]
    RotateSigningSecret {
        /// The buyer's id.
        id: crate::ids::BuyerId,
        /// Use this signing secret (whsec_…) instead of a generated one.
        #[arg(long)]
        secret: Option<String>,
        /// How long events are also signed with the old secret (e.g. 24h); 0 stops at once.
        #[arg(long, default_value = "0", value_parser = overlap)]
        overlap: Duration,
    },
    /// Delete a buyer without history; archive one with transactions or ledger rows.
    /// Refused while it has subscriptions.
    #[command(after_help = "Example:\n  leadrelay buyer delete sunco")]
    Delete {
        /// The buyer's id.
        id: crate::ids::BuyerId,
    },
    /// The health of a buyer's webhook endpoint (every buyer's without an id): healthy or
    /// unhealthy (its circuit breaker), failures in a row, last success, last error, and
    /// the running server's sends in flight and latency (null when no server runs).
    #[command(
        after_help = "Example:\n  leadrelay buyer health\n  leadrelay buyer health sunco --json"
    )]
    Health {
        /// The buyer's id; every buyer without it.
        id: Option<crate::ids::BuyerId>,
    },
    /// The buyer's delivery method: the generic signed webhook, or a mapped integration
    /// posting into the buyer's own API (set, show, preview, reset, secret).
    #[command(subcommand)]
    Integration(super::integration::IntegrationCommand),
    /// The buyer's users of the partner portal and their login tokens (create, list,
    /// revoke).
    #[command(subcommand)]
    User(super::partner_user::BuyerUserCommand),
}

#[derive(Debug, Subcommand)]
pub enum SupplierCommand {
    /// Create a supplier; prints its API key once.
    #[command(
        after_help = "Example:\n  leadrelay supplier create --workspace acme --name 'Lead Farm Ltd' --id leadfarm"
    )]
    Create {
        /// The workspace it belongs to.
        #[arg(long)]
        workspace: String,
        /// Its name.
        #[arg(long)]
        name: String,
        /// The id to use; generated when not given.
        #[arg(long)]
        id: Option<String>,
        /// Use this key instead of a generated one (at least 16 characters).
        #[arg(long)]
        key: Option<String>,
    },
    /// List suppliers (archived ones with --all).
    #[command(after_help = "Example:\n  leadrelay supplier list")]
    List(ListArgs),
    /// Show one supplier (never its key).
    #[command(after_help = "Example:\n  leadrelay supplier show leadfarm")]
    Show {
        /// The supplier's id.
        id: crate::ids::SupplierId,
    },
    /// Change a supplier's name; prints it after the change.
    #[command(
        after_help = "Example:\n  leadrelay supplier update leadfarm --name 'Lead Farm GmbH'"
    )]
    Update {
        /// The supplier's id.
        id: crate::ids::SupplierId,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
    },
    /// Replace a supplier's API key; prints the new one once. With --overlap the old one
    /// stays accepted that long.
    #[command(after_help = "Example:\n  leadrelay supplier rotate-key leadfarm --overlap 24h")]
    RotateKey {
        /// The supplier's id.
        id: crate::ids::SupplierId,
        /// Use this key instead of a generated one (at least 16 characters).
        #[arg(long)]
        key: Option<String>,
        /// How long the old key stays accepted (e.g. 24h); 0 cuts it off at once.
        #[arg(long, default_value = "0", value_parser = overlap)]
        overlap: Duration,
    },
    /// Delete a supplier without history; archive one with ledger rows or clawbacks.
    /// Refused while live sources buy from it.
    #[command(after_help = "Example:\n  leadrelay supplier delete leadfarm")]
    Delete {
        /// The supplier's id.
        id: crate::ids::SupplierId,
    },
    /// The supplier's users of the partner portal and their login tokens (create, list,
    /// revoke).
    #[command(subcommand)]
    User(super::partner_user::SupplierUserCommand),
}
