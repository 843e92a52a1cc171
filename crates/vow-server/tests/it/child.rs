//! A real `vow serve --migrate` child process on a free loopback port, for the tests that
//! `kill -9` it (`crash.rs`, `idempotency_faults.rs`) and those that run the `vow` CLI against
//! it; and [`on_both_child_stores!`] to run such a test on SQLite and on PostgreSQL.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::helpers::TOKEN;

/// Instantiates each named `async fn(postgres: bool)` as `sqlite::name` and `postgres::name`;
/// the test starts its child on [`database`]`(postgres)`.
macro_rules! on_both_child_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(false).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(true).await
                }
            )*
        }
    };
}

/// A fresh store for one test: its URL, and what keeps it alive (a SQLite file's directory).
pub async fn database(postgres: bool) -> (String, Option<tempfile::TempDir>) {
    if postgres {
        let (_store, url) = vow_store_postgres::testing::fresh_store().await;
        (url, None)
    } else {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/vow.db", dir.path().display());
        (url, Some(dir))
    }
}

/// A `vow serve` child process; killed when dropped.
pub struct Vow {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl Vow {
    /// Starts vow on `database_url` with the test admin token, loopback endpoints allowed, and
    /// `env` on top of an otherwise empty environment; returns once it logs that it listens.
    pub async fn start(database_url: &str, env: &[(&str, &str)]) -> Vow {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_vow"))
            .args(["serve", "--migrate"])
            .env_clear()
            .env("VOW_LISTEN", format!("127.0.0.1:{port}"))
            .env("VOW_DATABASE_URL", database_url)
            .env("VOW_ADMIN_TOKEN", TOKEN)
            .env("VOW_ALLOWED_SUBNETS", "127.0.0.0/8")
            .env("VOW_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("vow starts");
        // vow logs "vow is listening" once it serves; keep draining its log afterwards.
        let (ready, listening) = tokio::sync::oneshot::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut ready = Some(ready);
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("vow is listening") {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });
        let started = tokio::time::timeout(Duration::from_secs(30), listening).await;
        assert!(matches!(started, Ok(Ok(()))), "vow did not start");
        Vow {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// SIGKILL, and reap it.
    pub fn kill_9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Vow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
