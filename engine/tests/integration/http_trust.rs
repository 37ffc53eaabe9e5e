//! Shared secrets and trust across servers (issue 12, item 7), over HTTP against real Redis
//! and Postgres: user tokens with an expiry covered by their MAC, the minting endpoint's
//! `ttl_secs`, and the order service's token as the caller of redeem.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_engine::http::{
    AppState,
    auth::{user_token, user_token_until},
};
use coupon_testkit::{SpawnedServer, TestEnv, spawn_server};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

const ADMIN: &str = "trust-admin";
const SECRET: &str = "trust-secret";
const SERVICE: &str = "trust-order-service";

struct App {
    base: String,
    http: Client,
    _env: TestEnv,
    _server: SpawnedServer,
}

async fn spawn_app(service_token: Option<&str>) -> App {
    let env = TestEnv::new().await.unwrap();
    let mut state = AppState::new(env.engine.clone(), ADMIN, SECRET);
    if let Some(t) = service_token {
        state = state.with_service_token(t);
    }
    let server = spawn_server(state).await.unwrap();
    App {
        base: server.base_url(),
        http: Client::new(),
        _env: env,
        _server: server,
    }
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<none>")
}

impl App {
    async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status(), resp.json().await.unwrap_or(Value::Null))
    }

    async fn template(&self) -> String {
        let (s, body) = self
            .post(
                "/v1/templates",
                ADMIN,
                json!({
                    "name": "sale", "total_stock": 5, "per_user_limit": 1,
                    "discount": {"kind": "percent", "percent": 10}, "valid_days": 7,
                    "refund_policy": "return_to_user"
                }),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    async fn remaining(&self, t: &str) -> i64 {
        let v: Value = self
            .http
            .get(format!("{}/v1/templates/{t}", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["remaining_stock"].as_i64().unwrap()
    }

    /// Claims one coupon of `t` with `token`; the coupon id.
    async fn claim(&self, t: &str, token: &str) -> String {
        let (s, body) = self
            .post(
                &format!("/v1/templates/{t}/claims"),
                token,
                json!({"request_id": "r1"}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["coupon_id"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn minted_tokens_may_expire_and_expired_ones_change_nothing() {
    let app = spawn_app(None).await;
    let t = app.template().await;
    let (s, minted) = app
        .post(
            "/v1/admin/user-tokens",
            ADMIN,
            json!({"user_id": "alice", "ttl_secs": 3600}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{minted}");
    let expires_at = minted["expires_at"].as_i64().unwrap();
    assert!(
        (now() + 3590..=now() + 3600).contains(&expires_at),
        "{minted}"
    );
    app.claim(&t, minted["token"].as_str().unwrap()).await;

    // A token without ttl has no expiry, in the original format.
    let (_, plain) = app
        .post("/v1/admin/user-tokens", ADMIN, json!({"user_id": "carol"}))
        .await;
    assert_eq!(plain["expires_at"], Value::Null);
    assert_eq!(
        plain["token"],
        json!(user_token(SECRET.as_bytes(), "carol"))
    );

    let expired = user_token_until(SECRET.as_bytes(), "bob", now() - 1);
    let before = app.remaining(&t).await;
    let (s, e) = app
        .post(
            &format!("/v1/templates/{t}/claims"),
            &expired,
            json!({"request_id": "r2"}),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    assert!(
        e["error"]["message"].as_str().unwrap().contains("expired"),
        "{e}"
    );
    assert_eq!(app.remaining(&t).await, before, "an expired token claimed");

    for ttl in [json!(0), json!(-5), json!(315_360_001_i64)] {
        let (s, e) = app
            .post(
                "/v1/admin/user-tokens",
                ADMIN,
                json!({"user_id": "alice", "ttl_secs": ttl}),
            )
            .await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::BAD_REQUEST, "invalid_request"),
            "{ttl}"
        );
    }
}

#[tokio::test]
async fn with_a_service_token_only_the_order_service_redeems() {
    let app = spawn_app(Some(SERVICE)).await;
    let t = app.template().await;
    let alice = user_token(SECRET.as_bytes(), "alice");
    let coupon = app.claim(&t, &alice).await;
    let redeem = format!("/v1/coupons/{coupon}/redeem");
    let order = json!({"order_id": "o1", "order_amount": 10_000});

    let (s, e) = app.post(&redeem, &alice, order.clone()).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    for wrong in [ADMIN, "not-the-service"] {
        let (s, e) = app.post(&redeem, wrong, order.clone()).await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{wrong}"
        );
    }
    let (s, e) = app.post(&redeem, SERVICE, order.clone()).await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::BAD_REQUEST, "invalid_request"),
        "{e}"
    );
    let for_bob = json!({"order_id": "o1", "order_amount": 10_000, "user_id": "bob"});
    let (s, e) = app.post(&redeem, SERVICE, for_bob).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"), "{e}");

    // None of the refusals used the coupon: the service's redeem for alice is the first.
    let for_alice = json!({"order_id": "o1", "order_amount": 10_000, "user_id": "alice"});
    let (s, r) = app.post(&redeem, SERVICE, for_alice).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["discount"], 1_000);
    // Refunds belong to the order service too: a shopper who could refund an order the
    // shop kept would use the coupon again on the next order (issue 48).
    let refund = format!("/v1/coupons/{coupon}/refund");
    let (s, e) = app.post(&refund, &alice, json!({"order_id": "o1"})).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    let again = json!({"order_id": "o2", "order_amount": 10_000, "user_id": "alice"});
    let (s, e) = app.post(&redeem, SERVICE, again.clone()).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "already_used"), "{e}");
    let (s, e) = app.post(&refund, SERVICE, json!({"order_id": "o1"})).await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::BAD_REQUEST, "invalid_request"),
        "{e}"
    );
    let (s, r) = app
        .post(
            &refund,
            SERVICE,
            json!({"order_id": "o1", "user_id": "alice"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["status"], "issued");
}

#[tokio::test]
async fn without_a_service_token_shoppers_redeem_only_for_themselves() {
    let app = spawn_app(None).await;
    let t = app.template().await;
    let alice = user_token(SECRET.as_bytes(), "alice");
    let coupon = app.claim(&t, &alice).await;
    let redeem = format!("/v1/coupons/{coupon}/redeem");
    let (s, e) = app
        .post(
            &redeem,
            &alice,
            json!({"order_id": "o1", "order_amount": 10_000, "user_id": "bob"}),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"), "{e}");
    let (s, e) = app
        .post(
            &redeem,
            SERVICE,
            json!({"order_id": "o1", "order_amount": 10_000}),
        )
        .await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::UNAUTHORIZED, "unauthorized"),
        "{e}"
    );
    let (s, r) = app
        .post(
            &redeem,
            &alice,
            json!({"order_id": "o1", "order_amount": 10_000, "user_id": "alice"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
}
