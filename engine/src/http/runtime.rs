//! The Tokio runtime a server runs on. One worker is a current-thread runtime: the thread
//! that blocks on it runs every task and polls the sockets itself, with none of the
//! multi-thread scheduler's machinery (its shared queues, its parking and waking of a
//! worker) on each request. On a small machine whose cores the server shares with Redis and
//! Postgres that is the cheaper server: alternating bench runs, docs/speed-log.md.

/// A runtime builder for `worker_threads` workers (None: one per CPU; 0 counts as 1), all
/// drivers enabled.
pub fn builder(worker_threads: Option<usize>) -> tokio::runtime::Builder {
    let mut builder = match worker_threads {
        Some(0 | 1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all();
    builder
}

#[cfg(test)]
mod tests {
    use tokio::runtime::RuntimeFlavor;

    use super::builder;

    fn flavor(worker_threads: Option<usize>) -> RuntimeFlavor {
        let rt = builder(worker_threads).build().expect("runtime");
        rt.handle().runtime_flavor()
    }

    #[test]
    fn one_worker_is_a_current_thread_runtime_and_more_are_not() {
        assert_eq!(flavor(Some(0)), RuntimeFlavor::CurrentThread);
        assert_eq!(flavor(Some(1)), RuntimeFlavor::CurrentThread);
        assert_eq!(flavor(Some(2)), RuntimeFlavor::MultiThread);
        assert_eq!(flavor(None), RuntimeFlavor::MultiThread);
    }

    #[test]
    fn the_runtime_has_timers_and_io() {
        let rt = builder(Some(1)).build().expect("runtime");
        rt.block_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind on loopback");
        });
    }
}
