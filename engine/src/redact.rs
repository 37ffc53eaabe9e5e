//! URLs as they may be shown: in logs, errors and `--help`, a store URL's password is
//! replaced, so a log shipped to a shared system never carries a credential.

/// `url` with the password of its user-info (`scheme://user:password@host`) replaced by
/// `***`; anything else unchanged. Only the authority is looked at: a `@` in the path or
/// query is not a user-info separator.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let user_info = &authority[..at];
    let shown = match user_info.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        // `redis://secret@host` is a password without a user in redis-rs.
        None if url.starts_with("redis") => "***".to_owned(),
        None => user_info.to_owned(),
    };
    format!(
        "{}{shown}{}",
        &url[..authority_start],
        &url[authority_start + at..]
    )
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_replaced_and_the_rest_is_kept() {
        let cases = [
            (
                "postgres://app:s3cret@db:5432/coupons",
                "postgres://app:***@db:5432/coupons",
            ),
            (
                "redis://:s3cret@127.0.0.1:6379/",
                "redis://:***@127.0.0.1:6379/",
            ),
            (
                "redis://s3cret@127.0.0.1:6379/",
                "redis://***@127.0.0.1:6379/",
            ),
            (
                "rediss://default:p@ss:word@h:1/0",
                "rediss://default:***@h:1/0",
            ),
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            ("postgres://h/db?options=a@b", "postgres://h/db?options=a@b"),
            ("not a url", "not a url"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
            assert!(!redact_url(url).contains("s3cret"));
        }
    }
}
