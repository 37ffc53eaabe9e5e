//! The minimal HTTP client of the bench and of open-model runs (`arrivals`): one HTTP/1.1
//! keep-alive connection per client task,
//! written and read by that task itself, as `wrk` does. On two cores shared with the server,
//! Redis and Postgres, every microsecond the client spends is taken from the server it
//! measures. A general client (hyper's connection API, which this replaced) runs each
//! connection as a task of its own and hands every request and answer across a channel:
//! two task wake-ups per call that a closed loop does not need. Here a call is one write
//! of the whole request and reads until the answer's `Content-Length` is in; anything this
//! client does not speak (chunked bodies, an answer before the request was sent) fails the
//! call, closes the connection, and counts as an error of the row, never as a figure.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, bail};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// Longest one call may take before it counts as failed (and its connection is replaced).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Most header lines an answer may carry.
const MAX_HEADERS: usize = 32;
/// Largest answer (headers and body) a call reads.
const MAX_ANSWER: usize = 64 * 1024;

/// Where a client task sends its calls.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    addr: SocketAddr,
    host: String,
}

impl Endpoint {
    /// `base_url` is `http://<ip>:<port>` (the bench's own server on loopback).
    pub(crate) fn parse(base_url: &str) -> anyhow::Result<Self> {
        let host = base_url
            .strip_prefix("http://")
            .with_context(|| format!("base url {base_url} is not http://<ip>:<port>"))?
            .trim_end_matches('/');
        let addr = host
            .parse()
            .with_context(|| format!("base url {base_url} is not http://<ip>:<port>"))?;
        Ok(Self {
            addr,
            host: host.to_owned(),
        })
    }
}

/// One client task's connection; reopened on the call after one that failed.
pub(crate) struct Connection {
    endpoint: Endpoint,
    stream: Option<TcpStream>,
    /// The request being written, then the answer being read (reused across calls).
    buf: Vec<u8>,
}

/// A clone is a fresh connection to the same server (opened on its first call): a stream
/// cannot be shared.
impl Clone for Connection {
    fn clone(&self) -> Self {
        Self::new(self.endpoint.clone())
    }
}

impl Connection {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            stream: None,
            buf: Vec::with_capacity(1024),
        }
    }

    /// POSTs a JSON `body` to `path` with a bearer `token`; the answer's status once its
    /// body is read (so the connection is ready for the next call).
    pub(crate) async fn post_json(
        &mut self,
        path: &str,
        token: &str,
        body: &str,
    ) -> anyhow::Result<u16> {
        let (status, _) = self
            .request("POST", path, token, Some(body), CALL_TIMEOUT)
            .await?;
        Ok(status)
    }

    /// Sends `method path` with a bearer `token` and an optional JSON `body`; the answer's
    /// status and body once it is all read. A call that fails or outlives `timeout` closes
    /// the connection (the next call opens another).
    pub(crate) async fn request(
        &mut self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<(u16, &[u8])> {
        let answer = match tokio::time::timeout(timeout, self.call(method, path, token, body)).await
        {
            Ok(answer) => answer,
            Err(_) => Err(anyhow::anyhow!("no answer within {timeout:?}")),
        };
        match answer {
            Ok((status, body)) => Ok((status, &self.buf[body])),
            Err(e) => {
                self.stream = None;
                Err(e)
            }
        }
    }

    /// The status and where the body lies in `buf`.
    async fn call(
        &mut self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, std::ops::Range<usize>)> {
        let stream = match &mut self.stream {
            Some(s) => s,
            None => self.stream.insert(open(&self.endpoint.addr).await?),
        };
        self.buf.clear();
        write_request(
            &mut self.buf,
            method,
            &self.endpoint.host,
            path,
            token,
            body,
        );
        stream.write_all(&self.buf).await?;
        self.buf.clear();
        let (status, keep_alive, body) = read_answer(stream, &mut self.buf).await?;
        if !keep_alive {
            self.stream = None;
        }
        Ok((status, body))
    }
}

fn write_request(
    buf: &mut Vec<u8>,
    method: &str,
    host: &str,
    path: &str,
    token: &str,
    body: Option<&str>,
) {
    use std::io::Write as _;
    // Writing into a Vec cannot fail.
    let _ = write!(
        buf,
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\n"
    );
    let _ = match body {
        Some(body) => write!(
            buf,
            "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
        None => write!(buf, "\r\n"),
    };
}

/// Reads one answer into `buf`: its status, whether the connection stays open, and where
/// its body lies in `buf`.
async fn read_answer(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> anyhow::Result<(u16, bool, std::ops::Range<usize>)> {
    loop {
        if let Some(head) = parse_head(buf)? {
            let end = head.len + head.content_length;
            while buf.len() < end {
                read_more(stream, buf).await?;
            }
            if buf.len() > end {
                bail!("the server sent more than one answer to one request");
            }
            return Ok((head.status, head.keep_alive, head.len..end));
        }
        read_more(stream, buf).await?;
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    if buf.len() >= MAX_ANSWER {
        bail!("an answer longer than {MAX_ANSWER} bytes");
    }
    buf.reserve(4096);
    // Into the spare capacity: nothing zeroed, nothing truncated afterwards.
    if stream.read_buf(buf).await? == 0 {
        bail!("the server closed the connection mid-answer");
    }
    Ok(())
}

/// An answer's status line and headers, as far as a closed loop needs them.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    /// Bytes of the status line and headers.
    len: usize,
    content_length: usize,
    keep_alive: bool,
}

/// None while the headers are not all in.
fn parse_head(buf: &[u8]) -> anyhow::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut answer = httparse::Response::new(&mut headers);
    let len = match answer.parse(buf).context("a malformed HTTP answer")? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    let status = answer.code.context("an HTTP answer without a status")?;
    let mut content_length = None;
    let mut keep_alive = answer.version == Some(1);
    for h in answer.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).context("content-length")?;
            content_length = Some(v.trim().parse().context("content-length")?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            bail!("a chunked answer (this client reads only content-length bodies)");
        } else if h.name.eq_ignore_ascii_case("connection") {
            keep_alive = !h.value.eq_ignore_ascii_case(b"close");
        }
    }
    // 1xx, 204 and 304 have no body; anything else must say how long it is.
    let content_length = match content_length {
        Some(n) => n,
        None if matches!(status, 100..=199 | 204 | 304) => 0,
        None => bail!("an answer ({status}) without content-length"),
    };
    Ok(Some(Head {
        status,
        len,
        content_length,
        keep_alive,
    }))
}

async fn open(addr: &SocketAddr) -> anyhow::Result<TcpStream> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_when_complete_and_name_what_they_cannot_read() {
        let ok = b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(
            parse_head(ok).unwrap(),
            Some(Head {
                status: 201,
                len: ok.len() - 2,
                content_length: 2,
                keep_alive: true
            })
        );
        assert_eq!(parse_head(&ok[..20]).unwrap(), None, "partial head");
        let close = b"HTTP/1.1 409 Conflict\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        assert!(!parse_head(close).unwrap().unwrap().keep_alive);
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(
            parse_head(chunked)
                .unwrap_err()
                .to_string()
                .contains("chunked")
        );
        let unsized_ = b"HTTP/1.1 200 OK\r\n\r\n";
        assert!(parse_head(unsized_).is_err());
        assert!(parse_head(b"HTTP/1.1 2x1 what\r\n\r\n").is_err());
    }

    #[test]
    fn endpoints_are_ip_and_port() {
        assert!(Endpoint::parse("http://127.0.0.1:8080").is_ok());
        assert!(Endpoint::parse("http://127.0.0.1:8080/").is_ok());
        assert!(Endpoint::parse("https://127.0.0.1:8080").is_err());
        assert!(Endpoint::parse("http://localhost:8080").is_err());
    }

    #[tokio::test]
    async fn a_call_round_trips_against_a_real_server_and_survives_a_close() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            // Two answers on the first connection (the second says close), one on the next.
            for answers in [2, 1] {
                let (mut s, _) = listener.accept().await.unwrap();
                for i in 0..answers {
                    let mut req = vec![0u8; 4096];
                    let n = s.read(&mut req).await.unwrap();
                    let req = String::from_utf8_lossy(&req[..n]).to_string();
                    assert!(req.starts_with("POST /x HTTP/1.1\r\n"), "{req}");
                    assert!(req.ends_with("\r\n\r\n{\"a\":1}"), "{req}");
                    let close = if i == 1 { "connection: close\r\n" } else { "" };
                    let answer =
                        format!("HTTP/1.1 201 Created\r\n{close}content-length: 5\r\n\r\nhello");
                    // Split in two writes: the client must read until the body is in.
                    let (a, b) = answer.split_at(answer.len() - 3);
                    s.write_all(a.as_bytes()).await.unwrap();
                    s.flush().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    s.write_all(b.as_bytes()).await.unwrap();
                }
            }
        });
        let mut c = Connection::new(Endpoint::parse(&format!("http://{addr}")).unwrap());
        for _ in 0..3 {
            assert_eq!(c.post_json("/x", "t", "{\"a\":1}").await.unwrap(), 201);
        }
    }
}
