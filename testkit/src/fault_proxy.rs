//! A TCP fault proxy between an engine and one store, for grey failures (docs/ARCHITECTURE.md,
//! "Deadlines"): added latency, a blackhole (bytes held, never reset: a partition, a dead
//! switch port, a frozen VM), connections reset, a bandwidth limit, or the plain link.
//!
//! Why our own and not Toxiproxy: Toxiproxy is a Go program with no Debian package, and no
//! registry this project builds from carries it. `noxious` (its Rust port, 1.0.4, last
//! released 2021) was evaluated in-process: its `timeout` toxic with timeout 0 reads and
//! discards the bytes, where a real partition holds them and delivers them after the heal
//! (which is what makes a batch's outcome unknown, the case that matters here), it has no
//! `reset_peer` (its issue 1), and its runner API is `doc(hidden)`. The modes needed are five
//! of one relay; their names follow Toxiproxy's toxics (`latency`, `timeout` = blackhole,
//! `reset_peer`, `bandwidth`) so a case can be replayed on a real Toxiproxy. Each proxy runs on a thread
//! of its own with its own runtime: it keeps relaying (or holding) whatever the test's runtime does.

use std::{
    net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};

use crate::ProvisionError;

/// What the proxy does to the bytes it relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// Relay at once.
    Pass,
    /// Relay each chunk after this delay (Toxiproxy's `latency`).
    Latency(Duration),
    /// Hold every byte, in both directions, on every connection, and open none upstream;
    /// nothing is closed or reset (Toxiproxy's `timeout` with timeout 0). Bytes held are
    /// relayed when the link heals, as after a real partition.
    Blackhole,
    /// Reset every open connection, and every new one at once (`reset_peer`).
    Reset,
    /// Relay at most this many bytes a second, each way, on each connection (Toxiproxy's
    /// `bandwidth`): a saturated or badly negotiated link.
    Bandwidth(u64),
}

impl LinkMode {
    fn relays(self) -> bool {
        matches!(self, Self::Pass | Self::Latency(_) | Self::Bandwidth(_))
    }
}

/// A proxy listening on a free loopback port, relaying to one upstream address.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: watch::Sender<SocketAddr>,
    mode: watch::Sender<LinkMode>,
    /// Connections opened before this generation hold every byte for good.
    stranded_below: watch::Sender<u64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FaultProxy {
    /// Starts relaying to `upstream` (`host:port`) in [`LinkMode::Pass`].
    pub fn start(upstream: &str) -> Result<Self, ProvisionError> {
        let upstream = resolve(upstream)?;
        let listener = StdListener::bind("127.0.0.1:0")
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| ProvisionError::local(format!("fault proxy: binding loopback: {e}")))?;
        let addr = listener.local_addr().map_err(ProvisionError::local)?;
        let (upstream, upstreams) = watch::channel(upstream);
        let (mode, watched) = watch::channel(LinkMode::Pass);
        let (stranded_below, strands) = watch::channel(0u64);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ProvisionError::local(format!("fault proxy runtime: {e}")))?;
        std::thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        () = accept_loop(listener, upstreams, watched, strands) => {}
                        _ = stopped => {}
                    }
                });
            })
            .map_err(|e| ProvisionError::local(format!("fault proxy thread: {e}")))?;
        Ok(Self {
            addr,
            upstream,
            mode,
            stranded_below,
            stop: Some(stop),
        })
    }

    /// Starts a proxy for the store `url` points at, and returns it with `url` rewritten to
    /// reach the store through it (user, password, path and query kept).
    pub fn for_url(url: &str) -> Result<(Self, String), ProvisionError> {
        let (before, host_port, after) = split_authority(url)
            .ok_or_else(|| ProvisionError::local(format!("fault proxy: no host:port in {url}")))?;
        let proxy = Self::start(host_port)?;
        let rewritten = format!("{before}{}{after}", proxy.addr);
        Ok((proxy, rewritten))
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the proxy relays to.
    pub fn upstream(&self) -> SocketAddr {
        *self.upstream.borrow()
    }

    /// Relays new connections to `upstream` (`host:port`) from now on, as a VIP or a
    /// load balancer moved to a new primary does; open connections keep their peer (one
    /// that died closes them).
    pub fn move_to(&self, upstream: &str) -> Result<(), ProvisionError> {
        self.upstream.send_replace(resolve(upstream)?);
        Ok(())
    }

    /// Changes what the link does, for open connections and new ones alike.
    pub fn set(&self, mode: LinkMode) {
        self.mode.send_replace(mode);
    }

    /// Every connection open now holds its bytes for good, while new ones relay: the peer
    /// behind them is gone without a word (a NAT entry lost, a VIP moved to a new primary, a
    /// half-open socket), the case where only a client's own deadline ends the wait.
    pub fn strand_open_connections(&self) {
        self.stranded_below.send_modify(|g| *g += 1);
    }

    /// What the link does now.
    pub fn mode(&self) -> LinkMode {
        *self.mode.borrow()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn resolve(upstream: &str) -> Result<SocketAddr, ProvisionError> {
    upstream
        .to_socket_addrs()
        .map_err(|e| ProvisionError::local(format!("fault proxy upstream {upstream}: {e}")))?
        .next()
        .ok_or_else(|| ProvisionError::local(format!("no address for {upstream}")))
}

/// `scheme://[user@]` , `host:port`, `/rest` of a URL.
fn split_authority(url: &str) -> Option<(&str, &str, &str)> {
    let start = url.find("://")? + 3;
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    let host_at = url[start..end].rfind('@').map_or(start, |i| start + i + 1);
    let host_port = &url[host_at..end];
    host_port
        .contains(':')
        .then(|| (&url[..host_at], host_port, &url[end..]))
}

async fn accept_loop(
    listener: TcpListener,
    upstream: watch::Receiver<SocketAddr>,
    mode: watch::Receiver<LinkMode>,
    strands: watch::Receiver<u64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let link = Link {
            mode: mode.clone(),
            generation: *strands.borrow(),
            strands: strands.clone(),
        };
        tokio::spawn(relay(client, upstream.clone(), link));
    }
}

/// What one connection watches: the proxy's mode, and whether it was stranded.
#[derive(Clone)]
struct Link {
    mode: watch::Receiver<LinkMode>,
    strands: watch::Receiver<u64>,
    generation: u64,
}

impl Link {
    fn stranded(&self) -> bool {
        *self.strands.borrow() > self.generation
    }

    /// Waits while the link holds bytes; false: it resets.
    async fn until_relaying(&mut self) -> bool {
        if self.stranded() {
            // Held for good: only the proxy's end (or the client's close) ends it.
            std::future::pending::<()>().await;
        }
        match self.mode.wait_for(|m| *m != LinkMode::Blackhole).await {
            Ok(m) => m.relays(),
            Err(_) => false,
        }
    }

    /// Returns when the mode or the stranding changes.
    async fn changed(&mut self) {
        tokio::select! {
            _ = self.mode.changed() => {}
            _ = self.strands.changed() => {}
        }
    }
}

/// One client connection: opened upstream once the link relays, then both directions
/// pumped until either side closes or the link resets.
async fn relay(mut client: TcpStream, upstream: watch::Receiver<SocketAddr>, mut link: Link) {
    if !link.until_relaying().await {
        reset(&client);
        return;
    }
    // Read only now: a connection held by a blackhole opens to wherever the link leads once
    // it heals.
    let upstream = *upstream.borrow();
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        reset(&client);
        return;
    };
    let _ = server.set_nodelay(true);
    let was_reset = {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let both = async {
            let _ = tokio::join!(pump(cr, sw, link.clone()), pump(sr, cw, link.clone()));
        };
        let mut watching = link.mode.clone();
        let resets = async move {
            let _ = watching.wait_for(|m| *m == LinkMode::Reset).await;
        };
        tokio::select! {
            // Both pumps also stop when the link resets: whichever is seen first, reset.
            () = both => *link.mode.borrow() == LinkMode::Reset,
            () = resets => true,
        }
    };
    if was_reset {
        reset(&client);
        reset(&server);
    }
}

/// Closes with RST, not FIN, when the stream is dropped. Tokio deprecates `set_linger` because
/// a non-zero linger blocks the dropping thread; a zero linger never does (the kernel sends
/// RST and discards at once).
#[allow(deprecated)]
fn reset(stream: &TcpStream) {
    let _ = stream.set_linger(Some(Duration::ZERO));
}

/// How long `bytes` take at `rate` bytes a second (a zero rate counts as one byte a second).
fn transfer_time(bytes: usize, rate: u64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / rate.max(1) as f64)
}

/// Relays one direction. A chunk read while the link relays but before a blackhole began is
/// held too: nothing crosses a blackholed link.
async fn pump(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    mut link: Link,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !link.until_relaying().await {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            // The link changed while nothing came: look again before reading.
            () = link.changed() => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if !link.until_relaying().await {
            return;
        }
        let delay = match *link.mode.borrow() {
            LinkMode::Latency(d) => d,
            LinkMode::Bandwidth(rate) => transfer_time(n, rate),
            _ => Duration::ZERO,
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
