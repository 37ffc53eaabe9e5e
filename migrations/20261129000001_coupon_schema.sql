-- Coupon engine schema (DESIGN §3). Money is integer minor units; times are timestamptz.

CREATE TABLE coupon_template (
    id                        uuid PRIMARY KEY,
    name                      text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    total_stock               bigint      NOT NULL CHECK (total_stock > 0),
    per_user_limit            integer     NOT NULL CHECK (per_user_limit > 0),
    discount_kind             text        NOT NULL CHECK (discount_kind IN ('fixed', 'percent', 'threshold')),
    discount_amount           bigint      CHECK (discount_amount IS NULL OR discount_amount > 0),
    discount_percent          integer     CHECK (discount_percent IS NULL OR discount_percent BETWEEN 1 AND 100),
    min_order_amount          bigint      CHECK (min_order_amount IS NULL OR min_order_amount >= 0),
    max_discount              bigint      CHECK (max_discount IS NULL OR max_discount > 0),
    valid_from                timestamptz,
    valid_until               timestamptz,
    valid_days                integer     CHECK (valid_days IS NULL OR valid_days > 0),
    claim_starts_at           timestamptz,
    claim_ends_at             timestamptz,
    refund_policy             text        NOT NULL CHECK (refund_policy IN ('return_to_user', 'return_to_stock')),
    extend_validity_on_refund boolean     NOT NULL DEFAULT false,
    status                    text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'ended')),
    -- Fencing epoch for the rebuild race (DESIGN §5.1): bumped by every rebuild of the
    -- template's Redis keys; a claim persisted with an older epoch is refused.
    epoch                     bigint      NOT NULL DEFAULT 1,
    created_at                timestamptz NOT NULL DEFAULT now(),
    CHECK ((valid_days IS NOT NULL) <> (valid_until IS NOT NULL)),
    CHECK (valid_from IS NULL OR valid_until IS NULL OR valid_from < valid_until),
    CHECK (claim_starts_at IS NULL OR claim_ends_at IS NULL OR claim_starts_at < claim_ends_at)
);

CREATE TABLE user_coupon (
    id               uuid PRIMARY KEY,
    template_id      uuid        NOT NULL REFERENCES coupon_template (id),
    user_id          text        NOT NULL CHECK (length(user_id) BETWEEN 1 AND 64),
    status           text        NOT NULL DEFAULT 'issued' CHECK (status IN ('issued', 'used', 'expired', 'revoked')),
    order_id         text,
    claim_request_id text        NOT NULL,
    claimed_at       timestamptz NOT NULL,
    valid_from       timestamptz NOT NULL,
    valid_until      timestamptz NOT NULL,
    used_at          timestamptz,
    CONSTRAINT user_coupon_template_request_key UNIQUE (template_id, claim_request_id),
    -- A used coupon names its order; any other status holds none.
    CONSTRAINT user_coupon_order_matches_status CHECK ((status = 'used') = (order_id IS NOT NULL)),
    CONSTRAINT user_coupon_used_at_matches_status CHECK ((status = 'used') = (used_at IS NOT NULL))
);
CREATE INDEX user_coupon_user_idx ON user_coupon (user_id, claimed_at DESC);
CREATE INDEX user_coupon_template_user_idx ON user_coupon (template_id, user_id);
CREATE INDEX user_coupon_expiry_idx ON user_coupon (valid_until) WHERE status = 'issued';

CREATE TABLE coupon_use_log (
    id           bigserial PRIMARY KEY,
    coupon_id    uuid        NOT NULL REFERENCES user_coupon (id),
    order_id     text        NOT NULL CHECK (length(order_id) BETWEEN 1 AND 64),
    user_id      text        NOT NULL,
    order_amount bigint      NOT NULL CHECK (order_amount >= 0),
    discount     bigint      NOT NULL CHECK (discount >= 0),
    used_at      timestamptz NOT NULL,
    undone       boolean     NOT NULL DEFAULT false,
    undone_at    timestamptz,
    -- The seed's guard against a duplicate redemption record.
    CONSTRAINT coupon_use_log_coupon_order_key UNIQUE (coupon_id, order_id),
    CHECK (undone = (undone_at IS NOT NULL))
);
-- At most one live (not undone) redemption per coupon.
CREATE UNIQUE INDEX coupon_use_log_one_live_key ON coupon_use_log (coupon_id) WHERE NOT undone;

CREATE TABLE stock_outbox (
    id          bigserial PRIMARY KEY,
    template_id uuid        NOT NULL REFERENCES coupon_template (id),
    coupon_id   uuid        NOT NULL REFERENCES user_coupon (id),
    user_id     text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('return_stock')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    applied_at  timestamptz,
    -- A coupon returns its stock at most once.
    CONSTRAINT stock_outbox_coupon_kind_key UNIQUE (coupon_id, kind)
);
CREATE INDEX stock_outbox_unapplied_idx ON stock_outbox (template_id, id) WHERE applied_at IS NULL;
