//! `console`: how fast the console's and the app portal's pages answer on a big store.
//!
//! The store is a copy of a seeded database (`--seed`): the one the ignored `overview_speed`
//! tests of `vow-store-sqlite` and `vow-store-postgres` fill, with 1,000,000 messages and
//! 5,000,000 attempts (see their module docs). Its endpoints are pointed at this run's
//! receiver, then every page is fetched in rounds, one after another as one operator clicking
//! through would, each round visiting every page once:
//! - **idle**: `vow serve` with delivery workers off;
//! - **draining**: workers on, so the seed's 150,000 due deliveries drain to the receiver while
//!   the pages are read (the store's heaviest write load, meeting the pages' reads).
//!
//! A page that answers other than it should (200; 303 for a search by id) makes the run VOID.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, ORIGIN, SET_COOKIE};
use reqwest::{Client, Method};

use super::Options;
use crate::ledger::{histogram, ms, Report};
use crate::receiver::{Clock, Receiver};
use crate::vow_process::{Database, VowProcess, VowSettings, ADMIN_TOKEN};

/// The signing secret given to the seed's endpoints (base64 of 24 bytes).
const SECRET: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Rounds over every page per variant (after one round of warm-up).
const ROUNDS: usize = 200;

/// The rows the pages are about, found in the seeded database.
struct Targets {
    app: String,
    endpoint: String,
    msg: String,
    source: String,
    quarantined: String,
}

impl Targets {
    async fn find(db: &Database) -> anyhow::Result<Self> {
        let dead = db
            .first_row(
                "SELECT app_id, endpoint_id FROM deliveries
                 WHERE status = 'dead_lettered' ORDER BY id DESC LIMIT 1",
            )
            .await
            .context("finding a dead letter: is --seed a seeded database?")?;
        let msg = db
            .first_row(&format!(
                "SELECT id FROM messages WHERE app_id = '{}' ORDER BY id DESC LIMIT 1",
                dead[0]
            ))
            .await?;
        let quarantined = db
            .first_row(
                "SELECT source_id, id FROM inbound_events
                 WHERE state = 'quarantined' ORDER BY id DESC LIMIT 1",
            )
            .await?;
        let [app, endpoint] = <[String; 2]>::try_from(dead).expect("two columns");
        let [source, quarantined] = <[String; 2]>::try_from(quarantined).expect("two columns");
        Ok(Self {
            app,
            endpoint,
            msg: msg.into_iter().next().expect("one column"),
            source,
            quarantined,
        })
    }
}

/// One page: its name in the report, its request, and the status it answers.
struct Page {
    name: String,
    method: Method,
    path: String,
    form: Option<String>,
    status: u16,
}

impl Page {
    fn get(name: &str, path: String) -> Self {
        Self {
            name: name.to_string(),
            method: Method::GET,
            path,
            form: None,
            status: 200,
        }
    }
}

/// Every console and portal page, about `t`; `portal` is the portal link's path, `csrf` the
/// session's form token.
fn pages(t: &Targets, portal: &str, csrf: &str) -> Vec<Page> {
    let app = format!("/console/app/{}", t.app);
    let endpoint = format!("{app}/endpoint/{}", t.endpoint);
    let portal_endpoint = format!("{portal}/endpoint/{}", t.endpoint);
    let last_week = (chrono::Utc::now() - chrono::TimeDelta::days(7)).format("%Y-%m-%dT%H:%M");
    let three_weeks = (chrono::Utc::now() - chrono::TimeDelta::days(21)).format("%Y-%m-%dT%H:%M");
    let mut pages = vec![
        Page::get("overview", "/console/overview".into()),
        Page::get("applications", "/console".into()),
        Page::get("application", app.clone()),
        Page::get("endpoint", endpoint.clone()),
        Page::get("endpoint_secret", format!("{endpoint}/secret")),
        Page::get("endpoint_edit", format!("{endpoint}/edit")),
        Page::get("endpoint_new", format!("{app}/endpoint/new")),
        Page::get("messages", format!("{app}/messages")),
        // An id found goes straight to the message's page.
        Page {
            status: 303,
            ..Page::get("messages_by_id", format!("{app}/messages?id={}", t.msg))
        },
        Page::get(
            "messages_by_type",
            format!("{app}/messages?event_type=order.paid"),
        ),
        // Every seeded message is `order.paid` and on no channel: these two find nothing.
        Page::get(
            "messages_by_rare_type",
            format!("{app}/messages?event_type=order.refunded"),
        ),
        Page::get(
            "messages_by_channel",
            format!("{app}/messages?channel=nowhere"),
        ),
        Page::get(
            "messages_by_time",
            format!("{app}/messages?since={three_weeks}&until={last_week}"),
        ),
        Page::get("message", format!("{app}/msg/{}", t.msg)),
        Page::get("sources", "/console/sources".into()),
        Page::get("source", format!("/console/source/{}", t.source)),
        Page::get(
            "quarantine_review",
            format!("/console/source/{}/event/{}", t.source, t.quarantined),
        ),
        Page::get(
            "idempotency_key",
            format!(
                "/console/idempotency?key=console-bench&route=message.create&app={}&by=admin",
                t.app
            ),
        ),
        Page::get("portal_application", portal.to_string()),
        Page::get("portal_endpoint", portal_endpoint.clone()),
        Page::get("portal_messages", format!("{portal}/messages")),
        Page::get("portal_message", format!("{portal}/msg/{}", t.msg)),
        Page::get("portal_secret", format!("{portal_endpoint}/secret")),
    ];
    pages.push(Page {
        name: "replay_dry_run".into(),
        method: Method::POST,
        path: format!("{endpoint}/replay"),
        form: Some(format!("csrf={csrf}&since=&until=")),
        status: 200,
    });
    pages
}

/// A logged-in operator: the session cookie and the form token.
struct Operator {
    client: Client,
    base: String,
    cookie: String,
}

impl Operator {
    async fn log_in(base: &str) -> anyhow::Result<Self> {
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let answer = client
            .post(format!("{base}/console/login"))
            .header(ORIGIN, base)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN_TOKEN}"))
            .send()
            .await?;
        let cookie = answer
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|c| c.to_str().ok()?.split(';').next().map(str::to_string))
            .collect::<Vec<_>>()
            .join("; ");
        if cookie.is_empty() {
            bail!("login answered {} without a session", answer.status());
        }
        Ok(Self {
            client,
            base: base.to_string(),
            cookie,
        })
    }

    /// The page's status and body.
    async fn fetch(&self, page: &Page) -> anyhow::Result<(u16, String)> {
        let mut request = self
            .client
            .request(page.method.clone(), format!("{}{}", self.base, page.path))
            .header(COOKIE, &self.cookie)
            .header(ORIGIN, &self.base);
        if let Some(form) = &page.form {
            request = request
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form.clone());
        }
        let answer = request.send().await?;
        let status = answer.status().as_u16();
        Ok((status, answer.text().await?))
    }

    /// The form token a page carries.
    async fn csrf(&self, path: &str) -> anyhow::Result<String> {
        let (_, body) = self.fetch(&Page::get("", path.to_string())).await?;
        let marker = "name=\"csrf\" value=\"";
        let at = body.find(marker).context("no form token on the page")? + marker.len();
        let end = body[at..].find('"').context("an unterminated form token")?;
        Ok(body[at..at + end].to_string())
    }
}

/// Admin API calls the run makes before timing.
async fn api(base: &str, path: &str, body: &str, key: Option<&str>) -> anyhow::Result<String> {
    let mut request = Client::new()
        .post(format!("{base}{path}"))
        .header(AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"))
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let answer = request.send().await?;
    let status = answer.status();
    let text = answer.text().await?;
    if !status.is_success() {
        bail!("POST {path} answered {status}: {text}");
    }
    Ok(text)
}

/// Times every page over [`ROUNDS`] rounds against `vow`.
async fn measure(
    vow: &VowProcess,
    targets: &Targets,
    receiver: &Receiver,
    title: String,
) -> anyhow::Result<Report> {
    let base = vow.base_url();
    let operator = Operator::log_in(base).await?;
    let portal: serde_json::Value = serde_json::from_str(
        &api(
            base,
            &format!("/api/v1/auth/app-portal-access/{}", targets.app),
            "{}",
            None,
        )
        .await?,
    )?;
    let portal_url = portal["url"].as_str().context("a portal url")?;
    let portal_path = portal_url
        .find("/portal/")
        .map(|at| portal_url[at..].trim_end_matches('/').to_string())
        .context("a /portal/ link")?;
    let csrf = operator
        .csrf(&format!(
            "/console/app/{}/endpoint/{}",
            targets.app, targets.endpoint
        ))
        .await?;
    let pages = pages(targets, &portal_path, &csrf);

    let mut report = Report::new(title);
    let mut times: Vec<Histogram<u64>> = pages.iter().map(|_| histogram()).collect();
    // (page, status) -> how many times, for a page that answered other than it should.
    let mut failures: BTreeMap<(String, u16), usize> = BTreeMap::new();
    for page in &pages {
        let (status, _) = operator.fetch(page).await?;
        if status != page.status {
            *failures.entry((page.name.clone(), status)).or_default() += 1;
        }
    }
    let delivered_before = receiver.delivered();
    let started = Instant::now();
    for _ in 0..ROUNDS {
        for (page, h) in pages.iter().zip(&mut times) {
            let sent = Instant::now();
            let (status, _) = operator.fetch(page).await?;
            let us = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
            h.record(us.max(1))?;
            if status != page.status {
                *failures.entry((page.name.clone(), status)).or_default() += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    let delivered = receiver.delivered() - delivered_before;
    report.line(format!(
        "{ROUNDS} rounds of {} pages in {:.1} s; {delivered} deliveries meanwhile ({:.0}/s)",
        pages.len(),
        elapsed.as_secs_f64(),
        delivered as f64 / elapsed.as_secs_f64()
    ));
    report.metric(
        "deliveries_per_s_meanwhile",
        delivered as f64 / elapsed.as_secs_f64(),
    );
    let mut worst = (0.0, String::new());
    for (page, h) in pages.iter().zip(&times) {
        let line = report.latency(&page.name, h);
        report.line(line);
        let p99 = ms(h.value_at_quantile(0.99));
        if p99 > worst.0 {
            worst = (p99, page.name.clone());
        }
    }
    report.metric("worst_page_p99_ms", worst.0);
    report.line(format!("worst page: {} (p99 {:.2} ms)", worst.1, worst.0));
    for ((name, status), times) in &failures {
        report.line(format!(
            "WRONG STATUS: {name} answered {status} {times} times"
        ));
        report.valid = false;
    }
    Ok(report)
}

/// Both variants on one copy of the seed: idle first (it changes nothing), then draining.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let seed = opts
        .seed
        .as_deref()
        .context("console needs --seed: a seeded SQLite file, or with --pg a database name")?;
    let db = match &opts.pg {
        Some(url) => Database::postgres_from(url, Some(seed)).await?,
        None => Database::sqlite_copy(Path::new(seed))?,
    };
    let receiver = Receiver::start(Clock::start(), 1, &[]).await?;
    // The seed's endpoints point nowhere and have no signing secret: aim them at the receiver
    // and give each one, so the seed's due deliveries can drain there.
    // PostgreSQL's secrets carry their endpoint's application too.
    let app = if opts.pg.is_some() { "app_id, " } else { "" };
    db.execute(&format!(
        "UPDATE endpoints SET url = '{url}';
         INSERT INTO endpoint_secrets ({app}endpoint_id, key)
         SELECT {app}id, 'whsec_{SECRET}' FROM endpoints
         WHERE id NOT IN (SELECT endpoint_id FROM endpoint_secrets);",
        url = receiver.url(0)
    ))
    .await?;
    let targets = Targets::find(&db).await?;
    let backend = opts.backend();
    let mut reports = Vec::new();
    for (workers, variant) in [(false, "idle"), (true, "draining")] {
        let settings = VowSettings {
            workers,
            ..opts.vow.clone()
        };
        let vow = VowProcess::start(&settings, &db).await?;
        api(
            vow.base_url(),
            &format!("/api/v1/app/{}/msg", targets.app),
            r#"{"eventType":"order.paid","payload":{"console":"bench"}}"#,
            Some("console-bench"),
        )
        .await?;
        let title = format!("console {backend} {variant}");
        let report = measure(&vow, &targets, &receiver, title).await;
        vow.stop().await?;
        reports.push(report?);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    db.cleanup().await?;
    Ok(reports)
}
