//! Alerts in the running service (DESIGN.md section 23): the task that evaluates the
//! workspaces' rules every [`AlertOptions::interval`] and sends each change of an alert's
//! state to the workspace's targets, a signed webhook (Standard Webhooks headers, as
//! `lead.delivered`) or an email through the SMTP relay of `serve --smtp-url`.
//!
//! The conditions are read on a read connection (`alerts::conditions`); the writer is
//! asked only when they differ from the open alerts, for the small job `alerts::store::apply`
//! that fires and resolves. So a quiet evaluation costs one read and no write, and ingest
//! never does any work for alerts. A message is tried [`ATTEMPTS`] times; one that cannot be
//! sent is logged and dropped (`alert list` keeps the state). It does not own the rules nor
//! the tables.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;

use super::connect::{self, Connector};
use super::signing::SigningKey;
use crate::alerts::{self, Alert, AlertError, Target, TargetKind, conditions, store};
use crate::db::Db;
use crate::outbound_url::Reach;

/// How many times one message to one target is tried, and the waits between.
const ATTEMPTS: usize = 3;
const RETRY_WAITS: [Duration; ATTEMPTS - 1] = [Duration::from_secs(2), Duration::from_secs(10)];

/// How long one webhook or email may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// What `serve` sets of alerting.
#[derive(Debug, Clone)]
pub struct AlertOptions {
    /// How often the rules are evaluated (`serve --alert-interval`, default 5 s).
    pub interval: Duration,
    /// The SMTP relay of email targets (`serve --smtp-url`, `--smtp-from`); without it an
    /// email target's messages are logged as not sent.
    pub smtp: Option<Smtp>,
}

impl Default for AlertOptions {
    fn default() -> Self {
        AlertOptions {
            interval: Duration::from_secs(5),
            smtp: None,
        }
    }
}

/// A plain SMTP relay (`smtp://HOST:PORT`) and the sender address of alert emails.
#[derive(Debug, Clone)]
pub struct Smtp {
    pub host: String,
    pub port: u16,
    pub from: String,
}

impl Smtp {
    /// Reads `smtp://HOST[:PORT]` (port 25 by default) and checks the sender address.
    pub fn parse(url: &str, from: &str) -> Result<Smtp, String> {
        let rest = url
            .strip_prefix("smtp://")
            .ok_or_else(|| format!("--smtp-url '{url}' is not smtp://HOST:PORT"))?;
        let rest = rest.trim_end_matches('/');
        // A port follows the last ':' unless that ':' is inside an IPv6 address.
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port))
                if !rest.ends_with(']') && (!host.contains(':') || host.ends_with(']')) =>
            {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("--smtp-url '{url}': '{port}' is not a port"))?;
                (host, port)
            }
            _ => (rest, 25),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(['/', '@', '?']) {
            return Err(format!("--smtp-url '{url}' is not smtp://HOST:PORT"));
        }
        from.parse::<lettre::message::Mailbox>()
            .map_err(|e| format!("--smtp-from '{from}': {e}"))?;
        Ok(Smtp {
            host: host.to_string(),
            port,
            from: from.to_string(),
        })
    }
}

/// Runs the evaluation until `stopped` completes. Must run on the service's runtime.
pub(crate) async fn run(
    db: Db,
    options: AlertOptions,
    reach: Reach,
    stopped: impl Future<Output = ()>,
) {
    let sender = Arc::new(Sender {
        client: OnceLock::new(),
        reach,
        smtp: options.smtp,
    });
    let database = db.path().to_path_buf();
    let mut ticks = tokio::time::interval(options.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            () = &mut stopped => return,
            _ = ticks.tick() => {}
        }
        match evaluate(&db, database.clone()).await {
            Ok(changed) => {
                for alert in changed {
                    sender.send_to_targets(&db, alert).await;
                }
            }
            Err(e) => {
                // A full disk or a busy writer fails every round until it passes: once per
                // 10 s in the log, with a count.
                static FAILED: crate::logging::Repeated = crate::logging::Repeated::new();
                if let Some(repeats) = FAILED.admit() {
                    log::warn!("alert evaluation failed: {e}{repeats}");
                }
            }
        }
    }
}

/// One evaluation: the conditions that hold, then (only when they differ from the open
/// alerts) the writer job that fires and resolves. The alerts whose state changed.
async fn evaluate(db: &Db, database: PathBuf) -> Result<Vec<Alert>, AlertError> {
    let now = crate::clock::now_ms();
    let (holding, same) = db
        .read(move |conn| {
            let settings = store::rules(conn, None)?;
            let holding = conditions::holding(conn, &settings, &database, now)?;
            let open = store::open(conn, None)?;
            let key =
                |w: &str, r: alerts::Rule, s: &str| (w.to_string(), r.as_str(), s.to_string());
            let mut held: Vec<_> = holding
                .iter()
                .map(|c| key(&c.workspace_id, c.rule, &c.subject))
                .collect();
            let mut firing: Vec<_> = open
                .iter()
                .map(|a| key(&a.workspace_id, a.rule, &a.subject))
                .collect();
            held.sort();
            firing.sort();
            Ok::<_, AlertError>((holding, held == firing))
        })
        .await?;
    if same {
        return Ok(Vec::new());
    }
    db.write(move |conn| store::apply(conn, &holding, now))
        .await
}

struct Sender {
    client: OnceLock<Result<Client<Connector, Full<Bytes>>, String>>,
    reach: Reach,
    smtp: Option<Smtp>,
}

impl Sender {
    /// Sends `alert`'s message to each target of its workspace, each on its own task.
    async fn send_to_targets(self: &Arc<Self>, db: &Db, alert: Alert) {
        let workspace = alert.workspace_id.clone();
        let targets = match db
            .read(move |conn| store::targets(conn, Some(&workspace)))
            .await
        {
            Ok(targets) => targets,
            Err(e) => {
                log::warn!("alert {}: cannot read its targets: {e}", alert.id);
                return;
            }
        };
        log::info!(
            "alert {} {} {} {}: {} target(s)",
            alert.id,
            alert.state,
            alert.rule,
            alert.subject,
            targets.len()
        );
        let alert = Arc::new(alert);
        for target in targets {
            let sender = Arc::clone(self);
            let alert = Arc::clone(&alert);
            tokio::spawn(async move { sender.deliver(&alert, &target).await });
        }
    }

    /// Tries one message to one target up to [`ATTEMPTS`] times.
    async fn deliver(&self, alert: &Alert, target: &Target) {
        let mut last_error = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(RETRY_WAITS[attempt - 1]).await;
            }
            let sent = match target.kind {
                TargetKind::Webhook => self.post(alert, target).await,
                TargetKind::Email => self.mail(alert, target).await,
            };
            match sent {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
        }
        log::warn!(
            "alert {} ({}) to target {}: not sent after {ATTEMPTS} attempts: {last_error}",
            alert.id,
            alert.state,
            target.id
        );
    }

    /// The signed POST of the message to a webhook target.
    async fn post(&self, alert: &Alert, target: &Target) -> Result<(), String> {
        crate::outbound_url::check_with(&target.address, self.reach)
            .map_err(|e| format!("invalid webhook URL: {e}"))?;
        let client = self
            .client
            .get_or_init(|| {
                let https = connect::connector(self.reach, None)
                    .map_err(|e| format!("cannot set up TLS for alert webhooks: {e}"))?;
                Ok(Client::builder(hyper_util::rt::TokioExecutor::new()).build(https))
            })
            .clone()?;
        let key = SigningKey::from_secret(target.signing_secret.as_deref().unwrap_or(""))
            .map_err(|e| e.to_string())?;
        let body = alerts::message(alert).to_string();
        // One id per message: the alert and the state it reports.
        let id = format!("{}.{}", alert.id, alert.state);
        let timestamp = crate::clock::now_ms() / 1000;
        let request = http::Request::post(target.address.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(
                http::header::USER_AGENT,
                concat!("leadrelay/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                key.sign(&id, timestamp, body.as_bytes()),
            )
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("invalid webhook URL: {e}"))?;
        let response = tokio::time::timeout(SEND_TIMEOUT, client.request(request))
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| match super::sender::refused_address(&e) {
                Some(refused) => format!("not sent: {refused}"),
                None => format!("request failed: {e}"),
            })?;
        match response.status().as_u16() {
            200..=299 => Ok(()),
            status => Err(format!("HTTP {status}")),
        }
    }

    /// The message as an email through the SMTP relay (blocking, off the async threads).
    async fn mail(&self, alert: &Alert, target: &Target) -> Result<(), String> {
        let Some(smtp) = self.smtp.clone() else {
            return Err("no SMTP relay (serve --smtp-url, --smtp-from)".to_string());
        };
        let to = target.address.clone();
        let subject = alert.text().chars().take(200).collect::<String>();
        let body = format!(
            "{}\n\n{}\n",
            alert.text(),
            serde_json::to_string_pretty(&alerts::message(alert)["alert"])
                .expect("a Value always serialises")
        );
        tokio::task::spawn_blocking(move || send_mail(&smtp, &to, &subject, body))
            .await
            .map_err(|e| format!("the mail task failed: {e}"))?
    }
}

/// One email through the plain SMTP relay.
fn send_mail(smtp: &Smtp, to: &str, subject: &str, body: String) -> Result<(), String> {
    use lettre::Transport;
    let message = lettre::Message::builder()
        .from(smtp.from.parse().map_err(|e| format!("sender: {e}"))?)
        .to(to.parse().map_err(|e| format!("recipient: {e}"))?)
        .subject(subject)
        .header(lettre::message::header::ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| format!("cannot build the email: {e}"))?;
    lettre::SmtpTransport::builder_dangerous(&smtp.host)
        .port(smtp.port)
        .timeout(Some(SEND_TIMEOUT))
        .build()
        .send(&message)
        .map(|_| ())
        .map_err(|e| format!("SMTP: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtp_urls_read_host_and_port() {
        let smtp = Smtp::parse("smtp://127.0.0.1:2525", "alerts@example.org").unwrap();
        assert_eq!((smtp.host.as_str(), smtp.port), ("127.0.0.1", 2525));
        let smtp = Smtp::parse("smtp://mail.example.org", "alerts@example.org").unwrap();
        assert_eq!((smtp.host.as_str(), smtp.port), ("mail.example.org", 25));
        let smtp = Smtp::parse("smtp://[::1]:2525", "alerts@example.org").unwrap();
        assert_eq!((smtp.host.as_str(), smtp.port), ("::1", 2525));
        let smtp = Smtp::parse("smtp://[::1]", "alerts@example.org").unwrap();
        assert_eq!((smtp.host.as_str(), smtp.port), ("::1", 25));
        for (url, from) in [
            ("http://mail.example.org", "a@example.org"),
            ("smtp://mail.example.org:x", "a@example.org"),
            ("smtp://", "a@example.org"),
            ("smtp://mail.example.org", "not an address"),
        ] {
            assert!(Smtp::parse(url, from).is_err(), "{url} {from}");
        }
    }
}
