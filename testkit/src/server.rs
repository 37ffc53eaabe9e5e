//! The engine's HTTP API served in-process on a free loopback port: one way to start it for
//! the integration tests and the load test's in-process servers, so they all bind, serve and
//! drain the same way (`coupon_engine::http::serve`, graceful shutdown).

use std::{io, net::SocketAddr};

use coupon_engine::http::{AppState, serve};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

/// A server [`spawn_server`] started. Dropping it starts a graceful shutdown without
/// waiting for it; [`SpawnedServer::stop`] waits for the drain.
#[derive(Debug)]
pub struct SpawnedServer {
    addr: SocketAddr,
    // Sending, or dropping, this ends the serve loop (graceful shutdown).
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<io::Result<()>>,
}

/// Binds 127.0.0.1 on a free port and serves `state`'s router on a task of the current Tokio
/// runtime (call it inside the runtime that should run the server).
pub async fn spawn_server(state: AppState) -> io::Result<SpawnedServer> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (shutdown, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Ok(SpawnedServer {
        addr,
        shutdown,
        task,
    })
}

impl SpawnedServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, drains the requests in flight, shuts the engine's background work
    /// down (as `serve` does), and returns how serving ended.
    pub async fn stop(self) -> io::Result<()> {
        let _ = self.shutdown.send(());
        self.task.await.map_err(io::Error::other)?
    }
}
