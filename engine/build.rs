//! `sqlx::migrate!` embeds `migrations/` at compile time, and cargo does not know it reads
//! that directory: without this, a new migration is not in the build until something else
//! in the crate changes.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
