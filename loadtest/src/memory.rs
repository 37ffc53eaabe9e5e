//! Peak memory of a process, as Linux reports it (`VmHWM` in `/proc/<pid>/status`): the
//! generator's own and the servers' it started.

/// Peak resident set size of process `pid` (or `self`) so far, MiB; None where the OS does
/// not say (non-Linux, a process gone).
pub(crate) fn peak_rss_mib_of(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_a_peak() {
        assert!(super::peak_rss_mib_of("self").is_some_and(|m| m > 0.0));
        assert_eq!(super::peak_rss_mib_of("not-a-pid"), None);
    }
}
