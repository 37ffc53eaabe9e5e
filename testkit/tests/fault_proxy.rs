//! The fault proxy does to the bytes what each mode says: a blackhole holds them (and
//! delivers them after the heal, as a healed partition does), a bandwidth limit paces them,
//! a reset ends the connection.

use std::time::{Duration, Instant};

use coupon_testkit::fault_proxy::{FaultProxy, LinkMode};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
};

/// An upstream that reads until the client closes its side, then answers with the count.
async fn counting_upstream() -> (String, oneshot::Receiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
        let _ = s.write_all(&(buf.len() as u64).to_be_bytes()).await;
        let _ = tx.send(buf.len());
    });
    (addr, rx)
}

#[tokio::test]
async fn a_bandwidth_limit_paces_the_bytes_it_relays() {
    let (upstream, counted) = counting_upstream().await;
    let proxy = FaultProxy::start(&upstream).expect("proxy");
    proxy.set(LinkMode::Bandwidth(64 * 1024));
    let mut client = TcpStream::connect(proxy.addr()).await.expect("connect");
    let started = Instant::now();
    client.write_all(&[7u8; 48 * 1024]).await.expect("write");
    client.shutdown().await.expect("shutdown");
    let mut answer = [0u8; 8];
    client.read_exact(&mut answer).await.expect("answer");
    assert_eq!(u64::from_be_bytes(answer), 48 * 1024, "every byte relayed");
    assert_eq!(counted.await.expect("count"), 48 * 1024);
    // 48 KiB at 64 KiB/s cannot take less than 0.75 s, however fast the machine.
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "48 KiB crossed a 64 KiB/s link in {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_blackhole_holds_the_bytes_and_delivers_them_after_the_heal() {
    let (upstream, mut counted) = counting_upstream().await;
    let proxy = FaultProxy::start(&upstream).expect("proxy");
    proxy.set(LinkMode::Blackhole);
    let mut client = TcpStream::connect(proxy.addr()).await.expect("connect");
    client.write_all(b"held").await.expect("write");
    client.shutdown().await.expect("shutdown");
    let mut answer = [0u8; 8];
    // Nothing crosses: no answer, and the upstream has not even been reached, for as long
    // as the link holds (a second here; the link never heals by itself).
    let held = tokio::time::timeout(Duration::from_secs(1), client.read_exact(&mut answer)).await;
    assert!(held.is_err(), "an answer crossed a blackholed link");
    assert!(counted.try_recv().is_err(), "bytes reached the upstream");
    proxy.set(LinkMode::Pass);
    client
        .read_exact(&mut answer)
        .await
        .expect("answer after the heal");
    assert_eq!(u64::from_be_bytes(answer), 4, "the held bytes delivered");
}

#[tokio::test]
async fn a_reset_ends_the_connection() {
    let (upstream, _counted) = counting_upstream().await;
    let proxy = FaultProxy::start(&upstream).expect("proxy");
    proxy.set(LinkMode::Reset);
    let mut client = TcpStream::connect(proxy.addr()).await.expect("connect");
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
        .await
        .expect("a reset link answers at once");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a reset connection gave bytes: {read:?}"
    );
}
