//! The Tokio runtime a server runs on. One worker is a current-thread runtime: the thread
//! that blocks on it runs every task and polls the sockets itself, with none of the
//! multi-thread scheduler's machinery (its shared queues, its parking and waking of a
//! worker) on each request. On a small machine whose cores the server shares with Redis and
//! Postgres that is the cheaper server: alternating bench runs, docs/speed-log.md.

/// A runtime builder for `worker_threads` workers (None: one per CPU), all drivers enabled.
pub fn builder(worker_threads: Option<usize>) -> tokio::runtime::Builder {
    let mut builder = match worker_threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n.max(1));
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all();
    builder
}
