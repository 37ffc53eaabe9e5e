//! The checker against 230 published histories with known verdicts (Porcupine's etcd and
//! key-value logs, Knossos's test histories), read from the shared data set next to the
//! workspace (`COUPON_HISTORIES_DIR` overrides where). Each history must get the verdict its
//! manifest states; undecided counts as a failure. Without the data set, each test says it
//! skipped and why.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use coupon_proptests::{
    histories::{
        ModelName, Options, check_text,
        manifest::{self, Entry},
    },
    linearizability::{Budget, Verdict},
};

/// Where the data set is, if it is there.
fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("COUPON_HISTORIES_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/data"),
    };
    let manifests = manifest::MANIFESTS.iter().all(|m| dir.join(m).is_file());
    if manifests {
        return Some(dir);
    }
    println!(
        "SKIPPED: no history data set at {} (its manifests are missing); set \
         COUPON_HISTORIES_DIR to the directory holding porcupine/ and knossos/",
        dir.display()
    );
    None
}

/// Checks every manifest entry `pick` selects; returns how many were checked.
fn check_entries(pick: impl Fn(&Entry) -> bool) -> usize {
    let Some(dir) = data_dir() else {
        return 0;
    };
    let entries = manifest::load_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(entries.len(), 230, "the manifests list 230 histories");
    let options = Options {
        budget: Budget::time_only(Duration::from_secs(60)),
        partitioned: true,
    };
    let mut wrong = Vec::new();
    let mut checked = 0;
    let started = Instant::now();
    for entry in entries.iter().filter(|e| pick(e)) {
        let text = std::fs::read_to_string(dir.join(&entry.file))
            .unwrap_or_else(|e| panic!("{}: {e}", entry.file));
        let result = match check_text(entry.model, &text, options) {
            Ok(result) => result,
            Err(e) => {
                wrong.push(format!("{}: cannot parse: {e}", entry.file));
                continue;
            }
        };
        checked += 1;
        if result.ops != entry.ops {
            wrong.push(format!(
                "{}: read {} operations, the manifest counts {}",
                entry.file, result.ops, entry.ops
            ));
        }
        match (&result.verdict, entry.linearizable) {
            (Verdict::Linearizable, true) | (Verdict::NotLinearizable { .. }, false) => {}
            (verdict, expected) => wrong.push(format!(
                "{}: expected linearizable = {expected}, got {verdict:?}",
                entry.file
            )),
        }
    }
    println!("{checked} histories checked in {:?}", started.elapsed());
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    checked
}

/// Runs `test` on a thread with a 2 MiB stack (the default test thread's), so a search
/// whose depth grew with the history would overflow here and not pass by luck elsewhere.
fn on_small_stack(test: impl FnOnce() -> usize + Send + 'static) -> usize {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(test)
        .unwrap_or_else(|e| panic!("spawning the check thread: {e}"))
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[test]
fn porcupine_etcd_logs_get_their_verdicts() {
    let n = on_small_stack(|| check_entries(|e| e.model == ModelName::Etcd));
    assert!(n == 0 || n == 102, "{n} etcd logs");
}

#[test]
fn porcupine_kv_logs_get_their_verdicts_per_key() {
    let n = on_small_stack(|| check_entries(|e| e.model == ModelName::Kv));
    assert!(n == 0 || n == 6, "{n} kv logs");
}

#[test]
fn knossos_histories_get_their_verdicts() {
    let knossos = |e: &Entry| !matches!(e.model, ModelName::Etcd | ModelName::Kv);
    let n = on_small_stack(move || check_entries(knossos));
    assert!(n == 0 || n == 122, "{n} knossos histories");
}
