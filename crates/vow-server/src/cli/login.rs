//! `vow login`: checks a token against a running vow, then saves it as a profile that the
//! other client commands use (`--profile`). The token is read from `--token`, `VOW_TOKEN`, or
//! standard input, and never printed.

use std::io::{BufRead, IsTerminal};

use anyhow::{bail, Context};
use clap::Args;
use reqwest::{Method, StatusCode};
use serde::Serialize;

use super::output::Colour;
use super::target::{problem, Client, ClientArgs, Profile, Profiles};

/// `vow login`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow login --url https://vow.example.com          (then paste the token)
  echo \"$ADMIN_TOKEN\" | vow login --url http://127.0.0.1:8071 --profile local
  vow send --profile local --app my-shop --type ping --data '{}'")]
pub struct LoginArgs {
    /// Which vow, as whom, and how to print (`--url`, `--token`, `--profile`, `--output`).
    #[command(flatten)]
    pub client: ClientArgs,
}

/// What the token may do, as vow answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Access {
    /// It lists applications: the admin token.
    Admin,
    /// vow knows it but refuses listing applications: an app portal token, one application's.
    Portal,
}

/// What `vow login` prints with `--output json` (never the token).
#[derive(Debug, Serialize)]
struct LoggedIn<'a> {
    profile: &'a str,
    url: &'a str,
    access: Access,
    path: String,
}

/// Checks the token and saves the profile.
pub async fn run(args: &LoginArgs) -> anyhow::Result<()> {
    let name = args.client.target.profile_name();
    let mut profiles = Profiles::load()?;
    let url = args.client.target.url(profiles.get(name));
    let token = match &args.client.target.token {
        Some(token) => token.clone(),
        None => read_token()?,
    };
    if token.is_empty() {
        bail!("no token: give --token, set VOW_TOKEN, or type it on standard input");
    }
    let client = Client::new(&url, Some(token.clone()))?;
    let access = check(&client).await?;
    let path = profiles.save(
        name,
        Profile {
            url: client.base().to_string(),
            token: Some(token),
        },
    )?;
    let path = path.display().to_string();
    let printer = args.client.printer();
    if printer.json() {
        return printer.print_json(&LoggedIn {
            profile: name,
            url: client.base(),
            access,
            path,
        });
    }
    let what = match access {
        Access::Admin => "the admin token",
        Access::Portal => "an app portal token (one application's routes only)",
    };
    println!(
        "{} to {} with {what}; saved profile {name:?} in {path}",
        printer.paint("logged in", Colour::Green),
        client.base(),
    );
    Ok(())
}

/// The token from standard input: asked for without echo on a terminal, else its first line.
fn read_token() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let line = if stdin.is_terminal() {
        rpassword::prompt_password("vow API token (not shown): ")
            .context("reading the token from the terminal")?
    } else {
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .context("reading the token from standard input")?;
        line
    };
    Ok(line.trim().to_string())
}

/// What the token may do: `GET /api/v1/app?limit=1` lists for the admin token, answers 403
/// for a portal token (vow knows it, but it reaches one application only) and 401 for a token
/// vow does not know.
async fn check(client: &Client) -> anyhow::Result<Access> {
    const PATH: &str = "/api/v1/app?limit=1";
    let answer = client
        .request(Method::GET, PATH)
        .send()
        .await
        .with_context(|| {
            format!(
                "cannot reach vow at {} (is `vow serve` running there?)",
                client.base()
            )
        })?;
    match answer.status() {
        StatusCode::FORBIDDEN => Ok(Access::Portal),
        StatusCode::UNAUTHORIZED => bail!(
            "vow at {} refused the token (401): it is not its admin token nor a live app \
             portal token; nothing was saved",
            client.base()
        ),
        status if status.is_success() => {
            let list: serde_json::Value = answer.json().await.unwrap_or_default();
            if !list.get("data").is_some_and(serde_json::Value::is_array) {
                bail!(
                    "{} answered {PATH} with no application list: is it vow?",
                    client.base()
                );
            }
            Ok(Access::Admin)
        }
        status => {
            let body = answer.text().await.unwrap_or_default();
            bail!(
                "{PATH}: vow at {} answered {status}: {}; nothing was saved",
                client.base(),
                problem(&body)
            )
        }
    }
}
