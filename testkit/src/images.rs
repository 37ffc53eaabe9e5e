//! The container image names and tags, read from `images.env` (shared with the stand-in
//! image script, so the two cannot drift).

const IMAGES_ENV: &str = include_str!("images.env");

fn value(key: &str) -> &'static str {
    IMAGES_ENV
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map_or("", |(_, v)| v.trim())
}

/// Redis image name.
pub fn redis_image() -> &'static str {
    value("REDIS_IMAGE")
}

/// Redis image tag (7.x).
pub fn redis_tag() -> &'static str {
    value("REDIS_TAG")
}

/// Postgres image name.
pub fn postgres_image() -> &'static str {
    value("POSTGRES_IMAGE")
}

/// Postgres image tag (16).
pub fn postgres_tag() -> &'static str {
    value("POSTGRES_TAG")
}
