//! The five models on small hand-made histories, and the generic search on histories far
//! longer than any native stack could recurse through.

use std::time::Duration;

use super::*;
use crate::linearizability::{Completion, TimedOp};

fn options() -> Options {
    Options {
        budget: Budget::time_only(Duration::from_secs(30)),
        partitioned: true,
    }
}

fn verdict(model: ModelName, text: &str) -> Verdict {
    check_text(model, text, options()).unwrap().verdict
}

fn assert_linearizable(model: ModelName, text: &str) {
    assert_eq!(verdict(model, text), Verdict::Linearizable, "{text}");
}

/// Asserts a violation and returns its explanation.
fn assert_violation(model: ModelName, text: &str) -> String {
    match verdict(model, text) {
        Verdict::NotLinearizable { explanation, .. } => explanation,
        other => panic!("expected a violation, got {other:?}"),
    }
}

fn etcd(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| format!("INFO  jepsen.util - {l}\n"))
        .collect()
}

#[test]
fn etcd_register_starts_unset_and_reads_failed_cas_as_a_compare() {
    assert_linearizable(
        ModelName::Etcd,
        &etcd(&["0 :invoke :read nil", "0 :ok :read nil"]),
    );
    // A cas failing on an unset register is fine; one failing where it must apply is not.
    let failed_cas = ["0 :invoke :cas [0 1]", "0 :fail :cas [0 1]"];
    assert_linearizable(ModelName::Etcd, &etcd(&failed_cas));
    let why = assert_violation(
        ModelName::Etcd,
        &etcd(&[
            "0 :invoke :write 0",
            "0 :ok :write 0",
            "0 :invoke :cas [0 1]",
            "0 :fail :cas [0 1]",
        ]),
    );
    assert!(why.contains("p0 cas 0->1 [3..4]"), "{why}");
    // A timed-out write may land later, and a failed read tells nothing.
    assert_linearizable(
        ModelName::Etcd,
        &etcd(&[
            "0 :invoke :write 5",
            "0 :info :write :timed-out",
            "1 :invoke :read nil",
            "1 :fail :read :timed-out",
            "2 :invoke :read nil",
            "2 :ok :read nil",
            "3 :invoke :read nil",
            "3 :ok :read 5",
        ]),
    );
}

#[test]
fn knossos_register_starts_at_zero_drops_failures_and_accepts_nil_reads() {
    let text = "[{:process 0 :type :invoke :f :read :value nil}\n\
                {:process 0 :type :ok :f :read :value 0}\n\
                {:process 1 :type :invoke :f :cas :value [3 4]}\n\
                {:process 1 :type :fail :f :cas :value [3 4]}\n\
                {:process :nemesis :type :info :f :kill :value nil}\n\
                {:process 0 :type :invoke :f :read :value nil}\n\
                {:process 0 :type :ok :f :read :value nil}]";
    assert_linearizable(ModelName::CasRegister, text);
    let bad = "[{:process 0 :type :invoke :f :read :value nil}\n\
               {:process 0 :type :ok :f :read :value 1}]";
    assert_violation(ModelName::CasRegister, bad);
}

#[test]
fn a_write_of_the_current_value_is_still_ordered() {
    // Writing 0 over 0 changes nothing, but only now: placed after the write of 2 it is the
    // change the read of 0 needs. (Placing it greedily once lost this linearization.)
    let text = "[{:process 1 :type :invoke :f :write :value 2}\n\
                {:process 0 :type :invoke :f :write :value 0}\n\
                {:process 1 :type :ok :f :write :value 2}\n\
                {:process 0 :type :ok :f :write :value 0}\n\
                {:process 2 :type :invoke :f :read :value nil}\n\
                {:process 2 :type :ok :f :read :value 0}]";
    assert_linearizable(ModelName::CasRegister, text);
}

#[test]
fn kv_appends_are_ordered_by_later_gets_per_key() {
    let kv = |lines: &[(u32, &str, &str, &str, &str)]| -> String {
        lines
            .iter()
            .map(|(p, t, f, k, v)| {
                format!("{{:process {p}, :type :{t}, :f :{f}, :key \"{k}\", :value {v}}}\n")
            })
            .collect()
    };
    let good = kv(&[
        (0, "invoke", "append", "1", "\"a\""),
        (1, "invoke", "append", "1", "\"b\""),
        (0, "ok", "append", "1", "\"a\""),
        (1, "ok", "append", "1", "\"b\""),
        (2, "invoke", "get", "1", "nil"),
        (2, "ok", "get", "1", "\"ba\""),
        (2, "invoke", "get", "2", "nil"),
        (2, "ok", "get", "2", "\"\""),
    ]);
    assert_linearizable(ModelName::Kv, &good);
    let bad = good.replace("\"ba\"", "\"b\"");
    let why = assert_violation(ModelName::Kv, &bad);
    assert!(why.starts_with("key \"1\": "), "{why}");
    let unpartitioned = Options {
        partitioned: false,
        ..options()
    };
    let whole = check_text(ModelName::Kv, &bad, unpartitioned).unwrap();
    assert!(matches!(whole.verdict, Verdict::NotLinearizable { .. }));
    assert_eq!(whole.ops, 4);
}

#[test]
fn mutex_needs_a_release_between_acquires() {
    let text = "[{:process 0 :type :invoke :f :acquire}\n\
                {:process 0 :type :ok :f :acquire}\n\
                {:process 1 :type :invoke :f :acquire}\n\
                {:process 1 :type :fail :f :acquire :error :already-held}\n\
                {:process 0 :type :invoke :f :release}\n\
                {:process 0 :type :ok :f :release}\n\
                {:process 1 :type :invoke :f :acquire}\n\
                {:process 1 :type :ok :f :acquire}]";
    assert_linearizable(ModelName::Mutex, text);
    let bad = text.replace(":f :release}", ":f :acquire}");
    assert_violation(ModelName::Mutex, &bad);
}

#[test]
fn multi_register_transactions_are_atomic() {
    let text = "[{:process 0 :type :invoke :f :txn :value [[:write :x 1] [:write :y 1]]}\n\
                {:process 1 :type :invoke :f :txn :value [[:read :x nil] [:read :y nil]]}\n\
                {:process 1 :type :ok :f :txn :value [[:read :x 1] [:read :y 1]]}\n\
                {:process 0 :type :ok :f :txn :value [[:write :x 1] [:write :y 1]]}]";
    assert_linearizable(ModelName::MultiRegister, text);
    let torn = text.replace("[:read :y 1]", "[:read :y 0]");
    assert_violation(ModelName::MultiRegister, &torn);
}

#[test]
fn a_file_that_cannot_be_read_names_its_line() {
    let text = "[{:process 0 :type :invoke :f :read :value nil}\n\
                {:process 0 :type :invoke :f :read :value nil}]";
    let err = check_text(ModelName::CasRegister, text, options()).unwrap_err();
    assert_eq!(err.line, 2, "{err}");
    let err = check_text(
        ModelName::Mutex,
        "[{:process 0 :type :invoke :f :lock}]",
        options(),
    )
    .unwrap_err();
    assert_eq!(err.line, 1, "{err}");
}

/// `n` register writes and reads, one after another, each read seeing the write before it;
/// with `stale`, the last operation is a compare-and-set recorded as failing against the
/// very value it expected: a violation no pre-check sees, so the search goes all the way.
fn long_register_history(
    n: u64,
    stale: bool,
) -> Vec<TimedOp<register::RegisterOp, register::RegisterSeen>> {
    use register::{RegisterOp, RegisterSeen};
    (0..n)
        .map(|i| {
            let (input, output) = if i % 2 == 0 {
                (RegisterOp::Write(i as i64), RegisterSeen::Written)
            } else if stale && i == n - 1 {
                let from = i as i64 - 1;
                (RegisterOp::Cas { from, to: -1 }, RegisterSeen::Cas(false))
            } else {
                (RegisterOp::Read, RegisterSeen::Read(Some(i as i64 - 1)))
            };
            TimedOp {
                process: i % 3,
                input,
                call: 2 * i,
                completion: Some(Completion {
                    at: 2 * i + 1,
                    output,
                }),
            }
        })
        .collect()
}

#[test]
fn a_long_history_needs_no_deep_native_stack() {
    let check = || {
        let model = register::Register { initial: None };
        let budget = Budget::time_only(Duration::from_secs(60));
        let good = check_history(&model, &long_register_history(20_000, false), budget);
        let bad = check_history(&model, &long_register_history(20_000, true), budget);
        (good, bad)
    };
    let (good, bad) = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(check)
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(good, Verdict::Linearizable);
    let Verdict::NotLinearizable { explanation, .. } = bad else {
        panic!("expected a violation, got {bad:?}");
    };
    assert!(
        explanation.starts_with("19999 of 20000 completed"),
        "{explanation}"
    );
}

fn generated(
    ops: usize,
    processes: usize,
    planted: Option<generate::Planted>,
    seed: u64,
) -> String {
    generate::RegisterHistory {
        ops,
        processes,
        crash_rate: 0.01,
        planted,
        seed,
    }
    .edn()
}

#[test]
fn generated_register_histories_are_linearizable_and_never_refuted_before_the_search() {
    for seed in 0..20 {
        let text = generated(400, 2 + seed as usize % 9, None, seed);
        let ops = knossos::parse(&register::Register { initial: Some(0) }, &text).unwrap();
        assert!(ops.len() >= 400, "seed {seed}: {} ops", ops.len());
        assert_linearizable(ModelName::CasRegister, &text);
    }
}

#[test]
fn a_planted_violation_is_found_before_any_search() {
    for planted in [
        generate::Planted::ImpossibleRead,
        generate::Planted::StaleRead,
    ] {
        for seed in 0..5 {
            let text = generated(2_000, 20, Some(planted), seed);
            let Verdict::NotLinearizable {
                explanation: why, ..
            } = verdict(ModelName::CasRegister, &text)
            else {
                panic!("{planted:?} seed {seed}: no violation found");
            };
            assert!(
                why.starts_with("found before any search: "),
                "{planted:?} {seed}: {why}"
            );
        }
    }
}

#[test]
fn the_pre_check_is_sound_on_concurrent_reads_of_a_value_written_concurrently() {
    // p1 reads 1 while p0's write of 1 is still in flight: possible, not refuted.
    assert_linearizable(
        ModelName::CasRegister,
        "[{:process 0 :type :invoke :f :write :value 1}
          {:process 1 :type :invoke :f :read :value nil}
          {:process 1 :type :ok :f :read :value 1}
          {:process 0 :type :ok :f :write :value 1}]",
    );
    // A compare-and-set 1->1 is no source of the 1 it reads for itself.
    let why = assert_violation(
        ModelName::CasRegister,
        "[{:process 0 :type :invoke :f :cas :value [1 1]}
          {:process 0 :type :ok :f :cas :value [1 1]}]",
    );
    assert!(why.starts_with("found before any search"), "{why}");
    // The initial 0, overwritten by a write completed before the read began, is gone.
    let why = assert_violation(
        ModelName::CasRegister,
        "[{:process 0 :type :invoke :f :write :value 3}
          {:process 0 :type :ok :f :write :value 3}
          {:process 1 :type :invoke :f :read :value nil}
          {:process 1 :type :ok :f :read :value 0}]",
    );
    assert!(
        why.contains("certainly overwritten") || why.contains("could have written"),
        "{why}"
    );
    // A crashed write may take effect at any time: a later read of its value is possible.
    assert_linearizable(
        ModelName::CasRegister,
        "[{:process 0 :type :invoke :f :write :value 4}
          {:process 0 :type :info :f :write :value 4}
          {:process 1 :type :invoke :f :write :value 2}
          {:process 1 :type :ok :f :write :value 2}
          {:process 2 :type :invoke :f :read :value nil}
          {:process 2 :type :ok :f :read :value 4}]",
    );
}

#[test]
fn a_memory_or_time_budget_ends_the_search_undecided_with_its_name() {
    let text = generated(3_000, 30, None, 7);
    let register = register::Register { initial: Some(0) };
    let ops = knossos::parse(&register, &text).unwrap();
    let tiny_memory = Budget {
        max_memory: 1,
        ..Budget::time_only(Duration::from_secs(60))
    };
    match check_history(&register, &ops, tiny_memory) {
        Verdict::Undecided { limit, reason } => {
            assert_eq!(
                limit,
                Some(crate::linearizability::Limit::Memory),
                "{reason}"
            );
            assert!(reason.contains("memory budget"), "{reason}");
        }
        other => panic!("expected undecided, got {other:?}"),
    }
    match check_history(&register, &ops, Budget::time_only(Duration::ZERO)) {
        Verdict::Undecided { limit, reason } => {
            assert_eq!(limit, Some(crate::linearizability::Limit::Time), "{reason}");
        }
        other => panic!("expected undecided, got {other:?}"),
    }
}
