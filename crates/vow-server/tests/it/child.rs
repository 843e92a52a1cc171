//! A real `vow serve --migrate` child process on a free loopback port, for the tests that
//! `kill -9` it (`crash.rs`, `cluster.rs`, `idempotency_faults.rs`) and those that run the `vow`
//! CLI against it; [`on_both_child_stores!`] to run such a test on SQLite and on PostgreSQL; and
//! [`child_holding`], which tells which child opened a connection (which node sent an attempt).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
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
    /// Every line it logged so far.
    log: Arc<Mutex<Vec<String>>>,
}

impl Vow {
    /// Starts vow on `database_url` with the test admin token, loopback endpoints allowed, and
    /// `env` on top of an otherwise empty environment; returns once it logs that it listens.
    /// Its log is shown (on stderr) when `TEST_LOG` is set.
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
        let shown = std::env::var_os("TEST_LOG").is_some().then_some(port);
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&log);
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut ready = Some(ready);
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(port) = shown {
                    eprintln!("vow :{port} | {line}");
                }
                if line.contains("vow is listening") {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                kept.lock().unwrap().push(line);
            }
        });
        let started = tokio::time::timeout(Duration::from_secs(30), listening).await;
        assert!(matches!(started, Ok(Ok(()))), "vow did not start");
        Vow {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// The lines it logged so far that contain `needle`.
    pub fn logged(&self, needle: &str) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter(|l| l.contains(needle)).cloned().collect()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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

/// Which child process of this test process holds the loopback TCP socket from `from` to `to`
/// (the other end of a connection a test server accepted): the socket's inode, from
/// `/proc/net/tcp`, and the child whose file descriptors link to it. `None` when no child holds
/// it (its process is gone, or is no child of this one) or off Linux.
pub fn child_holding(from: SocketAddr, to: SocketAddr) -> Option<u32> {
    let (from, to) = (proc_net_addr(from)?, proc_net_addr(to)?);
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    // Columns: sl, local_address, rem_address, st, tx:rx queue, tr:when, retrnsmt, uid,
    // timeout, inode. A socket no process holds (TIME_WAIT) has inode 0.
    let inode = table.lines().skip(1).find_map(|line| {
        let columns: Vec<&str> = line.split_whitespace().collect();
        match columns[..] {
            [_, local, remote, _, _, _, _, _, _, inode, ..]
                if local == from && remote == to && inode != "0" =>
            {
                Some(inode.to_string())
            }
            _ => None,
        }
    })?;
    let link = format!("socket:[{inode}]");
    children().into_iter().find(|pid| {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"));
        fds.into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == link.as_str()))
    })
}

/// An IPv4 address as `/proc/net/tcp` writes it: the address's four bytes as one hexadecimal
/// number in the machine's (little-endian) order, and the port in hexadecimal.
fn proc_net_addr(addr: SocketAddr) -> Option<String> {
    let SocketAddr::V4(addr) = addr else {
        return None;
    };
    let ip = u32::from_le_bytes(addr.ip().octets());
    Some(format!("{ip:08X}:{:04X}", addr.port()))
}

/// The running children of this process (the `vow` processes its tests started).
fn children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            ppid == Some(me.as_str())
        })
        .collect()
}
