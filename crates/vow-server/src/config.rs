//! Layered configuration: embedded defaults, then an optional TOML file, then `VOW_*` variables.
//!
//! The defaults live in `config.default.toml` (commented, embedded in the binary). Every key can
//! be set in a file passed with `--config` and overridden by `VOW_<KEY>`. [`Config::load`]
//! validates everything before the server starts and names the key at fault.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Toml};
use figment::Figment;
use serde::Deserialize;

/// The built-in defaults, as a commented TOML file.
pub const DEFAULTS: &str = include_str!("config.default.toml");

/// The longest `message_retention_minutes`: 10 years, as the other retentions.
const MAX_MESSAGE_RETENTION_MINUTES: u32 = 3650 * 24 * 60;

/// vow's settings, validated.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the API listens on.
    pub listen: SocketAddr,
    /// Database URL as given (empty = the default SQLite file).
    pub database_url: String,
    /// PostgreSQL pool size per process.
    pub database_max_connections: u32,
    /// Admin token; empty = stored or generated.
    pub admin_token: String,
    /// Graceful overload: the longest the oldest new write may wait before new ones are refused
    /// (0 = never).
    pub overload_max_wait_ms: u32,
    /// Backpressure: the due delivery backlog (of the endpoints that do not hold up their own
    /// deliveries) at which new messages and inbound deliveries are all refused; from half of
    /// it a share of them is, in proportion (0 = never; only where the delivery workers run).
    pub overload_max_due_deliveries: u32,
    /// Backpressure: how long a message accepted now may wait for its first attempt (the due
    /// deliveries of the same endpoints at the rate this process drains them) before new
    /// messages and inbound deliveries are all refused, milliseconds; from half of it a share of
    /// them is (0 = never; only where the delivery workers run).
    pub overload_max_due_wait_ms: u32,
    /// Request body limit in bytes.
    pub max_body_bytes: usize,
    /// Default grace period of a rotated-out endpoint secret.
    pub secret_rotation_grace_seconds: u32,
    /// Run delivery workers in this process.
    pub delivery_workers: bool,
    /// Retry schedule text (empty = the default).
    pub retry_schedule: String,
    /// Per-attempt timeout.
    pub delivery_timeout_ms: u32,
    /// Attempts in flight per process.
    pub delivery_max_in_flight: usize,
    /// Attempts in flight per endpoint.
    pub delivery_max_per_endpoint: usize,
    /// Delivery lease length.
    pub delivery_lease_seconds: u32,
    /// Consecutive dead-letters that disable an endpoint.
    pub disable_after_dead_letters: u32,
    /// Dead-letters of one endpoint within the window that raise its alert (0 = off).
    pub dead_letter_alert_threshold: u32,
    /// The dead-letter alert's window, seconds.
    pub dead_letter_alert_window_seconds: u32,
    /// How long a relay target is kept after its `vow listen` was last connected, seconds.
    pub relay_expiry_seconds: u32,
    /// CIDRs deliveries may reach although special-purpose.
    pub allowed_subnets: String,
    /// Operational webhook URL (empty = off).
    pub operational_webhook_url: String,
    /// Default payload retention, days.
    pub payload_retention_days: u16,
    /// Attempt response body retention, days.
    pub response_retention_days: u16,
    /// How long a message is kept (with its deliveries and attempts) after its creation,
    /// minutes (0 = forever).
    pub message_retention_minutes: u32,
    /// Raw inbound payload (and rejection record) retention, days.
    pub inbound_retention_days: u16,
    /// Rejection rows kept per source (the newest; counts by reason stay exact).
    pub inbound_rejections_kept: u32,
    /// Routes on which a request without `Idempotency-Key` is refused (comma-separated names;
    /// empty = none).
    pub require_idempotency_key: String,
    /// How long the first request with a key holds it before a retry may take it over, seconds.
    pub idempotency_lease_seconds: u32,
    /// How long a completed request's response is replayed under its key, hours.
    pub idempotency_retention_hours: u32,
    /// How long an expired key stays refused (its tombstone) before it is free again, days.
    pub idempotency_tombstone_days: u16,
    /// How long a console session lasts after login, hours.
    pub console_session_hours: u32,
    /// Whether the console's session cookie is marked `Secure` (vow is reached over TLS).
    pub console_secure_cookies: bool,
    /// Where vow is reached from outside, the base of app portal links (empty = the request's
    /// `Host`).
    pub public_url: String,
    /// How long an app portal token lasts by default, hours.
    pub portal_token_hours: u32,
    /// The portal pages' CSP `frame-ancestors` source list.
    pub portal_frame_ancestors: String,
    /// The name the portal pages show.
    pub portal_brand_name: String,
    /// The portal pages' accent colour, `#rrggbb`.
    pub portal_brand_accent: String,
    /// Log filter.
    pub log: String,
    /// Log format.
    pub log_format: LogFormat,
    /// OTLP/HTTP collector traces are exported to, e.g. `http://127.0.0.1:4318` (empty = off).
    pub otel_endpoint: String,
    /// The `service.name` of the exported traces.
    pub otel_service_name: String,
}

impl Config {
    /// The routes named in `require_idempotency_key`, or the first name that is not one of
    /// [`crate::http::idempotency::ROUTES`].
    pub fn idempotency_required(&self) -> Result<Vec<String>, String> {
        self.require_idempotency_key
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| match crate::http::idempotency::route::named(name) {
                Some(_) => Ok(name.to_owned()),
                None => Err(name.to_owned()),
            })
            .collect()
    }
}

/// How logs are printed.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Which store the database URL selects.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// Embedded SQLite at this path.
    Sqlite(PathBuf),
    /// PostgreSQL at this URL.
    Postgres(String),
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Database::Sqlite(p) => write!(f, "Sqlite({})", p.display()),
            Database::Postgres(_) => f.write_str("Postgres(<redacted>)"),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database", &self.database().ok())
            .field("database_max_connections", &self.database_max_connections)
            .field("admin_token", &"<redacted>")
            .field("max_body_bytes", &self.max_body_bytes)
            .field("log", &self.log)
            .field("log_format", &self.log_format)
            .finish()
    }
}

/// A setting is missing, of the wrong type, or out of range.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading or merging the layers failed (figment names the key and the layer).
    #[error("invalid configuration: {0}")]
    Layers(#[from] Box<figment::Error>),
    /// A value has the right type but is not allowed.
    #[error("invalid configuration: `{key}` {problem}")]
    Invalid {
        /// The key (as written in the file; the variable is `VOW_` + upper case).
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::from_figment(Self::figment(file))
    }

    /// The layered sources, for tests that add their own.
    pub fn figment(file: Option<&Path>) -> Figment {
        let mut fig = Figment::from(Toml::string(DEFAULTS));
        if let Some(path) = file {
            fig = fig.merge(Toml::file_exact(path));
        }
        // `VOW_CONFIG` names the file (read by the CLI) and `VOW_TEST_*` belong to the test
        // suite; every other `VOW_*` variable must be a setting, so a typo fails loudly.
        fig.merge(
            Env::prefixed("VOW_")
                .ignore(&["config"])
                .filter(|key| !key.as_str().to_ascii_lowercase().starts_with("test_")),
        )
    }

    /// The built-in defaults with `toml` applied on top, ignoring files and the environment
    /// (`vow demo`, tests).
    pub fn from_defaults_and(toml: &str) -> Result<Config, ConfigError> {
        Self::from_figment(Figment::from(Toml::string(DEFAULTS)).merge(Toml::string(toml)))
    }

    /// Extracts and validates a config from any figment.
    pub fn from_figment(fig: Figment) -> Result<Config, ConfigError> {
        let config: Config = fig.extract().map_err(Box::new)?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, problem: &str| {
            Err(ConfigError::Invalid {
                key,
                problem: problem.to_string(),
            })
        };
        self.database()?;
        if self.database_max_connections == 0 {
            return invalid("database_max_connections", "must be at least 1");
        }
        if self.max_body_bytes < 1024 {
            return invalid("max_body_bytes", "must be at least 1024");
        }
        if self.secret_rotation_grace_seconds > 7 * 24 * 3600 {
            return invalid(
                "secret_rotation_grace_seconds",
                "must be at most 604800 (7 days)",
            );
        }
        self.schedule()?;
        self.address_policy()?;
        if !self.operational_webhook_url.is_empty() {
            if let Err(e) = vow_core::EndpointUrl::parse(self.operational_webhook_url.as_str()) {
                return invalid("operational_webhook_url", &e.message);
            }
        }
        if !(1..=3600).contains(&self.delivery_lease_seconds) {
            return invalid("delivery_lease_seconds", "must be between 1 and 3600");
        }
        if !(1..=86_400).contains(&self.dead_letter_alert_window_seconds) {
            return invalid(
                "dead_letter_alert_window_seconds",
                "must be between 1 and 86400 (a day)",
            );
        }
        if !(1..=30 * 86_400).contains(&self.relay_expiry_seconds) {
            return invalid(
                "relay_expiry_seconds",
                "must be between 1 and 2592000 (30 days)",
            );
        }
        if !(1..=3650).contains(&self.payload_retention_days) {
            return invalid("payload_retention_days", "must be between 1 and 3650");
        }
        if let Err(unknown) = self.idempotency_required() {
            return invalid(
                "require_idempotency_key",
                &format!(
                    "names {unknown:?}; the routes that take a key are: {}",
                    crate::http::idempotency::ROUTES
                        .iter()
                        .map(|r| r.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        self.validate_idempotency()?;
        self.validate_portal()?;
        if !(1..=3650).contains(&self.response_retention_days) {
            return invalid("response_retention_days", "must be between 1 and 3650");
        }
        if self.message_retention_minutes > MAX_MESSAGE_RETENTION_MINUTES {
            return invalid(
                "message_retention_minutes",
                "must be between 0 (keep messages forever) and 5256000 (10 years)",
            );
        }
        if !(1..=3650).contains(&self.inbound_retention_days) {
            return invalid("inbound_retention_days", "must be between 1 and 3650");
        }
        if !(1..=100_000).contains(&self.inbound_rejections_kept) {
            return invalid("inbound_rejections_kept", "must be between 1 and 100000");
        }
        if u64::from(self.overload_max_due_deliveries) > vow_store::overview::COUNT_CAP {
            return invalid("overload_max_due_deliveries", "must be between 0 and 10000");
        }
        if self.overload_max_due_wait_ms > 3_600_000 {
            return invalid(
                "overload_max_due_wait_ms",
                "must be between 0 and 3600000 (1 h)",
            );
        }
        if self.overload_max_wait_ms > 60_000 {
            return invalid("overload_max_wait_ms", "must be between 0 and 60000");
        }
        if !(100..=120_000).contains(&self.delivery_timeout_ms) {
            return invalid("delivery_timeout_ms", "must be between 100 and 120000");
        }
        if self.delivery_max_in_flight == 0 || self.delivery_max_per_endpoint == 0 {
            return invalid(
                "delivery_max_in_flight",
                "and delivery_max_per_endpoint must be at least 1",
            );
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log) {
            return invalid("log", &format!("is not a valid filter: {e}"));
        }
        if let Err(problem) = check_base_url(&self.otel_endpoint) {
            return invalid("otel_endpoint", &problem);
        }
        if self.otel_service_name.trim().is_empty() {
            return invalid("otel_service_name", "must not be empty");
        }
        Ok(())
    }

    /// The idempotency record lifetimes: a lease of 1 s to 1 h, shorter than the retention;
    /// a retention of 1 h to 1 year; a tombstone of 0 (the key is free once its record expires)
    /// to 3650 days.
    fn validate_idempotency(&self) -> Result<(), ConfigError> {
        let invalid = |key, problem: &str| {
            Err(ConfigError::Invalid {
                key,
                problem: problem.to_string(),
            })
        };
        if !(1..=3600).contains(&self.idempotency_lease_seconds) {
            return invalid("idempotency_lease_seconds", "must be between 1 and 3600");
        }
        if !(1..=8760).contains(&self.idempotency_retention_hours) {
            return invalid(
                "idempotency_retention_hours",
                "must be between 1 and 8760 (1 year)",
            );
        }
        if u64::from(self.idempotency_lease_seconds)
            >= u64::from(self.idempotency_retention_hours) * 3600
        {
            return invalid(
                "idempotency_lease_seconds",
                "must be shorter than idempotency_retention_hours",
            );
        }
        if self.idempotency_tombstone_days > 3650 {
            return invalid("idempotency_tombstone_days", "must be at most 3650");
        }
        if !(1..=720).contains(&self.console_session_hours) {
            return invalid("console_session_hours", "must be between 1 and 720");
        }
        Ok(())
    }

    /// The app portal's settings: a default token lifetime of 1 to 168 hours; a `public_url`
    /// that is an http(s) URL without credentials, query, fragment or trailing slash; a
    /// `frame-ancestors` list that cannot end the directive or the header; a brand name of 1 to
    /// 64 printable characters; an accent colour `#rrggbb`.
    fn validate_portal(&self) -> Result<(), ConfigError> {
        let invalid = |key, problem: &str| {
            Err(ConfigError::Invalid {
                key,
                problem: problem.to_string(),
            })
        };
        if !(1..=168).contains(&self.portal_token_hours) {
            return invalid("portal_token_hours", "must be between 1 and 168 (7 days)");
        }
        if let Err(problem) = check_base_url(&self.public_url) {
            return invalid("public_url", &problem);
        }
        let ancestors = self.portal_frame_ancestors.trim();
        if ancestors.is_empty()
            || !ancestors
                .chars()
                .all(|c| c == ' ' || (c.is_ascii_graphic() && c != ';' && c != ','))
        {
            return invalid(
                "portal_frame_ancestors",
                "must be a CSP source list (e.g. \"'none'\" or \"https://app.example.com\"): \
                 printable ASCII separated by spaces, without `;` or `,`",
            );
        }
        let name = &self.portal_brand_name;
        if name.trim().is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control)
        {
            return invalid(
                "portal_brand_name",
                "must be 1 to 64 characters, none of them control characters",
            );
        }
        let accent = self.portal_brand_accent.as_bytes();
        if accent.len() != 7 || accent[0] != b'#' || !accent[1..].iter().all(u8::is_ascii_hexdigit)
        {
            return invalid(
                "portal_brand_accent",
                "must be a colour written #rrggbb (e.g. #2563eb)",
            );
        }
        Ok(())
    }

    /// How long the retention cleaner keeps each kind of content.
    pub fn retention(&self) -> crate::retention::Kept {
        let minutes = i64::from(self.message_retention_minutes);
        crate::retention::Kept {
            messages: (minutes > 0).then(|| chrono::Duration::minutes(minutes)),
            responses: chrono::Duration::days(self.response_retention_days.into()),
            inbound: chrono::Duration::days(self.inbound_retention_days.into()),
        }
    }

    /// The due backlog at which intake is refused ([`crate::admission`]); `None`: never.
    pub fn overload_due_bound(&self) -> Option<crate::admission::DueBound> {
        let wait = u64::from(self.overload_max_due_wait_ms);
        let bound = crate::admission::DueBound {
            deliveries: (self.overload_max_due_deliveries > 0)
                .then(|| self.overload_max_due_deliveries.into()),
            wait: (wait > 0).then(|| std::time::Duration::from_millis(wait)),
        };
        (bound != crate::admission::DueBound::default()).then_some(bound)
    }

    /// How long the oldest new write may wait before new ones are refused; `None`: never.
    pub fn overload_max_wait(&self) -> Option<std::time::Duration> {
        (self.overload_max_wait_ms > 0)
            .then(|| std::time::Duration::from_millis(self.overload_max_wait_ms.into()))
    }

    /// The app portal's settings.
    pub fn portal(&self) -> crate::state::PortalSettings {
        crate::state::PortalSettings {
            token_ttl: std::time::Duration::from_secs(u64::from(self.portal_token_hours) * 3600),
            public_url: Some(self.public_url.clone()).filter(|u| !u.is_empty()),
            frame_ancestors: self.portal_frame_ancestors.trim().to_string(),
            brand_name: self.portal_brand_name.clone(),
            brand_accent: self.portal_brand_accent.to_ascii_lowercase(),
        }
    }

    /// How console sessions are kept.
    pub fn console(&self) -> crate::state::ConsoleSettings {
        crate::state::ConsoleSettings {
            session_ttl: std::time::Duration::from_secs(
                u64::from(self.console_session_hours) * 3600,
            ),
            secure_cookies: self.console_secure_cookies,
        }
    }

    /// How long `Idempotency-Key` records live: the lease, the replay window and the tombstone.
    pub fn idempotency(&self) -> vow_idempotency::Settings {
        let hours = |h: u64| std::time::Duration::from_secs(h * 3600);
        vow_idempotency::Settings {
            lease: std::time::Duration::from_secs(self.idempotency_lease_seconds.into()),
            ttl: hours(self.idempotency_retention_hours.into()),
            tombstone: hours(u64::from(self.idempotency_tombstone_days) * 24),
        }
    }

    /// The default retry schedule.
    pub fn schedule(&self) -> Result<vow_core::RetrySchedule, ConfigError> {
        if self.retry_schedule.trim().is_empty() {
            return Ok(vow_core::RetrySchedule::default());
        }
        self.retry_schedule
            .parse()
            .map_err(|e: vow_core::ScheduleError| ConfigError::Invalid {
                key: "retry_schedule",
                problem: format!("is not a schedule: {e}"),
            })
    }

    /// The SSRF guard's allow-list.
    pub fn address_policy(&self) -> Result<vow_egress::AddressPolicy, ConfigError> {
        vow_egress::AddressPolicy::parse_allow_list(&self.allowed_subnets).map_err(|e| {
            ConfigError::Invalid {
                key: "allowed_subnets",
                problem: format!("is not a list of CIDRs: {e}"),
            }
        })
    }

    /// The delivery workers' settings.
    pub fn delivery(&self) -> Result<crate::delivery::DeliverySettings, ConfigError> {
        Ok(crate::delivery::DeliverySettings {
            schedule: self.schedule()?,
            timeout: std::time::Duration::from_millis(self.delivery_timeout_ms.into()),
            max_in_flight: self.delivery_max_in_flight,
            max_per_endpoint: self.delivery_max_per_endpoint,
            // A claim from PostgreSQL is a network round trip and a commit, during which an
            // endpoint's slots would idle; one from SQLite is cheap, and a larger one holds
            // the single writer longer (claiming ahead raised SQLite's ack p99 under load:
            // BENCHMARKS.md).
            claim_ahead: match self.database()? {
                Database::Postgres(_) => 2,
                Database::Sqlite(_) => 1,
            },
            disable_after: self.disable_after_dead_letters,
            lease: std::time::Duration::from_secs(self.delivery_lease_seconds.into()),
            ..Default::default()
        })
    }

    /// The dead-letter rate alert's settings; `None` when it is off.
    pub fn dead_letter_alert(&self) -> Option<crate::delivery::alert::AlertSettings> {
        (self.dead_letter_alert_threshold > 0).then(|| crate::delivery::alert::AlertSettings {
            threshold: self.dead_letter_alert_threshold,
            window: std::time::Duration::from_secs(self.dead_letter_alert_window_seconds.into()),
        })
    }

    /// The store the database URL selects.
    pub fn database(&self) -> Result<Database, ConfigError> {
        parse_database_url(&self.database_url)
    }
}

/// Empty, or an absolute `http`/`https` URL with a host and no credentials, query, fragment or
/// trailing slash: a base that paths are appended to (`/portal/...` for `public_url`,
/// `/v1/traces` for `otel_endpoint`).
fn check_base_url(raw: &str) -> Result<(), String> {
    if raw.is_empty() {
        return Ok(());
    }
    let url = url::Url::parse(raw).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("must be http or https (got {:?})", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not hold credentials".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or a fragment".into());
    }
    if raw.ends_with('/') {
        return Err(format!(
            "must not end with `/` (write {:?})",
            raw.trim_end_matches('/')
        ));
    }
    Ok(())
}

/// `""` → `./vow-data/vow.db`; `sqlite:///abs` and `sqlite://rel`; `postgres://` or
/// `postgresql://` → PostgreSQL.
pub fn parse_database_url(url: &str) -> Result<Database, ConfigError> {
    let invalid = |problem: String| ConfigError::Invalid {
        key: "database_url",
        problem,
    };
    if url.is_empty() {
        return Ok(Database::Sqlite(PathBuf::from("vow-data").join("vow.db")));
    }
    if let Some(path) = url.strip_prefix("sqlite://") {
        let path = path.split('?').next().unwrap_or_default();
        if path.is_empty() || path == "/" {
            return Err(invalid(
                "names no SQLite file (e.g. sqlite:///var/lib/vow/vow.db)".into(),
            ));
        }
        return Ok(Database::Sqlite(PathBuf::from(path)));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Database::Postgres(url.to_string()));
    }
    let scheme = url.split("://").next().unwrap_or(url);
    Err(invalid(format!(
        "must start with sqlite:// or postgres:// (got scheme {scheme:?})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::providers::Serialized;

    /// The embedded defaults with `pairs` over them. Not [`Config::figment`]: that reads the
    /// `VOW_*` variables, which other tests here set (figment's Jail) while these run.
    fn with(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut fig = Figment::from(Toml::string(DEFAULTS));
        for (k, v) in pairs {
            fig = fig.merge(Serialized::default(k, v));
        }
        Config::from_figment(fig)
    }

    #[test]
    fn the_embedded_defaults_are_valid() {
        let c = Config::from_figment(Figment::from(Toml::string(DEFAULTS))).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8071");
        assert_eq!(
            c.database().unwrap(),
            Database::Sqlite(PathBuf::from("vow-data/vow.db"))
        );
        assert_eq!(c.max_body_bytes, 1 << 20);
    }

    #[test]
    fn database_urls_select_the_store() {
        assert_eq!(
            parse_database_url("sqlite:///var/lib/vow.db").unwrap(),
            Database::Sqlite(PathBuf::from("/var/lib/vow.db"))
        );
        assert_eq!(
            parse_database_url("sqlite://data/x.db").unwrap(),
            Database::Sqlite(PathBuf::from("data/x.db"))
        );
        assert!(matches!(
            parse_database_url("postgres://u@h/db").unwrap(),
            Database::Postgres(_)
        ));
        let err = parse_database_url("mysql://x").unwrap_err().to_string();
        assert!(err.contains("database_url"), "{err}");
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let err = with(&[("listen", "not-an-address")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen"), "{err}");
        let err = with(&[("max_body_bytes", "12")]).unwrap_err().to_string();
        assert!(err.contains("max_body_bytes"), "{err}");
        let err = with(&[("log_format", "xml")]).unwrap_err().to_string();
        assert!(err.contains("log_format"), "{err}");
        let err = with(&[("retry_schedule", "1s,,2s")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("retry_schedule"), "{err}");
        let err = with(&[("allowed_subnets", "10.0.0.0/99")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("allowed_subnets"), "{err}");
    }

    #[test]
    fn messages_are_kept_90_days_by_default_and_forever_with_0() {
        let kept = with(&[]).unwrap().retention();
        assert_eq!(kept.messages, Some(chrono::Duration::days(90)));
        assert_eq!(kept.responses, chrono::Duration::days(30));
        assert_eq!(kept.inbound, chrono::Duration::days(30));
        let c = Config::from_defaults_and("message_retention_minutes = 5").unwrap();
        assert_eq!(c.retention().messages, Some(chrono::Duration::minutes(5)));
        let c = Config::from_defaults_and("message_retention_minutes = 0").unwrap();
        assert_eq!(c.retention().messages, None);
        Config::from_defaults_and("message_retention_minutes = 5256000").unwrap();
        for toml in [
            "message_retention_minutes = 5256001",
            "message_retention_minutes = -1",
        ] {
            let err = Config::from_defaults_and(toml).unwrap_err().to_string();
            assert!(err.contains("message_retention_minutes"), "{toml}: {err}");
        }
    }

    #[test]
    fn the_due_backlog_bound_is_a_count_and_a_wait_by_default_and_either_can_be_off() {
        use crate::admission::DueBound;
        use std::time::Duration;
        let bound = |toml: &str| {
            Config::from_defaults_and(toml)
                .unwrap()
                .overload_due_bound()
        };
        let count = |n| DueBound {
            deliveries: Some(n),
            wait: None,
        };
        assert_eq!(
            with(&[]).unwrap().overload_due_bound(),
            Some(DueBound {
                wait: Some(Duration::from_millis(1_000)),
                ..count(10_000)
            })
        );
        assert_eq!(
            bound("overload_max_due_wait_ms = 0"),
            Some(count(10_000)),
            "the count alone"
        );
        let wait_only = "overload_max_due_deliveries = 0\noverload_max_due_wait_ms = 3600000";
        assert_eq!(
            bound(wait_only),
            Some(DueBound {
                deliveries: None,
                wait: Some(Duration::from_secs(3_600)),
            })
        );
        let both_off = "overload_max_due_deliveries = 0\noverload_max_due_wait_ms = 0";
        assert_eq!(bound(both_off), None, "both off");
        for toml in [
            "overload_max_due_wait_ms = 3600001",
            "overload_max_due_wait_ms = -1",
        ] {
            let err = Config::from_defaults_and(toml).unwrap_err().to_string();
            assert!(err.contains("overload_max_due_wait_ms"), "{toml}: {err}");
        }
    }

    #[test]
    fn the_default_idempotency_lifetimes_are_the_records_own_defaults() {
        let c = with(&[]).unwrap();
        assert_eq!(c.idempotency(), vow_idempotency::Settings::default());
    }

    #[test]
    fn idempotency_lifetimes_are_read_in_their_units() {
        let c = Config::from_defaults_and(
            "idempotency_lease_seconds = 5\n\
             idempotency_retention_hours = 2\n\
             idempotency_tombstone_days = 0",
        )
        .unwrap();
        let s = c.idempotency();
        assert_eq!(s.lease, std::time::Duration::from_secs(5));
        assert_eq!(s.ttl, std::time::Duration::from_secs(2 * 3600));
        assert_eq!(s.tombstone, std::time::Duration::ZERO);
        let c = Config::from_defaults_and("idempotency_tombstone_days = 30").unwrap();
        assert_eq!(
            c.idempotency().tombstone,
            std::time::Duration::from_secs(30 * 86_400)
        );
    }

    #[test]
    fn invalid_idempotency_lifetimes_are_refused_naming_the_key() {
        let refused = |toml: &str, key: &str, why: &str| {
            let err = Config::from_defaults_and(toml).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(why), "{toml}: {err}");
        };
        let lease = "idempotency_lease_seconds";
        let retention = "idempotency_retention_hours";
        let tombstone = "idempotency_tombstone_days";
        refused(&format!("{lease} = 0"), lease, "between 1 and 3600");
        refused(&format!("{lease} = 3601"), lease, "between 1 and 3600");
        refused(&format!("{lease} = -5"), lease, "");
        refused(&format!("{lease} = \"soon\""), lease, "");
        refused(&format!("{retention} = 0"), retention, "between 1 and 8760");
        refused(
            &format!("{retention} = 8761"),
            retention,
            "between 1 and 8760",
        );
        refused(
            &format!("{lease} = 3600\n{retention} = 1"),
            lease,
            "shorter than idempotency_retention_hours",
        );
        refused(&format!("{tombstone} = 3651"), tombstone, "at most 3650");
        refused(&format!("{tombstone} = -1"), tombstone, "");
        // The edges that are allowed.
        Config::from_defaults_and(&format!("{lease} = 3599\n{retention} = 1\n{tombstone} = 0"))
            .unwrap();
        Config::from_defaults_and(&format!(
            "{lease} = 1\n{retention} = 8760\n{tombstone} = 3650"
        ))
        .unwrap();
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
    fn idempotency_lifetimes_are_set_by_their_variables() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("VOW_IDEMPOTENCY_RETENTION_HOURS", "3");
            jail.set_env("VOW_IDEMPOTENCY_TOMBSTONE_DAYS", "1");
            let c = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(
                c.idempotency().ttl,
                std::time::Duration::from_secs(3 * 3600)
            );
            assert_eq!(
                c.idempotency().tombstone,
                std::time::Duration::from_secs(86_400)
            );
            jail.set_env("VOW_IDEMPOTENCY_LEASE_SECONDS", "0");
            let err = Config::from_figment(Config::figment(None)).unwrap_err();
            assert!(
                err.to_string().contains("idempotency_lease_seconds"),
                "{err}"
            );
            Ok(())
        });
    }

    #[test]
    fn the_routes_that_require_a_key_are_read_from_a_list() {
        let c = with(&[("require_idempotency_key", " message.create ,")]).unwrap();
        assert_eq!(c.idempotency_required().unwrap(), vec!["message.create"]);
        let c = with(&[]).unwrap();
        assert!(c.idempotency_required().unwrap().is_empty());
        let c = with(&[("require_idempotency_key", "message.create,endpoint.create")]).unwrap();
        assert_eq!(
            c.idempotency_required().unwrap(),
            vec!["message.create", "endpoint.create"]
        );
        let err = with(&[("require_idempotency_key", "message.create, message.delete")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("require_idempotency_key") && err.contains("message.delete"),
            "{err}"
        );
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
    fn the_cli_and_test_variables_are_not_settings() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("VOW_CONFIG", "/nonexistent.toml");
            jail.set_env("VOW_TEST_DATABASE_URL", "postgres://x");
            jail.set_env("VOW_LISTEN", "127.0.0.1:9999");
            let c = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(c.listen.port(), 9999);
            jail.set_env("VOW_LISTN", "127.0.0.1:1");
            let err = Config::from_figment(Config::figment(None)).unwrap_err();
            assert!(err.to_string().contains("listn"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_portal_settings_default_and_are_read() {
        let s = with(&[]).unwrap().portal();
        assert_eq!(s.token_ttl, std::time::Duration::from_secs(24 * 3600));
        assert_eq!(s.public_url, None);
        assert_eq!(s.frame_ancestors, "'none'");
        assert_eq!(
            (s.brand_name.as_str(), s.brand_accent.as_str()),
            ("vow", "#2563eb")
        );
        let s = Config::from_defaults_and(
            "public_url = \"https://hooks.example.com/vow\"\n\
             portal_token_hours = 168\n\
             portal_frame_ancestors = \"'self' https://app.example.com\"\n\
             portal_brand_name = \"Acme Hooks\"\n\
             portal_brand_accent = \"#AB12ef\"",
        )
        .unwrap()
        .portal();
        assert_eq!(s.token_ttl, std::time::Duration::from_secs(168 * 3600));
        assert_eq!(
            s.public_url.as_deref(),
            Some("https://hooks.example.com/vow")
        );
        assert_eq!(s.frame_ancestors, "'self' https://app.example.com");
        assert_eq!(
            (s.brand_name.as_str(), s.brand_accent.as_str()),
            ("Acme Hooks", "#ab12ef")
        );
    }

    #[test]
    fn invalid_portal_settings_are_refused_naming_the_key() {
        let refused = |key: &str, value: &str, why: &str| {
            let err = with(&[(key, value)]).unwrap_err().to_string();
            assert!(
                err.contains(key) && err.contains(why),
                "{key}={value}: {err}"
            );
        };
        for hours in [0, 169] {
            let err = Config::from_defaults_and(&format!("portal_token_hours = {hours}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("portal_token_hours") && err.contains("between 1 and 168"));
        }
        refused(
            "public_url",
            "https://hooks.example.com/",
            "must not end with `/`",
        );
        refused("public_url", "ftp://hooks.example.com", "http or https");
        refused("public_url", "hooks.example.com", "is not a URL");
        refused("public_url", "https://u:p@hooks.example.com", "credentials");
        refused("public_url", "https://hooks.example.com?a=1", "query");
        refused(
            "portal_frame_ancestors",
            "'self'; script-src *",
            "without `;`",
        );
        refused(
            "portal_frame_ancestors",
            "a.com, b.com",
            "without `;` or `,`",
        );
        refused(
            "portal_frame_ancestors",
            "a.com\nX-Evil: 1",
            "printable ASCII",
        );
        refused("portal_frame_ancestors", " ", "source list");
        refused("portal_brand_name", "", "1 to 64");
        refused("portal_brand_name", &"x".repeat(65), "1 to 64");
        refused("portal_brand_name", "a\u{7}b", "control");
        refused("portal_brand_accent", "blue", "#rrggbb");
        refused("portal_brand_accent", "#12345g", "#rrggbb");
        refused("portal_brand_accent", "#1234567", "#rrggbb");
        with(&[("public_url", "http://127.0.0.1:8071")]).unwrap();
    }

    #[test]
    fn traces_are_off_by_default_and_a_bad_collector_url_is_refused() {
        let c = with(&[]).unwrap();
        assert_eq!(
            (c.otel_endpoint.as_str(), c.otel_service_name.as_str()),
            ("", "vow")
        );
        let c = with(&[("otel_endpoint", "http://127.0.0.1:4318")]).unwrap();
        assert_eq!(c.otel_endpoint, "http://127.0.0.1:4318");
        for (value, why) in [
            ("127.0.0.1:4318", "is not a URL"),
            ("grpc://127.0.0.1:4317", "http or https"),
            ("http://127.0.0.1:4318/", "must not end with `/`"),
        ] {
            let err = with(&[("otel_endpoint", value)]).unwrap_err().to_string();
            assert!(
                err.contains("otel_endpoint") && err.contains(why),
                "{value}: {err}"
            );
        }
        let err = with(&[("otel_service_name", " ")]).unwrap_err().to_string();
        assert!(err.contains("otel_service_name"), "{err}");
    }

    #[test]
    fn debug_output_hides_the_token_and_dsn() {
        let c = with(&[
            ("admin_token", "sekrit-token"),
            ("database_url", "postgres://u:pw@h/db"),
        ])
        .unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("sekrit"), "{shown}");
        assert!(!shown.contains("pw@"), "{shown}");
    }
}
