//! The HTTP API in-process (`spawn_app`: port 0, own database and namespace) against real
//! Redis and Postgres: every route, every error code, auth, malformed bodies, idempotency,
//! OpenAPI and metrics.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_engine::http::{AppState, auth::user_token};
use coupon_testkit::{SpawnedServer, TestEnv, spawn_server};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

const ADMIN: &str = "test-admin";
const SECRET: &str = "test-secret";

struct App {
    base: String,
    http: Client,
    _env: TestEnv,
    _server: SpawnedServer,
}

async fn spawn_app() -> App {
    let env = TestEnv::new().await.unwrap();
    let server = spawn_server(AppState::new(env.engine.clone(), ADMIN, SECRET))
        .await
        .unwrap();
    App {
        base: server.base_url(),
        http: Client::new(),
        _env: env,
        _server: server,
    }
}

fn user(id: &str) -> String {
    user_token(SECRET.as_bytes(), id)
}

impl App {
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn raw(&self, path: &str, token: &str, body: &'static str) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        (resp.status(), resp.json().await.unwrap_or(Value::Null))
    }

    async fn template(&self, stock: i64, limit: i64, policy: &str) -> String {
        let (s, body) = self
            .call(
                Method::POST,
                "/v1/templates",
                Some(ADMIN),
                Some(json!({
                    "name": "sale", "total_stock": stock, "per_user_limit": limit,
                    "discount": {"kind": "fixed", "amount": 500}, "valid_days": 7,
                    "refund_policy": policy
                })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    async fn claim(&self, t: &str, who: &str, rid: &str) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            &format!("/v1/templates/{t}/claims"),
            Some(&user(who)),
            Some(json!({"request_id": rid})),
        )
        .await
    }
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<none>")
}

#[tokio::test]
async fn the_full_flow_over_http() {
    let app = spawn_app().await;
    let t = app.template(2, 1, "return_to_stock").await;
    let (s, got) = app
        .call(Method::GET, &format!("/v1/templates/{t}"), None, None)
        .await;
    assert_eq!(
        (s, got["remaining_stock"].as_i64()),
        (StatusCode::OK, Some(2))
    );

    let (s, c1) = app.claim(&t, "alice", "r1").await;
    assert_eq!(s, StatusCode::CREATED, "{c1}");
    assert_eq!(c1["remaining_stock"], 1);
    let (s, again) = app.claim(&t, "alice", "r1").await;
    assert_eq!(
        (s, &again),
        (StatusCode::CREATED, &c1),
        "a retry returns the same body"
    );
    let (s, e) = app.claim(&t, "alice", "r2").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "user_limit"));
    app.claim(&t, "bob", "b1").await;
    let (s, e) = app.claim(&t, "carol", "c1").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "stock_empty"));

    let coupon = c1["coupon_id"].as_str().unwrap();
    let redeem = format!("/v1/coupons/{coupon}/redeem");
    let (s, r) = app
        .call(
            Method::POST,
            &redeem,
            Some(&user("alice")),
            Some(json!({"order_id": "o1", "order_amount": 1200})),
        )
        .await;
    assert_eq!(
        (s, r["discount"].as_i64()),
        (StatusCode::OK, Some(500)),
        "{r}"
    );
    let (s, r2) = app
        .call(
            Method::POST,
            &redeem,
            Some(&user("alice")),
            Some(json!({"order_id": "o1", "order_amount": 1200})),
        )
        .await;
    assert_eq!((s, &r2), (StatusCode::OK, &r));
    let (s, e) = app
        .call(
            Method::POST,
            &redeem,
            Some(&user("alice")),
            Some(json!({"order_id": "o2", "order_amount": 1200})),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "already_used"));
    let (s, e) = app
        .call(
            Method::POST,
            &redeem,
            Some(&user("bob")),
            Some(json!({"order_id": "o9", "order_amount": 1})),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"));

    let refund = format!("/v1/coupons/{coupon}/refund");
    let (s, e) = app
        .call(
            Method::POST,
            &refund,
            Some(&user("bob")),
            Some(json!({"order_id": "o1"})),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"));
    let (s, e) = app
        .call(
            Method::POST,
            &refund,
            Some(&user("alice")),
            Some(json!({"order_id": "nope"})),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "invalid_state"));
    let (s, f) = app
        .call(
            Method::POST,
            &refund,
            Some(&user("alice")),
            Some(json!({"order_id": "o1"})),
        )
        .await;
    assert_eq!((s, f["status"].as_str()), (StatusCode::OK, Some("revoked")));
    let (s, f2) = app
        .call(
            Method::POST,
            &refund,
            Some(&user("alice")),
            Some(json!({"order_id": "o1"})),
        )
        .await;
    assert_eq!((s, &f2), (StatusCode::OK, &f));

    let (s, mine) = app
        .call(
            Method::GET,
            "/v1/users/me/coupons",
            Some(&user("alice")),
            None,
        )
        .await;
    assert_eq!(
        (s, mine.as_array().map(Vec::len)),
        (StatusCode::OK, Some(1))
    );
    assert_eq!(mine[0]["status"], "revoked");

    let (s, audit) = app
        .call(
            Method::GET,
            &format!("/v1/admin/templates/{t}/audit"),
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(
        (audit["total_stock"].as_i64(), audit["redis_stock"].as_i64()),
        (Some(2), Some(1))
    );
    let (s, rec) = app
        .call(Method::POST, "/v1/admin/reconcile", Some(ADMIN), None)
        .await;
    assert_eq!((s, rec["templates"].as_i64()), (StatusCode::OK, Some(1)));
    let (s, tok) = app
        .call(
            Method::POST,
            "/v1/admin/user-tokens",
            Some(ADMIN),
            Some(json!({"user_id": "dave"})),
        )
        .await;
    assert_eq!(
        (s, tok["token"].as_str()),
        (StatusCode::OK, Some(user("dave").as_str()))
    );
}

#[tokio::test]
async fn auth_failures_are_401_and_change_nothing() {
    let app = spawn_app().await;
    let t = app.template(5, 1, "return_to_user").await;
    let claims = format!("/v1/templates/{t}/claims");
    let forged = user("alice").replacen("alice", "bob", 1);
    let body = json!({"request_id": "r"});
    for token in [None, Some("garbage"), Some(forged.as_str()), Some(ADMIN)] {
        let (s, e) = app
            .call(Method::POST, &claims, token, Some(body.clone()))
            .await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{token:?}"
        );
    }
    for (m, path) in [
        (Method::POST, "/v1/templates".to_owned()),
        (Method::GET, format!("/v1/admin/templates/{t}/audit")),
        (Method::POST, "/v1/admin/reconcile".to_owned()),
        (Method::POST, "/v1/admin/user-tokens".to_owned()),
    ] {
        let (s, _) = app
            .call(m.clone(), &path, Some(&user("alice")), Some(json!({})))
            .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{m} {path}");
    }
    let (_, got) = app
        .call(Method::GET, &format!("/v1/templates/{t}"), None, None)
        .await;
    assert_eq!(got["remaining_stock"], 5);
}

#[tokio::test]
async fn malformed_input_is_400_with_a_reason() {
    let app = spawn_app().await;
    let t = app.template(5, 1, "return_to_user").await;
    let alice = user("alice");
    let claims = format!("/v1/templates/{t}/claims");
    let big: &'static str =
        Box::leak(format!("{{\"request_id\": \"{}\"}}", "x".repeat(20_000)).into_boxed_str());
    let cases: Vec<(String, &str, &'static str)> = vec![
        (claims.clone(), alice.as_str(), "{not json"),
        (claims.clone(), alice.as_str(), r#"{"request_id": 5}"#),
        (
            claims.clone(),
            alice.as_str(),
            r#"{"request_id": "r", "extra": 1}"#,
        ),
        (claims.clone(), alice.as_str(), r#"{}"#),
        (claims.clone(), alice.as_str(), r#"{"request_id": ""}"#),
        (
            claims.clone(),
            alice.as_str(),
            r#"{"request_id": "has space"}"#,
        ),
        (claims.clone(), alice.as_str(), big),
        (
            "/v1/templates/not-a-uuid/claims".into(),
            alice.as_str(),
            r#"{"request_id": "r"}"#,
        ),
        (
            "/v1/coupons/not-a-uuid/redeem".into(),
            alice.as_str(),
            r#"{"order_id": "o", "order_amount": 1}"#,
        ),
        (
            format!("/v1/coupons/{t}/redeem"),
            alice.as_str(),
            r#"{"order_id": "o", "order_amount": -1}"#,
        ),
        (
            format!("/v1/coupons/{t}/redeem"),
            alice.as_str(),
            r#"{"order_id": "o", "order_amount": "10"}"#,
        ),
        (
            format!("/v1/coupons/{t}/refund"),
            alice.as_str(),
            r#"{"order_id": ""}"#,
        ),
        (
            "/v1/templates".into(),
            ADMIN,
            r#"{"name": "x", "total_stock": 0, "per_user_limit": 1, "discount": {"kind": "fixed", "amount": 1}, "valid_days": 1, "refund_policy": "return_to_user"}"#,
        ),
        (
            "/v1/templates".into(),
            ADMIN,
            r#"{"name": "x", "total_stock": 5, "per_user_limit": 0, "discount": {"kind": "fixed", "amount": 1}, "valid_days": 1, "refund_policy": "return_to_user"}"#,
        ),
        (
            "/v1/templates".into(),
            ADMIN,
            r#"{"name": "x", "total_stock": 5, "per_user_limit": 1, "discount": {"kind": "bogus"}, "valid_days": 1, "refund_policy": "return_to_user"}"#,
        ),
        (
            "/v1/templates".into(),
            ADMIN,
            r#"{"name": "x", "total_stock": 5, "per_user_limit": 1, "discount": {"kind": "fixed", "amount": 1}, "valid_days": 1, "refund_policy": "both"}"#,
        ),
        (
            "/v1/admin/user-tokens".into(),
            ADMIN,
            r#"{"user_id": "bad id!"}"#,
        ),
    ];
    for (path, token, body) in cases {
        let (s, e) = app.raw(&path, token, body).await;
        assert!(
            s == StatusCode::BAD_REQUEST || s == StatusCode::PAYLOAD_TOO_LARGE,
            "{path} {body:.60}: {s} {e}"
        );
        if s == StatusCode::BAD_REQUEST {
            assert_eq!(code(&e), "invalid_request", "{path}: {e}");
            assert!(!e["error"]["message"].as_str().unwrap_or("").is_empty());
        }
    }
    let (_, got) = app
        .call(Method::GET, &format!("/v1/templates/{t}"), None, None)
        .await;
    assert_eq!(got["remaining_stock"], 5);
    let (s, e) = app.call(Method::GET, "/nowhere", None, None).await;
    assert_eq!((s, code(&e)), (StatusCode::NOT_FOUND, "not_found"));
    let (s, e) = app
        .call(
            Method::GET,
            &format!("/v1/templates/{}", uuid::Uuid::new_v4()),
            None,
            None,
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn bad_input_gets_the_status_the_description_declares() {
    let app = spawn_app().await;
    let t = app.template(5, 1, "return_to_user").await;
    let alice = user("alice");
    // Over the 16 KiB limit: 413, not 400, as declared.
    let big: &'static str =
        Box::leak(format!("{{\"request_id\": \"{}\"}}", "x".repeat(20_000)).into_boxed_str());
    let (s, e) = app
        .raw(&format!("/v1/templates/{t}/claims"), &alice, big)
        .await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    // Only the hyphenated UUID form the description's pattern allows.
    let simple = t.replace('-', "");
    for id in [simple.clone(), format!("{{{t}}}"), format!("urn:uuid:{t}")] {
        let (s, e) = app
            .call(Method::GET, &format!("/v1/templates/{id}"), None, None)
            .await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::BAD_REQUEST, "invalid_request"),
            "{id}"
        );
    }
    // NUL cannot be stored in Postgres text: a clear 400, never a 503.
    let (s, e) = app
        .raw(
            "/v1/templates",
            ADMIN,
            r#"{"name": "a\u0000b", "total_stock": 1, "per_user_limit": 1, "discount": {"kind": "fixed", "amount": 1}, "valid_days": 1, "refund_policy": "return_to_user"}"#,
        )
        .await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::BAD_REQUEST, "invalid_request"),
        "{e}"
    );
    // A null optional field is absent, as the schema's nullable types say.
    let (s, e) = app
        .raw(
            "/v1/templates",
            ADMIN,
            r#"{"name": "n", "total_stock": 1, "per_user_limit": 1, "discount": {"kind": "percent", "percent": 5, "amount": null}, "valid_days": 1, "valid_until": null, "refund_policy": "return_to_stock"}"#,
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let (_, got) = app
        .call(Method::GET, &format!("/v1/templates/{t}"), None, None)
        .await;
    assert_eq!(got["remaining_stock"], 5, "nothing changed");
}

#[tokio::test]
async fn openapi_lists_every_route_and_metrics_parse() {
    let app = spawn_app().await;
    let (s, doc) = app.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/v1/templates",
        "/v1/templates/{id}",
        "/v1/templates/{id}/claims",
        "/v1/coupons/{id}/redeem",
        "/v1/coupons/{id}/refund",
        "/v1/users/me/coupons",
        "/v1/admin/templates/{id}/audit",
        "/v1/admin/reconcile",
        "/v1/admin/user-tokens",
        "/healthz",
        "/metrics",
        "/openapi.json",
    ] {
        assert!(paths.contains_key(p), "missing {p}");
    }
    let (s, h) = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!((s, h["status"].as_str()), (StatusCode::OK, Some("ok")));
    let t = app.template(1, 1, "return_to_user").await;
    app.claim(&t, "a", "r").await;
    app.claim(&t, "b", "r2").await;
    let text = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut samples = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "bad sample {line}");
        assert!(
            name.chars().next().unwrap().is_ascii_alphabetic(),
            "bad name {line}"
        );
        samples += 1;
    }
    assert!(samples > 0);
    assert!(
        text.contains("coupon_claims_total{outcome=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("coupon_claims_total{outcome=\"stock_empty\"} 1"),
        "{text}"
    );
    assert!(text.contains("coupon_pending_intents 0"), "{text}");
    // Redis refused "b" itself: a refusal of what Redis admitted is another series.
    assert!(
        text.contains("coupon_sync_stale_admissions_total{reason=\"stock_empty\"} 0"),
        "{text}"
    );
}

#[tokio::test]
async fn identical_claims_in_flight_at_once_all_answer_the_same_coupon() {
    // A client retry racing its own original is normal traffic: each of 1,000 rounds sends
    // the same request four times at once; all four must get the one coupon, never a 5xx.
    let app = spawn_app().await;
    let t = app.template(1_000_000, 10_000, "return_to_stock").await;
    let rounds = 1_000;
    for round in 0..rounds {
        let rid = format!("same-{round}");
        let answers = futures::future::join_all((0..4).map(|_| app.claim(&t, "carol", &rid))).await;
        let first = answers[0].1["coupon_id"].clone();
        for (s, body) in &answers {
            assert_eq!(*s, StatusCode::CREATED, "round {round}: {body}");
            assert_eq!(body["coupon_id"], first, "round {round}: {answers:?}");
        }
    }
    let (s, mine) = app
        .call(
            Method::GET,
            "/v1/users/me/coupons",
            Some(&user("carol")),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        mine.as_array().map(Vec::len),
        Some(rounds),
        "one coupon per round"
    );
}
