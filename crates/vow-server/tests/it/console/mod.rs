//! The operator console and the app portal as people meet them: a real headless Chromium
//! (Debian's `chromium`, driven through `chromedriver`) against a real `vow serve` child, on
//! SQLite and PostgreSQL, with deliveries counted at a real receiver. Set
//! `VOW_SCREENSHOTS=<dir>` to keep the browser's screenshots of each page (the ones in `docs/`
//! were made so).

mod login;
mod overview;
mod portal;
mod quarantine;
mod replay;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

use crate::child::Vow;
use crate::helpers::TOKEN;

/// A headless Chromium session. chromedriver runs in a process group of its own, with the
/// browser it starts; the whole group is killed when dropped, so no browser outlives its test.
pub struct Browser {
    pub client: Client,
    driver: Child,
}

impl Browser {
    pub async fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group (id = its pid), which the browser it starts joins.
            .process_group(0)
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver; .ci/run does)");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--window-size=1280,800"]}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let mut last = None;
        for _ in 0..100 {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => return Browser { client, driver },
                Err(e) => last = Some(e),
            }
            // Poll interval while chromedriver starts; the loop is bounded at 10 s.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not answer: {last:?}");
    }

    /// The text of the element `css`, once it is on the page (waiting at most 10 s: under a
    /// loaded machine a page that `reaches` reported may still be rendering).
    pub async fn text(&self, css: &str) -> String {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .text()
            .await
            .unwrap()
    }

    /// Waits (at most 10 s) until the element `css` reads `want`: a form that posts back to the
    /// page it is on leaves the path unchanged, so only the content tells the new page.
    pub async fn text_becomes(&self, css: &str, want: &str) {
        let mut last = String::new();
        for _ in 0..200 {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                last = el.text().await.unwrap_or_default();
                if last == want {
                    return;
                }
            }
            // Poll interval of a wait bounded at 10 s.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{css} reads {last:?}, not {want:?}");
    }

    /// Clicks the element `at` finds.
    pub async fn click(&self, at: Locator<'_>) {
        let element = self
            .client
            .find(at)
            .await
            .unwrap_or_else(|e| panic!("no {at:?}: {e}"));
        element.click().await.unwrap();
    }

    pub async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_string()
    }

    /// Waits (at most 10 s) until the page at `path` has loaded: a click returns before the
    /// navigation it starts has finished.
    pub async fn reaches(&self, path: &str) {
        for _ in 0..200 {
            let ready = self
                .client
                .execute("return document.readyState", vec![])
                .await
                .unwrap();
            if self.path().await == path && ready == json!("complete") {
                return;
            }
            // Poll interval of a wait bounded at 10 s.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the browser is at {}, not {path}", self.path().await);
    }

    pub async fn log_in(&self, token: &str) {
        let field = self.client.find(Locator::Id("token")).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(token).await.unwrap();
        self.client
            .find(Locator::Css("form button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// Keeps a screenshot of the page as `<VOW_SCREENSHOTS>/<name>.png`, when asked to.
    pub async fn screenshot(&self, name: &str) {
        if let Ok(dir) = std::env::var("VOW_SCREENSHOTS") {
            let png = self.client.screenshot().await.unwrap();
            std::fs::write(format!("{dir}/{name}.png"), png).unwrap();
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SIGKILL to chromedriver alone would orphan the browser and its renderers.
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Admin API calls to the child, as the tests' setup makes them.
pub struct Admin<'a> {
    vow: &'a Vow,
    http: reqwest::Client,
}

impl<'a> Admin<'a> {
    pub fn new(vow: &'a Vow) -> Self {
        Self {
            vow,
            http: reqwest::Client::new(),
        }
    }

    /// `POST /api/v1{path}` with `body`; the status and the JSON answer.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_keyed(path, body, None).await
    }

    /// [`Admin::post`] with an `Idempotency-Key` when `key` is given.
    pub async fn post_keyed(&self, path: &str, body: Value, key: Option<&str>) -> (u16, Value) {
        let mut request = (self.http.post(format!("{}/api/v1{path}", self.vow.base)))
            .bearer_auth(TOKEN)
            .json(&body);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let r = request.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// `GET /api/v1{path}`; the JSON answer.
    pub async fn get(&self, path: &str) -> Value {
        let r = (self.http.get(format!("{}/api/v1{path}", self.vow.base)))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }
}

/// Waits (at most 10 s) until the endpoint's stats at `path` through the API are `want`
/// (delivered, dead-lettered).
pub async fn stats_reach(admin: &Admin<'_>, path: &str, want: (u64, u64)) {
    let mut last = json!(null);
    for _ in 0..200 {
        last = admin.get(path).await;
        if (last["success"].as_u64(), last["fail"].as_u64()) == (Some(want.0), Some(want.1)) {
            return;
        }
        // Poll interval of a wait bounded at 10 s.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "stats never reached delivered {} / dead {}: {last}",
        want.0, want.1
    );
}

/// Runs `test` on a fresh SQLite file and on a fresh PostgreSQL schema.
macro_rules! in_browser_on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    let url = format!("sqlite://{}/vow.db", dir.path().display());
                    super::$name(url).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
                    super::$name(url).await;
                }
            )*
        }
    };
}
pub(crate) use in_browser_on_both_stores;
