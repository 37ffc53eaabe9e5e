//! What this machine offers the servers a test starts of its own: free loopback ports, the
//! binaries to start, and the wait for a port to answer.

use std::{
    net::TcpListener,
    path::PathBuf,
    time::{Duration, Instant},
};

use crate::ProvisionError;

/// A free loopback port (bound then released; good enough for test servers).
pub fn free_port() -> Result<u16, ProvisionError> {
    Ok(free_ports(1)?[0])
}

/// Ports this process has handed out: the kernel may give a released port to the next
/// `bind(0)`, so two tests starting servers at the same moment could otherwise be handed the
/// same port, and one test's client would then talk to the other's server (two
/// `redis-cli --cluster create` sharing a node wait for each other forever).
static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// `n` distinct free loopback ports, none handed out before by this process (all bound at
/// once, then released: one at a time, the kernel may hand the same port out twice).
pub fn free_ports(n: usize) -> Result<Vec<u16>, ProvisionError> {
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut listeners = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    // Bounded: the ephemeral range holds ~28k ports and a test process hands out hundreds.
    for _ in 0..n * 64 {
        if ports.len() == n {
            break;
        }
        let l = TcpListener::bind("127.0.0.1:0").map_err(ProvisionError::local)?;
        let port = l.local_addr().map_err(ProvisionError::local)?.port();
        if !handed_out.contains(&port) {
            ports.push(port);
        }
        listeners.push(l);
    }
    if ports.len() < n {
        return Err(ProvisionError::Local(format!(
            "found {} of {n} loopback ports this process had not handed out",
            ports.len()
        )));
    }
    handed_out.extend(&ports);
    Ok(ports)
}

pub(crate) fn find_binary(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        versions.reverse();
        dirs.extend(versions);
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

pub(crate) fn wait_for_port(port: u16, timeout: Duration) -> Result<(), ProvisionError> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(ProvisionError::Local(format!(
        "nothing answered on 127.0.0.1:{port} within {timeout:?}"
    )))
}
