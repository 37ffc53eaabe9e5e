//! A server this process starts is stopped when its owner drops it or, if never dropped,
//! when this process exits; and nothing is left to signal its pid afterwards (a freed pid is
//! soon another process's: a watchdog left armed once SIGKILLed the next test binary).

use std::{net::TcpStream, time::Duration};

use coupon_testkit::local::LocalRedis;

/// Set in the copy of this test binary that starts a server and exits without dropping it.
const CHILD: &str = "COUPON_TESTKIT_WATCHDOG_CHILD";

#[test]
fn servers_stop_with_their_owner_and_leave_nothing_armed() {
    if std::env::var_os(CHILD).is_some() {
        // Kept past the end of the process, as a process-wide static would be.
        let redis = Box::leak(Box::new(LocalRedis::start().expect("redis-server")));
        println!("port={}", redis.port());
        return;
    }

    let redis = LocalRedis::start().expect("redis-server");
    assert!(!children().is_empty(), "the server is this process's child");
    drop(redis);
    assert_eq!(
        children(),
        Vec::<u32>::new(),
        "a dropped server leaves no process behind"
    );

    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "servers_stop_with_their_owner_and_leave_nothing_armed",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .expect("the child test binary runs");
    assert!(out.status.success(), "child: {out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    let port: u16 = printed
        .lines()
        .find_map(|l| l.split("port=").nth(1))
        .and_then(|p| p.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("the child names its server's port: {printed}"));
    let stopped = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        TcpStream::connect(("127.0.0.1", port)).is_err()
    });
    assert!(
        stopped,
        "the server of an exited process still answers on :{port}"
    );

    the_watchdog_kill_spares_a_process_that_only_has_the_pid();
}

/// Pids whose parent is this process.
fn children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid == Some(me.as_str()) {
            found.push(pid);
        }
    }
    found
}

/// The watchdog's kill names a process by pid and start time: a process that merely has the
/// pid (here: the right pid with another start time) survives it, the one it names does not.
/// Called from the test above, not a test of its own: its children would break that test's
/// count of this process's children if both ran at once.
fn the_watchdog_kill_spares_a_process_that_only_has_the_pid() {
    use coupon_testkit::process::{kill_if_still, start_time};
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep runs");
    let pid = sleeper.id();
    let started = start_time(pid).expect("a start time in /proc");
    let run = |cmd: String| {
        let _ = std::process::Command::new("sh")
            .args(["-c", &cmd])
            .status()
            .expect("sh runs");
    };
    let other: u64 = started.parse::<u64>().expect("clock ticks") + 1;
    run(kill_if_still(pid, &other.to_string()));
    assert!(
        sleeper.try_wait().expect("wait").is_none(),
        "a process with another start time was killed"
    );
    run(kill_if_still(pid, &started));
    let status = sleeper.wait().expect("wait");
    assert!(
        !status.success(),
        "the named process was not killed: {status}"
    );
}
