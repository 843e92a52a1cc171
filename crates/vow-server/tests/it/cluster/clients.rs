//! Clients that post messages at a steady pace to one node and keep every answer they get:
//! when each request was sent, how long its answer took, its status, `Retry-After` and error
//! code, or why there was none.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header::RETRY_AFTER;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::helpers::TOKEN;

/// The longest a client waits for an answer; no request may need it.
pub(super) const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// One message create, as its client saw it.
#[derive(Debug, Clone)]
pub(super) struct Answer {
    pub(super) sent: Instant,
    pub(super) took: Duration,
    /// `None`: no answer within [`CLIENT_TIMEOUT`], or no connection (see `error`).
    pub(super) status: Option<u16>,
    pub(super) retry_after: Option<String>,
    /// The message id a 202 names.
    pub(super) id: Option<String>,
    /// The error code a 503 names (`store_unavailable`, `overloaded`).
    pub(super) code: Option<String>,
    pub(super) error: Option<String>,
}

/// Clients that each post a message every [`Clients::PACE`] until stopped, keeping every answer.
pub(super) struct Clients {
    answers: Arc<Mutex<Vec<Answer>>>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Clients {
    /// The pause between one client's requests: a steady load, whatever the answers.
    const PACE: Duration = Duration::from_millis(50);

    pub(super) fn start(base: &str, app: &str, n: usize) -> Clients {
        let (answers, stop) = (
            Arc::<Mutex<Vec<Answer>>>::default(),
            CancellationToken::new(),
        );
        let url = format!("{base}/api/v1/app/{app}/msg");
        let tasks = (0..n)
            .map(|c| {
                let (answers, stop, url) = (answers.clone(), stop.clone(), url.clone());
                tokio::spawn(async move {
                    let client = reqwest::Client::builder()
                        .timeout(CLIENT_TIMEOUT)
                        .build()
                        .unwrap();
                    for i in 0.. {
                        if stop.is_cancelled() {
                            break;
                        }
                        let body = json!({"eventType": "load.test", "payload": {"c": c, "i": i}});
                        let answer = create(&client, &url, &body).await;
                        answers.lock().unwrap().push(answer);
                        tokio::time::sleep(Self::PACE).await;
                    }
                })
            })
            .collect();
        Clients {
            answers,
            stop,
            tasks,
        }
    }

    pub(super) fn answers(&self) -> Vec<Answer> {
        self.answers.lock().unwrap().clone()
    }

    /// Stops the clients once their requests are answered; every answer.
    pub(super) async fn stop(self) -> Vec<Answer> {
        self.stop.cancel();
        for t in self.tasks {
            t.await.unwrap();
        }
        let answers = self.answers.lock().unwrap().clone();
        answers
    }
}

/// Posts `body` as a new message, timing the answer.
async fn create(client: &reqwest::Client, url: &str, body: &Value) -> Answer {
    let sent = Instant::now();
    let resp = client.post(url).bearer_auth(TOKEN).json(body).send().await;
    let (status, retry_after, body, error) = match resp {
        Ok(r) => {
            let retry_after = r.headers().get(RETRY_AFTER);
            let retry_after = retry_after.and_then(|v| v.to_str().ok()).map(str::to_owned);
            let status = r.status().as_u16();
            match r.json::<Value>().await {
                Ok(body) => (Some(status), retry_after, body, None),
                Err(e) => (None, retry_after, Value::Null, Some(chain(&e))),
            }
        }
        Err(e) => (None, None, Value::Null, Some(chain(&e))),
    };
    let id = (status == Some(202)).then(|| body["id"].as_str().map(str::to_owned));
    let code = body["code"].as_str().map(str::to_owned);
    Answer {
        sent,
        took: sent.elapsed(),
        status,
        retry_after,
        id: id.flatten(),
        code,
        error,
    }
}

/// An error and its causes, `: `-separated.
pub(super) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}
