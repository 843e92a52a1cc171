//! A streaming client command of the real `vow` binary (`vow listen`, `vow tail`) as a child
//! process with `--output json`: its lines as they come, Ctrl-C, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

/// A `vow …` child printing JSON lines.
pub struct JsonChild {
    child: Child,
    lines: mpsc::UnboundedReceiver<Value>,
    what: String,
    _config: tempfile::TempDir,
}

impl JsonChild {
    /// Starts `vow args… --output json` in an environment holding only `XDG_CONFIG_HOME`.
    pub fn start(args: &[&str]) -> JsonChild {
        let what = format!("vow {}", args[0]);
        let config = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_vow"))
            .args(args)
            .args(["--output", "json"])
            .env_clear()
            .env("XDG_CONFIG_HOME", config.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} starts: {e}"));
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        let printer = what.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("{printer} printed {line:?}, not JSON: {e}"));
                let _ = tx.send(value);
            }
        });
        JsonChild {
            child,
            lines,
            what,
            _config: config,
        }
    }

    /// The next line whose `type` is `kind` (at most 20 s away).
    pub async fn next(&mut self, kind: &str) -> Value {
        let found = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let line = self.lines.recv().await;
                let line = line.unwrap_or_else(|| panic!("{} exited", self.what));
                if line["type"] == kind {
                    return line;
                }
            }
        })
        .await;
        found.unwrap_or_else(|_| panic!("{} printed no {kind:?} line", self.what))
    }

    /// SIGINT (Ctrl-C), then waits for it to exit; returns whether it exited successfully.
    pub fn interrupt(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(sent.success());
        self.child.wait().unwrap().success()
    }

    /// SIGKILL (no Ctrl-C handling, nothing cleaned up), and reap it.
    pub fn kill_9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Once it exited: every line whose `type` is `kind` not read yet, in order.
    pub async fn rest(&mut self, kind: &str) -> Vec<Value> {
        let mut rest = Vec::new();
        while let Some(line) = self.lines.recv().await {
            if line["type"] == kind {
                rest.push(line);
            }
        }
        rest
    }
}

impl Drop for JsonChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
