//! What provisioning promises its callers, checked without starting any server.

use std::collections::HashSet;

use coupon_testkit::{images, local};

#[test]
fn image_tags_are_the_current_majors() {
    assert_eq!(images::redis_image(), "redis");
    assert!(images::redis_tag().starts_with("7."));
    assert!(images::postgres_tag().starts_with("16"));
}

/// The kernel hands a released port to a later `bind(0)` often enough that a few thousand
/// draws repeat one; two tests given the same port would share a server.
#[test]
fn a_process_is_never_handed_the_same_port_twice() {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let mut mine = Vec::new();
                for _ in 0..250 {
                    mine.extend(local::free_ports(2).expect("free ports"));
                    mine.push(local::free_port().expect("a free port"));
                }
                mine
            })
        })
        .collect();
    let all: Vec<u16> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    let distinct: HashSet<u16> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a port was handed out twice");
}
