//! A PostgreSQL server of a test's own, made with `initdb` and run with `pg_ctl`, so a test can
//! stop and start it without touching the server the other tests share.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A PostgreSQL server of this test's own: a cluster `initdb` made in a temporary directory,
/// serving on a free port, so it can be stopped and started without touching the server other
/// tests share. Stopped at once (`pg_ctl stop -m immediate`) when dropped, even when the test
/// fails. PostgreSQL refuses to run as root, so under root its programs run as `postgres`.
pub(super) struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    user: Option<&'static str>,
}

impl PrivatePostgres {
    /// Makes the cluster; `Err(why)` only when PostgreSQL's programs are not installed.
    pub(super) async fn init() -> Result<PrivatePostgres, String> {
        let bin = postgres_bin()?;
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let user = root.then_some("postgres");
        if let Some(user) = user {
            let chown = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(dir.path())
                .status();
            assert!(chown.is_ok_and(|s| s.success()), "chown {user}");
        }
        let pg = PrivatePostgres {
            bin,
            dir,
            port: free_port(),
            user,
        };
        let data = pg.data();
        let init = [
            "-D",
            data.as_str(),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        ];
        pg.run("initdb", &init).await;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    pub(super) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server and waits until it accepts connections. `fsync=off` loses nothing
    /// here: an immediate stop kills the server's processes, not the machine, and the kernel
    /// still writes out what they wrote before acknowledging a commit.
    pub(super) async fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        let (data, wait) = (self.data(), "60");
        let args = [
            "-D",
            data.as_str(),
            "-l",
            log.as_str(),
            "-o",
            options.as_str(),
            "-w",
            "-t",
            wait,
            "start",
        ];
        self.run("pg_ctl", &args).await;
    }

    /// Stops the server at once: its processes quit without a checkpoint, as in a crash.
    pub(super) async fn stop(&self) {
        let data = self.data();
        self.run(
            "pg_ctl",
            &["-D", data.as_str(), "-m", "immediate", "-w", "stop"],
        )
        .await;
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let program = self.bin.join(program);
        let mut command = match self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        command.args(args).stdin(Stdio::null());
        command
    }

    /// Runs one of PostgreSQL's programs to its end; a failure fails the test, with its output
    /// and the server's log.
    async fn run(&self, program: &str, args: &[&str]) {
        let mut command = self.command(program, args);
        let shown = format!("{command:?}");
        let out = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{shown}: {e}"));
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            panic!(
                "{shown}: {}\n{}{}\nserver log:\n{log}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data();
        let mut stop = self.command("pg_ctl", &["-D", data.as_str(), "-m", "immediate", "stop"]);
        let _ = stop.stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}

/// Where PostgreSQL's programs are: the directory on `PATH` that has `initdb`, else Debian's
/// `/usr/lib/postgresql/<newest version>/bin`.
fn postgres_bin() -> Result<PathBuf, String> {
    let has_initdb = |dir: &Path| dir.join("initdb").is_file();
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(dir) = std::env::split_paths(&path).find(|d| has_initdb(d.as_path())) {
        return Ok(dir);
    }
    let versions = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten();
    let newest = versions
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has_initdb(&bin).then_some((version, bin))
        })
        .max();
    newest
        .map(|(_, bin)| bin)
        .ok_or_else(|| "initdb is neither on PATH nor in /usr/lib/postgresql/*/bin".to_string())
}

/// A port free on 127.0.0.1, below the ephemeral range (32768 and up on Linux), so that no
/// outgoing connection takes it while the server is down.
fn free_port() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let seed = (nanos ^ std::process::id()) % 12_000;
    (0..12_000)
        .map(|i| u16::try_from(20_000 + (seed + i) % 12_000).unwrap())
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free port between 20000 and 32000")
}
