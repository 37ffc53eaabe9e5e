//! Schemas built by hand: the body of `POST /v1/templates` (the handler reads a
//! `NewTemplate`, whose discount is a tagged union with per-variant rules that derive macros
//! cannot state: which fields each `kind` takes, which must be absent, their bounds), and the
//! enum and reference schemas the derived ones point at.

use std::borrow::Cow;

use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        AllOfBuilder, Discriminator, KnownFormat, ObjectBuilder, OneOfBuilder, Ref, RefOr, Schema,
        SchemaFormat, Type,
        schema::{AdditionalProperties, SchemaType},
    },
};

use super::{MAX_NAME_BYTES, MAX_VALID_DAYS, NAME_PATTERN};
use crate::domain::template::{MAX_PER_USER_LIMIT, MAX_STOCK};

/// The body of `POST /v1/templates` (the handler reads a `NewTemplate`).
pub struct NewTemplateDoc;

impl PartialSchema for NewTemplateDoc {
    fn schema() -> RefOr<Schema> {
        new_template_schema().into()
    }
}

impl ToSchema for NewTemplateDoc {
    fn name() -> Cow<'static, str> {
        "NewTemplate".into()
    }
}

fn typed(ty: Type) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(ty)
}

fn nullable(ty: Type) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([ty, Type::Null]))
}

/// An `i64` in `[min, i64::MAX]`; the maximum keeps generators inside what serde reads.
fn int64(b: ObjectBuilder, min: i64) -> ObjectBuilder {
    b.format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(min))
        .maximum(Some(i64::MAX))
}

fn date_time(b: ObjectBuilder) -> ObjectBuilder {
    b.format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
}

fn one_of_strings(values: &[&str]) -> ObjectBuilder {
    typed(Type::String).enum_values(Some(values.iter().copied()))
}

pub(super) fn refund_policy_schema() -> ObjectBuilder {
    one_of_strings(&["return_to_user", "return_to_stock"])
}

pub(super) fn template_status_schema() -> ObjectBuilder {
    one_of_strings(&["active", "paused", "ended"])
}

pub(super) fn coupon_status_schema() -> ObjectBuilder {
    one_of_strings(&["issued", "locked", "used", "expired", "revoked"])
}

/// A field the variant does not use: serde reads an explicit `null` as absent, anything
/// else is refused.
fn absent() -> ObjectBuilder {
    typed(Type::Null)
}

/// Names of the discount variants in `components.schemas`, by `kind`.
pub const DISCOUNT_VARIANTS: [(&str, &str); 3] = [
    ("fixed", "FixedDiscount"),
    ("percent", "PercentDiscount"),
    ("threshold", "ThresholdDiscount"),
];

fn schema_ref(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

/// A reference to `Discount`, for the fields that hold one.
pub(super) fn discount_ref() -> RefOr<Schema> {
    schema_ref("Discount")
}

/// `Discount`: the `kind`-tagged oneOf of its variants.
pub fn discount_schema() -> Schema {
    let mut discriminator = Discriminator::new("kind");
    let mut one_of = OneOfBuilder::new();
    for (kind, name) in DISCOUNT_VARIANTS {
        discriminator
            .mapping
            .insert(kind.into(), format!("#/components/schemas/{name}"));
        one_of = one_of.item(schema_ref(name));
    }
    one_of
        .discriminator(Some(discriminator))
        .description(Some(
            "How a coupon reduces an order; amounts are minor units (cents)",
        ))
        .into()
}

/// The variants of `Discount::validate`, named as in [`DISCOUNT_VARIANTS`]. A missing
/// optional field and an explicit `null` are the same to serde, so both are allowed; a field
/// of another kind may only be `null`.
pub fn discount_variant_schemas() -> Vec<(&'static str, Schema)> {
    let amount = || int64(typed(Type::Integer), 1).description(Some("Amount off, minor units"));
    let min_order = |b: ObjectBuilder| {
        int64(b, 0).description(Some(
            "Orders below this amount are refused (409 below_min_amount)",
        ))
    };
    let variant = |kind: &str, description: &str| {
        typed(Type::Object)
            .description(Some(description))
            .property("kind", one_of_strings(&[kind]))
            .required("kind")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
    };
    let fixed = variant("fixed", "A fixed amount off (never more than the order)")
        .property("amount", amount())
        .required("amount")
        .property("min_order_amount", min_order(nullable(Type::Integer)))
        .property("percent", absent())
        .property("max_discount", absent());
    let percent = variant(
        "percent",
        "A percentage of the order, floored, optionally capped by max_discount",
    )
    .property(
        "percent",
        typed(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
            .minimum(Some(1))
            .maximum(Some(100)),
    )
    .required("percent")
    .property(
        "max_discount",
        int64(nullable(Type::Integer), 1).description(Some("Cap on the discount, minor units")),
    )
    .property("min_order_amount", min_order(nullable(Type::Integer)))
    .property("amount", absent());
    let threshold = variant(
        "threshold",
        "A fixed amount off once the order reaches min_order_amount",
    )
    .property("amount", amount())
    .required("amount")
    .property("min_order_amount", min_order(typed(Type::Integer)))
    .required("min_order_amount")
    .property("percent", absent())
    .property("max_discount", absent());
    vec![
        (DISCOUNT_VARIANTS[0].1, fixed.into()),
        (DISCOUNT_VARIANTS[1].1, percent.into()),
        (DISCOUNT_VARIANTS[2].1, threshold.into()),
    ]
}

/// `NewTemplate` as `NewTemplate::validate` accepts it. What JSON Schema cannot compare
/// (`valid_from` < `valid_until`, `claim_starts_at` < `claim_ends_at`) and the byte length of
/// `name` are in the operation's description.
pub fn new_template_schema() -> Schema {
    AllOfBuilder::new()
        .item(template_fields())
        .item(one_validity_form())
        .item(extension_only_back_to_the_user())
        .description(Some("A template to create"))
        .into()
}

/// Every field with its own bounds.
fn template_fields() -> ObjectBuilder {
    typed(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .property(
            "name",
            typed(Type::String)
                .min_length(Some(1))
                .max_length(Some(MAX_NAME_BYTES))
                .pattern(Some(NAME_PATTERN))
                .description(Some(
                    "Display name: 1–200 bytes of UTF-8, not only whitespace, no NUL",
                )),
        )
        .required("name")
        .property(
            "total_stock",
            int64(typed(Type::Integer), 1)
                .maximum(Some(MAX_STOCK))
                .description(Some("Coupons that may ever count against stock")),
        )
        .required("total_stock")
        .property(
            "per_user_limit",
            typed(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
                .minimum(Some(1))
                .maximum(Some(MAX_PER_USER_LIMIT))
                .description(Some("Coupons one user may hold (issued, used or expired)")),
        )
        .required("per_user_limit")
        .property("discount", discount_ref())
        .required("discount")
        .property(
            "valid_from",
            date_time(nullable(Type::String))
                .description(Some("Absolute validity start (default: the claim time)")),
        )
        .property(
            "valid_until",
            date_time(nullable(Type::String)).description(Some(
                "Absolute validity end; exactly one of this and valid_days",
            )),
        )
        .property(
            "valid_days",
            nullable(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
                .minimum(Some(1))
                .maximum(Some(MAX_VALID_DAYS))
                .description(Some(
                    "Validity in days from the claim; exactly one of this and valid_until",
                )),
        )
        .property(
            "claim_starts_at",
            date_time(nullable(Type::String)).description(Some("Claims before this are refused")),
        )
        .property(
            "claim_ends_at",
            date_time(nullable(Type::String)).description(Some("Claims from this on are refused")),
        )
        .property("refund_policy", refund_policy_schema())
        .required("refund_policy")
        .property(
            "extend_validity_on_refund",
            typed(Type::Boolean).description(Some(
                "With return_to_user: extend validity by the time the order held the coupon",
            )),
        )
}

fn one_validity_form() -> OneOfBuilder {
    // Exactly one of the two validity forms is non-null.
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .property("valid_days", typed(Type::Integer))
                .required("valid_days"),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .property("valid_until", typed(Type::String))
                .required("valid_until"),
        )
}

fn extension_only_back_to_the_user() -> OneOfBuilder {
    // extend_validity_on_refund is refused with return_to_stock.
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .property("refund_policy", one_of_strings(&["return_to_user"])),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .property("refund_policy", one_of_strings(&["return_to_stock"]))
                .property(
                    "extend_validity_on_refund",
                    typed(Type::Boolean).enum_values(Some([false])),
                ),
        )
}
