//! The OpenAPI description states what the server enforces (issue 15): every status an
//! operation can answer, the constraints of every request body, and which token each
//! operation needs. Schemathesis (`scripts/contract-test.sh`) checks the server against the
//! description; this keeps the description itself from regressing in `cargo test`, without
//! any backend.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_engine::{
    AuditReport, Coupon, CouponStatus, NewTemplate, ReconcileReport, RefundPolicy, Template,
    TemplateStatus,
    http::{dto, openapi::ApiDoc},
};
use serde_json::{Value, json};
use utoipa::OpenApi;

fn doc() -> Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap()
}

/// `(method, path, operation)` of every operation.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            ops.push((method.clone(), path.clone(), op.clone()));
        }
    }
    ops
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["components"]["schemas"][name];
    assert!(s.is_object(), "no schema {name}");
    s
}

fn statuses(op: &Value) -> Vec<String> {
    op["responses"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn security(op: &Value) -> Vec<String> {
    op["security"]
        .as_array()
        .map(|reqs| {
            reqs.iter()
                .flat_map(|r| r.as_object().unwrap().keys().cloned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_operation_declares_the_statuses_it_can_answer() {
    let doc = doc();
    let ops = operations(&doc);
    assert_eq!(ops.len(), 14, "one per route");
    for (method, path, op) in &ops {
        let got = statuses(op);
        let has = |s: &str| got.iter().any(|g| g == s);
        let label = format!("{method} {path}: {got:?}");
        if !security(op).is_empty() {
            assert!(has("401"), "authenticates, so 401: {label}");
        }
        if op.get("requestBody").is_some() {
            assert!(has("400"), "reads a body, so 400: {label}");
            assert!(has("413"), "reads a body, so 413: {label}");
        }
        if path.contains("{id}") {
            assert!(has("400"), "parses an id, so 400: {label}");
            assert!(has("404"), "looks an id up, so 404: {label}");
        }
        let touches_backends = !matches!(
            path.as_str(),
            "/metrics" | "/openapi.json" | "/v1/admin/user-tokens"
        );
        if touches_backends {
            assert!(has("503"), "a backend can fail, so 503: {label}");
        }
        for (status, response) in op["responses"].as_object().unwrap() {
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status} has the error body"
                );
            }
        }
    }
    let op = |m: &str, p: &str| {
        ops.iter()
            .find(|(method, path, _)| method == m && path == p)
            .map(|(_, _, op)| statuses(op))
            .unwrap()
    };
    for s in ["403", "409", "429"] {
        assert!(op("post", "/v1/coupons/{id}/redeem").contains(&s.to_owned()));
    }
    for s in ["403", "409"] {
        assert!(op("post", "/v1/coupons/{id}/refund").contains(&s.to_owned()));
    }
    assert!(op("post", "/v1/templates/{id}/claims").contains(&"409".to_owned()));
}

#[test]
fn every_operation_names_the_token_it_needs() {
    let doc = doc();
    let schemes = &doc["components"]["securitySchemes"];
    for name in ["admin", "user", "service"] {
        assert_eq!(schemes[name]["type"], "http", "{name}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{name}");
    }
    // The order's side takes either: the order service's token, or (servers without one) a
    // user's.
    let expected: [(&str, &str, &[&str]); 14] = [
        ("post", "/v1/templates", &["admin"]),
        ("get", "/v1/templates/{id}", &[]),
        ("post", "/v1/templates/{id}/claims", &["user"]),
        ("post", "/v1/coupons/{id}/lock", &["service", "user"]),
        ("post", "/v1/coupons/{id}/redeem", &["service", "user"]),
        ("post", "/v1/coupons/{id}/release", &["service", "user"]),
        ("post", "/v1/coupons/{id}/refund", &["service", "user"]),
        ("get", "/v1/users/me/coupons", &["user"]),
        ("get", "/v1/admin/templates/{id}/audit", &["admin"]),
        ("post", "/v1/admin/reconcile", &["admin"]),
        ("post", "/v1/admin/user-tokens", &["admin"]),
        ("get", "/healthz", &[]),
        ("get", "/metrics", &[]),
        ("get", "/openapi.json", &[]),
    ];
    for (method, path, tokens) in expected {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path}");
        let want: Vec<String> = tokens.iter().map(|t| (*t).to_owned()).collect();
        assert_eq!(security(op), want, "{method} {path}");
    }
    for op in ["lock", "redeem", "release", "refund"] {
        let path = format!("/v1/coupons/{{id}}/{op}");
        let text = doc["paths"][path.as_str()]["post"]["description"]
            .as_str()
            .unwrap();
        assert!(text.contains("order service"), "{op}: {text}");
    }
}

#[test]
fn request_bodies_state_the_server_rules() {
    let doc = doc();
    let id_rule =
        json!({"type": "string", "minLength": 1, "maxLength": 64, "pattern": dto::ID_PATTERN});
    for (body, field) in [("ClaimRequest", "request_id"), ("TokenRequest", "user_id")] {
        let s = schema(&doc, body);
        assert_eq!(s["required"], json!([field]), "{body}");
        let prop = &s["properties"][field];
        for key in ["type", "minLength", "maxLength", "pattern"] {
            assert_eq!(prop[key], id_rule[key], "{body}.{field}.{key}");
        }
    }
    let redeem = schema(&doc, "RedeemRequest");
    assert_eq!(redeem["required"], json!(["order_id", "order_amount"]));
    let named = &redeem["properties"]["user_id"];
    for key in ["minLength", "maxLength", "pattern"] {
        assert_eq!(named[key], id_rule[key], "RedeemRequest.user_id.{key}");
    }
    let ttl = &schema(&doc, "TokenRequest")["properties"]["ttl_secs"];
    assert_eq!(
        (&ttl["minimum"], &ttl["maximum"]),
        (&json!(1), &json!(dto::MAX_TOKEN_TTL_SECS))
    );
    for body in ["RedeemRequest", "RefundRequest"] {
        let prop = &schema(&doc, body)["properties"]["order_id"];
        assert_eq!(prop["minLength"], 1, "{body}");
        assert_eq!(prop["maxLength"], 64, "{body}");
        assert_eq!(prop["pattern"], dto::ORDER_ID_PATTERN, "{body}");
    }
    let amount = &schema(&doc, "RedeemRequest")["properties"]["order_amount"];
    assert_eq!(
        (&amount["minimum"], &amount["type"]),
        (&json!(0), &json!("integer"))
    );
    for body in [
        "ClaimRequest",
        "RedeemRequest",
        "RefundRequest",
        "TokenRequest",
    ] {
        // deny_unknown_fields: the server refuses any other property.
        assert_eq!(
            schema(&doc, body)["additionalProperties"],
            false,
            "{body} is closed"
        );
    }
    let param = &doc["paths"]["/v1/templates/{id}"]["get"]["parameters"][0];
    assert_eq!(param["schema"]["pattern"], dto::UUID_PATTERN);
}

#[test]
fn the_template_schema_is_the_one_the_server_reads() {
    let doc = doc();
    let new = schema(&doc, "NewTemplate");
    let parts = new["allOf"].as_array().unwrap();
    let base = &parts[0];
    assert_eq!(base["additionalProperties"], false);
    let required: Vec<&str> = base["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        required,
        [
            "name",
            "total_stock",
            "per_user_limit",
            "discount",
            "refund_policy"
        ]
    );
    // The described properties are exactly the ones NewTemplate (de)serializes.
    let spec = NewTemplate::simple("t", 1, 1, RefundPolicy::ReturnToUser);
    let mut served: Vec<String> = serde_json::to_value(&spec)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut described: Vec<String> = base["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    served.sort();
    described.sort();
    assert_eq!(described, served);
    let props = &base["properties"];
    assert_eq!(props["total_stock"]["minimum"], 1);
    assert_eq!(props["per_user_limit"]["minimum"], 1);
    assert_eq!(props["name"]["minLength"], 1);
    assert_eq!(props["name"]["pattern"], dto::NAME_PATTERN);
    assert_eq!(
        props["refund_policy"]["enum"],
        json!(["return_to_user", "return_to_stock"])
    );
    // Exactly one of valid_days and valid_until.
    assert_eq!(parts[1]["oneOf"].as_array().map(Vec::len), Some(2));
    // The one-field-against-another rules are in prose.
    let op = &doc["paths"]["/v1/templates"]["post"];
    let text = op["description"].as_str().unwrap();
    assert!(
        text.contains("valid_from") && text.contains("claim_starts_at"),
        "{text}"
    );

    let discount = schema(&doc, "Discount");
    assert_eq!(discount["discriminator"]["propertyName"], "kind");
    assert_eq!(discount["oneOf"].as_array().map(Vec::len), Some(3));
    for (kind, name) in dto::DISCOUNT_VARIANTS {
        let v = schema(&doc, name);
        assert_eq!(v["properties"]["kind"]["enum"], json!([kind]), "{name}");
        assert_eq!(v["additionalProperties"], false, "{name}");
        assert_eq!(
            discount["discriminator"]["mapping"][kind],
            format!("#/components/schemas/{name}")
        );
    }
    assert_eq!(
        schema(&doc, "PercentDiscount")["properties"]["percent"]["maximum"],
        100
    );
    assert_eq!(
        schema(&doc, "ThresholdDiscount")["required"],
        json!(["kind", "amount", "min_order_amount"])
    );
}

#[test]
fn error_codes_are_an_enum() {
    let doc = doc();
    let codes = &schema(&doc, "ErrorCode")["enum"];
    for code in [
        "invalid_request",
        "unauthorized",
        "forbidden",
        "payload_too_large",
        "not_found",
        "busy",
        "unavailable",
    ] {
        assert!(codes.as_array().unwrap().contains(&json!(code)), "{code}");
    }
}

/// Property names of `schema`, sorted.
fn described(doc: &Value, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = schema(doc, name)["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// Keys of `value` serialized, plus `extra` (fields the handler adds), sorted.
fn served(value: impl serde::Serialize, extra: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = serde_json::to_value(value)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .chain(extra.iter().map(|s| (*s).to_owned()))
        .collect();
    keys.sort();
    keys
}

#[test]
fn response_schemas_mirror_what_the_handlers_serialize() {
    // The response schemas are written next to the handlers, not derived from the engine's
    // types; this is what keeps the two from drifting apart.
    let doc = doc();
    let now = time::OffsetDateTime::now_utc();
    let id = uuid::Uuid::nil();
    let template = Template {
        id: id.into(),
        spec: NewTemplate::simple("t", 1, 1, RefundPolicy::ReturnToUser),
        status: TemplateStatus::Active,
    };
    assert_eq!(
        described(&doc, "Template"),
        served(&template, &["remaining_stock"])
    );
    let coupon = Coupon {
        id,
        template_id: id.into(),
        user_id: "u".into(),
        claim_request_id: "r".into(),
        status: CouponStatus::Issued,
        order_id: None,
        locked_until: None,
        claimed_at: now,
        valid_from: now,
        valid_until: now,
        used_at: None,
    };
    assert_eq!(described(&doc, "Coupon"), served(&coupon, &[]));
    let audit = AuditReport {
        template_id: id.into(),
        total_stock: 1,
        redis_stock: None,
        counted: 0,
        pending: 0,
        outbox_unapplied: 0,
        violations: vec![],
    };
    assert_eq!(described(&doc, "AuditReport"), served(&audit, &["ok"]));
    assert_eq!(
        described(&doc, "ReconcileReport"),
        served(ReconcileReport::default(), &[])
    );
}
