//! A tiny HTTP/1.1 server on 127.0.0.1 for the client tests: it counts accepted connections,
//! records every request and answers with a canned response (or never answers).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use url::Url;

/// A request as the server saw it.
#[derive(Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// What the server does after reading a request.
#[derive(Clone)]
pub enum Reply {
    /// Writes these bytes (a whole HTTP response) and waits for the next request.
    Canned(Vec<u8>),
    /// Never answers; keeps the connection open.
    Silent,
    /// Closes the connection after reading the request.
    HangUp,
}

/// A whole HTTP/1.1 response with a correct `Content-Length`.
pub fn response(status_line: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut out = format!(
        "HTTP/1.1 {status_line}\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    Reply::Canned(out)
}

pub struct TestServer {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    requests: mpsc::UnboundedReceiver<Recorded>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    pub async fn start(reply: Reply) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (tx, requests) = mpsc::unbounded_channel();
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                counter.fetch_add(1, Ordering::SeqCst);
                connections.spawn(serve(stream, reply.clone(), tx.clone()));
            }
        });
        Self {
            addr,
            accepted,
            requests,
            task,
        }
    }

    /// `http://{host}:{port}/hook?token=secret`
    pub fn url(&self, host: &str) -> Url {
        Url::parse(&format!(
            "http://{host}:{}/hook?token=secret",
            self.addr.port()
        ))
        .unwrap()
    }

    /// How many connections the server had accepted before this call. Deterministic without
    /// sleeping: it connects itself and waits for the answer; the accept loop takes connections
    /// in arrival order, so any earlier connection has been counted by then. Needs a `Canned`
    /// reply.
    pub async fn connections_so_far(&self) -> usize {
        let mut probe = TcpStream::connect(self.addr).await.unwrap();
        probe
            .write_all(b"GET /probe HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        // The first byte of the response proves the probe was accepted.
        let mut first = [0u8; 1];
        probe.read_exact(&mut first).await.unwrap();
        self.accepted.load(Ordering::SeqCst) - 1
    }

    pub async fn next_request(&mut self) -> Recorded {
        self.requests.recv().await.expect("server stopped")
    }
}

async fn serve(stream: TcpStream, reply: Reply, tx: mpsc::UnboundedSender<Recorded>) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if stream.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("header line");
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse::<usize>().unwrap());
        let mut body = vec![0; length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        if path != "/probe" {
            let _ = tx.send(Recorded {
                method,
                path: path.clone(),
                headers,
                body,
            });
        }
        match &reply {
            Reply::Canned(bytes) => {
                if stream.get_mut().write_all(bytes).await.is_err() {
                    return;
                }
            }
            Reply::Silent | Reply::HangUp if path == "/probe" => return,
            Reply::HangUp => return,
            Reply::Silent => std::future::pending::<()>().await,
        }
    }
}
