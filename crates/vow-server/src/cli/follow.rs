//! Following one of vow's server-sent event streams (`vow listen`'s deliveries, `vow tail`'s
//! attempts): one connection hands each event over as it arrives and takes a stream silent for
//! longer than [`SILENCE`] for dead; [`reconnecting`] connects again with backoff until vow
//! refuses for good.
//!
//! # Layout
//! - [`sse`]: reading server-sent events from a byte stream.

pub mod sse;

use std::future::Future;
use std::time::Duration;

use anyhow::{bail, Context};
use reqwest::{RequestBuilder, StatusCode};

use super::output::{Colour, Printer};
use super::target::{problem, Client};

/// The longest a stream may stay silent (vow sends a keep-alive every 10 s) before it is taken
/// for dead and reconnected.
pub const SILENCE: Duration = Duration::from_secs(30);

/// The longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// How one connection ended.
pub enum Ended {
    /// It was connected and then ended: reconnect.
    Dropped,
    /// vow refused it for good (a 4xx: the token is refused, the thing streamed is gone).
    Refused(StatusCode, String),
}

/// One connection: sends `request` and hands each event to `on_event` until the stream ends.
/// An error from `on_event` ends the connection with that error.
pub async fn connect(
    client: &Client,
    request: RequestBuilder,
    mut on_event: impl FnMut(sse::Event) -> anyhow::Result<()>,
) -> anyhow::Result<Ended> {
    let mut response = request
        .header("accept", "text/event-stream")
        .send()
        .await
        .with_context(|| format!("cannot reach vow at {}", client.base()))?;
    let status = response.status();
    if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
        let body = response.text().await.unwrap_or_default();
        return Ok(Ended::Refused(status, problem(&body)));
    }
    if !status.is_success() {
        bail!("vow answered {status}");
    }
    let mut events = sse::Reader::default();
    loop {
        let chunk = tokio::time::timeout(SILENCE, response.chunk())
            .await
            .context("the stream went silent")?
            .context("the stream broke")?;
        let Some(chunk) = chunk else {
            return Ok(Ended::Dropped);
        };
        for event in events.push(&chunk) {
            on_event(event)?;
        }
    }
}

/// Runs `connection` again whenever it drops or fails (saying so on stderr unless the output
/// is JSON), after a pause that doubles up to [`MAX_BACKOFF`] while connections keep failing.
/// Ends only with an error vow will keep giving.
pub async fn reconnecting<F, C>(printer: &Printer, mut connection: C) -> anyhow::Result<()>
where
    C: FnMut() -> F,
    F: Future<Output = anyhow::Result<Ended>>,
{
    let mut backoff = Duration::from_millis(250);
    loop {
        match connection().await {
            Ok(Ended::Dropped) => backoff = Duration::from_millis(250),
            Ok(Ended::Refused(status, why)) => return Err(refused(status, &why)),
            Err(e) => {
                if !printer.json() {
                    eprintln!(
                        "{}",
                        printer.paint(&format!("Disconnected: {e:#}"), Colour::Yellow)
                    );
                }
            }
        }
        if !printer.json() {
            eprintln!("Reconnecting in {} ms…", backoff.as_millis());
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The error of a stream vow refused with `status`, saying `why`.
pub fn refused(status: StatusCode, why: &str) -> anyhow::Error {
    anyhow::anyhow!("vow refused the stream ({status}): {why}")
}
