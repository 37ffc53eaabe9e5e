//! The bench's minimal HTTP client: one HTTP/1.1 keep-alive connection per client task,
//! driven with hyper's connection API directly. No pool to lock, no URL parsed per call, no
//! redirect or header bookkeeping: on two cores shared with the server, Redis and Postgres,
//! every microsecond the client spends is taken from the server it measures, so the rows
//! over HTTP should cost the client what an HTTP client must, and no more.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    Request, StatusCode, Uri,
    client::conn::http1::{self, SendRequest},
    header::{AUTHORIZATION, CONTENT_TYPE, HOST},
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Longest one call may take before it counts as failed (and its connection is replaced).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a client task sends its calls.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    addr: SocketAddr,
    host: String,
}

impl Endpoint {
    /// `base_url` is `http://<ip>:<port>` (the bench's own server on loopback).
    pub(crate) fn parse(base_url: &str) -> anyhow::Result<Self> {
        let uri: Uri = base_url
            .parse()
            .with_context(|| format!("base url {base_url}"))?;
        let host = uri
            .authority()
            .with_context(|| format!("base url {base_url} has no host:port"))?
            .as_str()
            .to_owned();
        let addr = host
            .parse()
            .with_context(|| format!("base url {base_url} is not <ip>:<port>"))?;
        Ok(Self { addr, host })
    }
}

/// One client task's connection; reopened on the call after one that failed.
pub(crate) struct Connection {
    endpoint: Endpoint,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Connection {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            sender: None,
        }
    }

    /// POSTs a JSON `body` to `path` with a bearer `token`; the answer's status once its
    /// body is read (so the connection is ready for the next call).
    pub(crate) async fn post_json(
        &mut self,
        path: &Uri,
        token: &str,
        body: String,
    ) -> anyhow::Result<StatusCode> {
        let call = async {
            let sender = match &mut self.sender {
                Some(s) => s,
                None => self.sender.insert(open(&self.endpoint.addr).await?),
            };
            let request = Request::post(path.clone())
                .header(HOST, &self.endpoint.host)
                .header(AUTHORIZATION, format!("Bearer {token}"))
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))?;
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            response.into_body().collect().await?;
            anyhow::Ok(status)
        };
        let answer = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(answer) => answer,
            Err(_) => Err(anyhow::anyhow!("no answer within {CALL_TIMEOUT:?}")),
        };
        if answer.is_err() {
            self.sender = None;
        }
        answer
    }
}

async fn open(addr: &SocketAddr) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    // The connection's I/O runs as its own task; it ends when the sender is dropped.
    tokio::spawn(connection);
    Ok(sender)
}
