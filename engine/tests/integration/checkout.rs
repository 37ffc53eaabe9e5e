//! Checkout over HTTP (issue 48), against real Redis and Postgres: the order service locks a
//! coupon when an order is placed, redeems it when the order is paid, releases it when the
//! order is cancelled, and a lock whose order never paid lapses and is swept.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use coupon_engine::http::{AppState, auth::user_token};
use coupon_testkit::{SpawnedServer, TestEnv, spawn_server};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

const ADMIN: &str = "checkout-admin";
const SECRET: &str = "checkout-secret";
const SERVICE: &str = "checkout-order-service";

struct App {
    base: String,
    http: Client,
    env: TestEnv,
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
        env,
        _server: server,
    }
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

    /// A template whose fixed discount (5,000) is larger than some orders.
    async fn template(&self) -> String {
        let (s, body) = self
            .post(
                "/v1/templates",
                ADMIN,
                json!({
                    "name": "checkout", "total_stock": 5, "per_user_limit": 1,
                    "discount": {"kind": "fixed", "amount": 5_000}, "valid_days": 7,
                    "refund_policy": "return_to_user"
                }),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    async fn claim(&self, t: &str, user: &str) -> String {
        let (s, body) = self
            .post(
                &format!("/v1/templates/{t}/claims"),
                &user_token(SECRET.as_bytes(), user),
                json!({"request_id": format!("r-{user}")}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["coupon_id"].as_str().unwrap().to_owned()
    }

    /// The order service's call of `op` (lock, redeem, release, refund) on `coupon`.
    async fn order(&self, op: &str, coupon: &str, body: Value) -> (StatusCode, Value) {
        self.post(&format!("/v1/coupons/{coupon}/{op}"), SERVICE, body)
            .await
    }

    /// The coupon as its owner's wallet shows it.
    async fn wallet_coupon(&self, user: &str, coupon: &str) -> Value {
        let v: Value = self
            .http
            .get(format!("{}/v1/users/me/coupons", self.base))
            .bearer_auth(user_token(SECRET.as_bytes(), user))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == coupon)
            .cloned()
            .unwrap()
    }

    async fn audit_ok(&self, t: &str) {
        let v: Value = self
            .http
            .get(format!("{}/v1/admin/templates/{t}/audit", self.base))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["ok"], true, "{v}");
    }
}

fn lock_for(order: &str, user: &str) -> Value {
    json!({"order_id": order, "user_id": user})
}

#[tokio::test]
async fn an_order_locks_pays_and_no_other_order_can_touch_its_coupon() {
    let app = spawn_app(Some(SERVICE)).await;
    let t = app.template().await;
    let coupon = app.claim(&t, "alice").await;

    let (s, lock) = app.order("lock", &coupon, lock_for("o1", "alice")).await;
    assert_eq!(s, StatusCode::OK, "{lock}");
    assert_eq!(lock["order_id"], "o1");
    let shown = app.wallet_coupon("alice", &coupon).await;
    assert_eq!(
        (&shown["status"], &shown["order_id"]),
        (&json!("locked"), &json!("o1"))
    );
    assert_eq!(shown["locked_until"], lock["locked_until"]);
    // The same order again: the same lock, not a second one.
    let (s, again) = app.order("lock", &coupon, lock_for("o1", "alice")).await;
    assert_eq!(
        (s, &again["locked_until"]),
        (StatusCode::OK, &lock["locked_until"])
    );

    // Another order can neither lock, pay with nor cancel it.
    let (s, e) = app.order("lock", &coupon, lock_for("o2", "alice")).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "locked"), "{e}");
    let pay_o2 = json!({"order_id": "o2", "order_amount": 9_000, "user_id": "alice"});
    let (s, e) = app.order("redeem", &coupon, pay_o2).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "locked"), "{e}");
    let (s, e) = app.order("release", &coupon, lock_for("o2", "alice")).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "locked"), "{e}");
    // Nor another user, nor the shopper herself on a server with a service token.
    let (s, e) = app.order("lock", &coupon, lock_for("o3", "bob")).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"), "{e}");
    let alice = user_token(SECRET.as_bytes(), "alice");
    let (s, e) = app
        .post(
            &format!("/v1/coupons/{coupon}/release"),
            &alice,
            json!({"order_id": "o1"}),
        )
        .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");

    // Payment: the order holding the lock redeems; the discount is capped at the order.
    let pay_o1 = json!({"order_id": "o1", "order_amount": 3_000, "user_id": "alice"});
    let (s, r) = app.order("redeem", &coupon, pay_o1).await;
    assert_eq!((s, &r["discount"]), (StatusCode::OK, &json!(3_000)), "{r}");
    let shown = app.wallet_coupon("alice", &coupon).await;
    assert_eq!(
        (&shown["status"], &shown["locked_until"]),
        (&json!("used"), &Value::Null)
    );
    // A paid order is refunded, not released.
    let (s, e) = app.order("release", &coupon, lock_for("o1", "alice")).await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::CONFLICT, "invalid_state"),
        "{e}"
    );
    let (s, e) = app.order("lock", &coupon, lock_for("o2", "alice")).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "already_used"), "{e}");
    app.audit_ok(&t).await;
}

#[tokio::test]
async fn a_cancelled_order_releases_its_coupon_for_the_next_one() {
    let app = spawn_app(Some(SERVICE)).await;
    let t = app.template().await;
    let coupon = app.claim(&t, "alice").await;
    let (s, _) = app.order("lock", &coupon, lock_for("o1", "alice")).await;
    assert_eq!(s, StatusCode::OK);
    let (s, r) = app.order("release", &coupon, lock_for("o1", "alice")).await;
    assert_eq!((s, &r["released"]), (StatusCode::OK, &json!(true)), "{r}");
    let (s, r) = app.order("release", &coupon, lock_for("o1", "alice")).await;
    assert_eq!(
        (s, &r["released"]),
        (StatusCode::OK, &json!(false)),
        "a repeat: {r}"
    );
    assert_eq!(
        app.wallet_coupon("alice", &coupon).await["status"],
        "issued"
    );
    // One-step checkout (redeem without a lock) still works.
    let pay = json!({"order_id": "o2", "order_amount": 9_000, "user_id": "alice"});
    let (s, r) = app.order("redeem", &coupon, pay).await;
    assert_eq!((s, &r["discount"]), (StatusCode::OK, &json!(5_000)), "{r}");
    app.audit_ok(&t).await;
}

#[tokio::test]
async fn bad_checkout_input_is_refused_and_changes_nothing() {
    let app = spawn_app(Some(SERVICE)).await;
    let t = app.template().await;
    let coupon = app.claim(&t, "alice").await;
    for body in [
        json!({"order_id": "o1"}),
        json!({"order_id": "o1", "user_id": "alice", "ttl_secs": 0}),
        json!({"order_id": "o1", "user_id": "alice", "ttl_secs": 86_401}),
        json!({"order_id": "o1", "user_id": "alice", "ttl_secs": "60"}),
        json!({"order_id": "o1", "user_id": "alice", "extra": 1}),
        json!({"order_id": "", "user_id": "alice"}),
        json!({"order_id": "o".repeat(65), "user_id": "alice"}),
    ] {
        let (s, e) = app.order("lock", &coupon, body.clone()).await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::BAD_REQUEST, "invalid_request"),
            "{body}"
        );
    }
    let unknown = uuid::Uuid::new_v4();
    let (s, e) = app
        .order("lock", &unknown.to_string(), lock_for("o1", "alice"))
        .await;
    assert_eq!((s, code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{e}");
    assert_eq!(
        app.wallet_coupon("alice", &coupon).await["status"],
        "issued"
    );
}

/// mall #1003's shape: 50 orders placed at once with one coupon. Exactly one holds it.
#[tokio::test]
async fn fifty_concurrent_checkouts_of_one_coupon_lock_it_for_exactly_one_order() {
    let app = Arc::new(spawn_app(Some(SERVICE)).await);
    let t = app.template().await;
    let coupon = app.claim(&t, "alice").await;
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (app, coupon, barrier) = (app.clone(), coupon.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let (s, v) = app
                    .order("lock", &coupon, lock_for(&format!("o{i}"), "alice"))
                    .await;
                (i, s, v)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (i, s, v) = task.await.unwrap();
        match s {
            StatusCode::OK => winners.push(format!("o{i}")),
            StatusCode::CONFLICT => assert_eq!(code(&v), "locked", "{v}"),
            other => panic!("o{i}: {other} {v}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let shown = app.wallet_coupon("alice", &coupon).await;
    assert_eq!(shown["order_id"], json!(winners[0]));
    app.audit_ok(&t).await;
}

/// An order that never pays: its lock lapses at its TTL (another order may take the coupon
/// at once) and the sweep gives the coupon back.
#[tokio::test]
async fn a_lock_whose_order_never_paid_lapses_and_is_swept() {
    let app = spawn_app(Some(SERVICE)).await;
    let t = app.template().await;
    let first = app.claim(&t, "alice").await;
    let second = app.claim(&t, "bob").await;
    let one_sec =
        |order: &str, user: &str| json!({"order_id": order, "user_id": user, "ttl_secs": 1});
    let (s, lock) = app.order("lock", &first, one_sec("o1", "alice")).await;
    assert_eq!(s, StatusCode::OK, "{lock}");
    let (s, later) = app.order("lock", &second, one_sec("o9", "bob")).await;
    assert_eq!(s, StatusCode::OK);
    // Wait for Postgres's clock (the one that judges locks) to pass both locks' ends: a
    // condition, not a guess at how long that takes. Bob's was taken after alice's and ends
    // later; waiting for alice's alone let the sweep run before bob's lapsed on a busy
    // machine.
    let end = |lock: &Value| {
        time::OffsetDateTime::parse(
            lock["locked_until"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap()
    };
    let until = end(&lock).max(end(&later));
    loop {
        let passed: bool = sqlx::query_scalar("SELECT now() > $1")
            .bind(until)
            .fetch_one(app.env.engine.pool())
            .await
            .unwrap();
        if passed {
            break;
        }
        tokio::task::yield_now().await;
    }
    // Lapsed: another order takes alice's coupon without waiting for the sweep.
    let (s, r) = app.order("lock", &first, lock_for("o2", "alice")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    // The sweep (the reconcile pass) gives bob's back.
    let r = app
        .http
        .post(format!("{}/v1/admin/reconcile", app.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let shown = app.wallet_coupon("bob", &second).await;
    assert_eq!(
        (&shown["status"], &shown["order_id"]),
        (&json!("issued"), &Value::Null)
    );
    app.audit_ok(&t).await;
}

/// Without a service token (compatibility) the shopper checks out with their own token.
#[tokio::test]
async fn without_a_service_token_the_shopper_checks_out_for_themselves() {
    let app = spawn_app(None).await;
    let t = app.template().await;
    let coupon = app.claim(&t, "alice").await;
    let alice = user_token(SECRET.as_bytes(), "alice");
    let path = format!("/v1/coupons/{coupon}/lock");
    let (s, e) = app
        .post(&path, &alice, json!({"order_id": "o1", "user_id": "bob"}))
        .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"), "{e}");
    let (s, r) = app.post(&path, &alice, json!({"order_id": "o1"})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let bob = user_token(SECRET.as_bytes(), "bob");
    let (s, e) = app.post(&path, &bob, json!({"order_id": "o2"})).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "not_owner"), "{e}");
}
