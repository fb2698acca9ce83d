//! Flags of every command. Values are checked while parsing (`value_parser`), so a bad
//! amount, duration, time zone or enum value is a usage error with exit code 2.

use clap::{Args, Subcommand, ValueEnum};

use crate::autodelivery::schedule::Window;
use crate::config::buyer::Filter;
use crate::config::product::FieldDef;

fn money(text: &str) -> Result<i64, String> {
    crate::money::parse_cents(text)
}

fn timezone(text: &str) -> Result<String, String> {
    crate::config::workspace::check_timezone(text).map(|()| text.to_string())
}

fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("expected on or off, not '{text}'")),
    }
}

fn positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match crate::duration::parse_or_seconds(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("the duration must be greater than 0".into()),
        d => Ok(d),
    }
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

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, env = "LEADRELAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Webhook sends in flight at most, over all buyers (each on its own thread).
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
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        id: Option<String>,
        /// IANA time zone for daily caps and schedules.
        #[arg(long, default_value = "UTC", value_parser = timezone)]
        timezone: String,
    },
}

#[derive(Debug, Args)]
pub struct DeliveryOptions {
    /// Automated delivery on or off (channels default on, lead tables off).
    #[arg(long, value_parser = on_off)]
    pub auto_delivery: Option<bool>,
    #[arg(long, value_enum, default_value = "exclusive")]
    pub delivery_mode: DeliveryModeArg,
    /// Most buyers one lead request goes to in multi mode.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub max_buyers: i64,
    /// Lowest evaluation score (0 to 100) that auto-delivery accepts.
    #[arg(long, default_value = "50", value_parser = percent)]
    pub score_threshold: i64,
}

#[derive(Debug, Subcommand)]
pub enum ContainerCommand {
    /// Create one.
    Create {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        delivery: DeliveryOptions,
    },
}

#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Create a source in a channel or a lead table; prints its secret once.
    Create {
        #[arg(long, conflicts_with = "table", required_unless_present = "table")]
        channel: Option<String>,
        #[arg(long)]
        table: Option<String>,
        #[arg(long)]
        name: String,
        #[arg(long)]
        id: Option<String>,
        /// Use this ingest secret instead of a generated one (at least 16 characters).
        #[arg(long, conflicts_with = "no_secret")]
        secret: Option<String>,
        /// Take leads without a secret (not for production).
        #[arg(long)]
        no_secret: bool,
        #[arg(long)]
        supplier: Option<String>,
        /// What a lead from this source costs (e.g. 4.50).
        #[arg(long, value_parser = money)]
        supplier_cost: Option<i64>,
        /// Fields the duplicate rule compares: email, phone, email,phone or none.
        #[arg(long, value_parser = dedupe_field_list)]
        dedupe_fields: Option<List>,
        #[arg(long, value_enum)]
        dedupe_scope: Option<DedupeScopeArg>,
        #[arg(long, value_enum, default_value = "review")]
        dedupe_action: DedupeActionArg,
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(i64).range(0..=3650))]
        dedupe_window_days: i64,
    },
    /// Replace a source's secret; prints the new one once.
    RotateSecret {
        id: String,
        #[arg(long)]
        secret: Option<String>,
    },
    /// Disable a source: its ingest path answers 404.
    Disable { id: String },
    /// List sources.
    List,
    /// Show one source.
    Show { id: String },
}

#[derive(Debug, Subcommand)]
pub enum ProductCommand {
    /// Create a product.
    Create {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        slug: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        id: Option<String>,
        /// A field: NAME, NAME:required, NAME=A|B (allowed values), NAME:required=A|B.
        #[arg(long = "field", value_parser = FieldDef::parse)]
        fields: Vec<FieldDef>,
        /// Default supplier cost of a lead for this product.
        #[arg(long, value_parser = money)]
        supplier_cost: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum BuyerCommand {
    /// Create a buyer; prints its inbound secret and signing secret once.
    Create {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        id: Option<String>,
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
        #[arg(long, default_value = "confirm,payout,cancel", value_parser = capability_list)]
        capabilities: List,
        /// How long after delivery the buyer may cancel (e.g. 72h, 30m, 7d).
        #[arg(long, default_value = "72h", value_parser = crate::duration::parse_whole_seconds)]
        cancellation_window: i64,
        /// Move acknowledged transactions to payout_pending at once.
        #[arg(long)]
        auto_payout_pending: bool,
        #[arg(long, value_enum, default_value = "postpaid")]
        plan: PlanArg,
        /// How far a prepaid balance may go below zero.
        #[arg(long, default_value = "0", value_parser = money)]
        credit_limit: i64,
    },
    /// Subscribe a buyer to a product (again: replace the terms).
    Subscribe {
        id: String,
        /// Product id or slug.
        #[arg(long)]
        product: String,
        #[arg(long, value_parser = money)]
        price: i64,
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
        daily_cap: Option<i64>,
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
        monthly_cap: Option<i64>,
        /// Higher wins among equal prices; may be negative.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i64,
        /// FIELD=VALUE, FIELD=V1|V2 or FIELD=PREFIX*; FIELD may be fieldValues.NAME.
        #[arg(long = "filter", value_parser = Filter::parse)]
        filters: Vec<Filter>,
        /// When the buyer takes leads, in the workspace's time zone: [DAYS] [HH:MM-HH:MM],
        /// e.g. "mon-fri 08:00-18:00", "sat 10:00-14:00", "22:00-06:00"; repeat for more
        /// windows. Without it: always.
        #[arg(long = "schedule", value_parser = Window::parse)]
        schedules: Vec<Window>,
    },
    /// Add money to a prepaid buyer's balance.
    Fund {
        id: String,
        #[arg(long, value_parser = money)]
        amount: i64,
    },
    /// Stop deliveries to a buyer.
    Pause { id: String },
    /// Resume deliveries to a buyer.
    Resume { id: String },
    /// List buyers.
    List,
    /// The health of a buyer's webhook endpoint (every buyer's without an id): healthy or
    /// unhealthy (its circuit breaker), failures in a row, last success, last error, and
    /// the running server's sends in flight and latency (null when no server runs).
    Health { id: Option<String> },
}

#[derive(Debug, Subcommand)]
pub enum SupplierCommand {
    /// Create a supplier; prints its API key once.
    Create {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        id: Option<String>,
        /// Use this key instead of a generated one (at least 16 characters).
        #[arg(long)]
        key: Option<String>,
    },
}
