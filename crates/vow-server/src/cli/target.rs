//! Which vow a client command talks to and as whom, and the HTTP client it talks with.
//!
//! Each setting comes from the first of: the flag (`--url`, `--token`), its variable
//! (`VOW_URL`, `VOW_TOKEN`), the profile (`--profile` / `VOW_PROFILE`, else `default`) in
//! `profiles.toml` under the user's config dir, which `vow login` writes; the URL falls back to
//! `http://127.0.0.1:8071`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use reqwest::{Method, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::output::{OutputArgs, Printer};

/// Where vow listens when nothing says otherwise (`vow serve`'s default).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8071";

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";

/// The flags that choose the vow a command talks to.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// vow's base URL (default: the profile's, else http://127.0.0.1:8071).
    #[arg(long, env = "VOW_URL", value_name = "URL")]
    pub url: Option<String>,
    /// The API token: the admin token, or an app portal token for one application.
    #[arg(long, env = "VOW_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// A profile written by `vow login` (default: `default`).
    #[arg(long, env = "VOW_PROFILE", value_name = "NAME")]
    pub profile: Option<String>,
}

impl TargetArgs {
    /// A client for the vow these flags, the environment and the profile name.
    pub fn client(&self) -> anyhow::Result<Client> {
        let name = self.profile_name();
        let profiles = Profiles::load()?;
        let profile = profiles.get(name);
        if self.profile.is_some() && profile.is_none() {
            bail!(
                "no profile {name:?} in {}: write one with `vow login --profile {name}`",
                profiles.path.display()
            );
        }
        let token = self
            .token
            .clone()
            .or_else(|| profile.and_then(|p| p.token.clone()));
        Client::new(&self.url(profile), token)
    }

    /// The profile these flags name, else `default`.
    pub fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or(DEFAULT_PROFILE)
    }

    /// The URL: the flag's, else `profile`'s, else [`DEFAULT_URL`].
    pub fn url(&self, profile: Option<&Profile>) -> String {
        self.url
            .clone()
            .or_else(|| profile.map(|p| p.url.clone()))
            .unwrap_or_else(|| DEFAULT_URL.to_string())
    }
}

/// The flags of every command that talks to a running vow: which vow and as whom, and how to
/// print what it answered.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Which vow, and as whom.
    #[command(flatten)]
    pub target: TargetArgs,
    /// How to print (`--output`).
    #[command(flatten)]
    pub output: OutputArgs,
}

impl ClientArgs {
    /// A client for the vow [`TargetArgs`] chooses.
    pub fn connect(&self) -> anyhow::Result<Client> {
        self.target.client()
    }

    /// The printer `--output` asks for.
    pub fn printer(&self) -> Printer {
        Printer::new(&self.output)
    }
}

/// One saved target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// vow's base URL.
    pub url: String,
    /// The token, if one is saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The profiles file: `[name]` tables of [`Profile`]s.
#[derive(Debug, Clone)]
pub struct Profiles {
    path: PathBuf,
    profiles: BTreeMap<String, Profile>,
}

impl Profiles {
    /// `$XDG_CONFIG_HOME/vow/profiles.toml`, else `$HOME/.config/vow/profiles.toml`.
    pub fn default_path() -> anyhow::Result<PathBuf> {
        let dir = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .context("neither XDG_CONFIG_HOME nor HOME is set: no config dir for profiles")?;
        Ok(dir.join("vow").join("profiles.toml"))
    }

    /// The profiles saved so far (none if the file does not exist).
    pub fn load() -> anyhow::Result<Self> {
        let path = Self::default_path()?;
        let profiles = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("reading the profiles in {}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Self { path, profiles })
    }

    /// The profile `name`, if saved.
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// Saves `profile` as `name`, readable by the user only (it holds a token).
    pub fn save(&mut self, name: &str, profile: Profile) -> anyhow::Result<&PathBuf> {
        self.profiles.insert(name.to_string(), profile);
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let text = toml::to_string(&self.profiles)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(&self.path)
            .with_context(|| format!("writing {}", self.path.display()))?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        Ok(&self.path)
    }
}

/// vow's API, as one target and token.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client for the vow at `base` (an `http(s)://` URL).
    pub fn new(base: &str, token: Option<String>) -> anyhow::Result<Self> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!("{base:?} is not an http:// or https:// URL (--url, VOW_URL)");
        }
        Ok(Self {
            http: reqwest::Client::builder()
                .user_agent(concat!("vow-cli/", env!("CARGO_PKG_VERSION")))
                .build()?,
            base,
            token,
        })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The token, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// An error naming where a token comes from, when there is none.
    pub fn require_token(&self) -> anyhow::Result<()> {
        if self.token.is_none() {
            bail!("no token: pass --token, set VOW_TOKEN, or save one with `vow login`");
        }
        Ok(())
    }

    /// A request to `path` (from `/api/...` on), with the token.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `GET path`, read as JSON.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let answer = self.send(self.request(Method::GET, path), path).await?;
        json(answer, path).await
    }

    /// `POST path` with a JSON body (and an `Idempotency-Key`), read as JSON.
    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        idempotency_key: Option<&str>,
    ) -> anyhow::Result<T> {
        let mut request = self.request(Method::POST, path).json(body);
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let answer = self.send(request, path).await?;
        json(answer, path).await
    }

    /// Sends `request`; a connection failure or an answer outside 2xx is an error that says
    /// what vow said.
    pub async fn send(&self, request: RequestBuilder, path: &str) -> anyhow::Result<Response> {
        let answer = request.send().await.with_context(|| {
            format!(
                "cannot reach vow at {} (is `vow serve` running there?)",
                self.base
            )
        })?;
        if answer.status().is_success() {
            return Ok(answer);
        }
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        bail!("{path}: vow answered {status}: {}", problem(&body))
    }
}

async fn json<T: DeserializeOwned>(answer: Response, path: &str) -> anyhow::Result<T> {
    let bytes = answer.bytes().await?;
    serde_json::from_slice(&bytes).with_context(|| format!("{path}: an answer vow should not give"))
}

/// What vow's error body says: Svix's `{code, detail}`, or a validation error's items.
pub(crate) fn problem(body: &str) -> String {
    #[derive(Deserialize)]
    struct Item {
        loc: Vec<String>,
        msg: String,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Problem {
        Http { code: String, detail: String },
        Validation { detail: Vec<Item> },
    }
    match serde_json::from_str::<Problem>(body) {
        Ok(Problem::Http { code, detail }) => format!("{detail} ({code})"),
        Ok(Problem::Validation { detail }) => detail
            .iter()
            .map(|i| format!("{}: {}", i.loc.join("."), i.msg))
            .collect::<Vec<_>>()
            .join("; "),
        Err(_) if body.trim().is_empty() => "no details".to_string(),
        Err(_) => body.trim().chars().take(300).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn vow_s_error_bodies_are_said_in_one_line() {
        assert_eq!(
            problem(r#"{"code":"not_found","detail":"Application not found"}"#),
            "Application not found (not_found)"
        );
        assert_eq!(
            problem(r#"{"detail":[{"loc":["body","eventType"],"msg":"missing","type":"x"}]}"#),
            "body.eventType: missing"
        );
        assert_eq!(problem(""), "no details");
    }
}
