-- Round 2 (docs/ARCHITECTURE.md, "Postgres decides"): Redis admits, Postgres decides.

-- One row per template: how many of its coupons count against stock (status <> 'revoked')
-- and the fencing epoch of its Redis state. Every claim batch takes this row's lock once,
-- checks the stock inside Postgres and bumps `counted`; a return_to_stock refund decrements
-- it in its own transaction; a rebuild takes the same lock to bump the epoch, so none of
-- them can cross another.
CREATE TABLE template_stock (
    template_id uuid   PRIMARY KEY REFERENCES coupon_template (id),
    total_stock bigint NOT NULL,
    counted     bigint NOT NULL DEFAULT 0,
    epoch       bigint NOT NULL DEFAULT 0
);
INSERT INTO template_stock (template_id, total_stock, counted, epoch)
SELECT t.id, t.total_stock,
       (SELECT count(*) FROM user_coupon c WHERE c.template_id = t.id AND c.status <> 'revoked'),
       t.epoch
FROM coupon_template t;
-- The structural backstop: whatever any code path believes, Postgres refuses an oversell.
-- NOT VALID: a database oversold before this migration still migrates (its audit reports it).
ALTER TABLE template_stock
    ADD CONSTRAINT template_stock_within_total CHECK (counted >= 0 AND counted <= total_stock) NOT VALID;

-- Fencing epochs come from a sequence: a rebuild whose transaction aborts after it wrote
-- Redis has still consumed its number, so the next rebuild can never hand it out again.
CREATE SEQUENCE coupon_epoch_seq;
SELECT setval('coupon_epoch_seq', GREATEST((SELECT max(epoch) FROM coupon_template), 1));
ALTER TABLE coupon_template DROP COLUMN epoch;

-- The identity (`run_id`) of the Redis each key namespace was last rebuilt against: a
-- restarted or promoted Redis has another one, and its templates are rebuilt before they
-- are trusted again (a restart from an old snapshot comes back with stale but present keys).
CREATE TABLE redis_identity (
    namespace text        PRIMARY KEY,
    run_id    text        NOT NULL,
    seen_at   timestamptz NOT NULL DEFAULT now()
);

-- Postgres decides a batch of claim intents that Redis admitted, in one round trip: with the
-- template's counter row locked, each intent in arrival order is fenced (epoch), answered as
-- a duplicate (its request id is stored), refused (stock or per-user limit, unless
-- p_enforce is false: mutant D8 only), or accepted; the accepted rows are inserted with one
-- statement and the counter moves by exactly the rows inserted. Called in autocommit, so
-- the batch is one transaction with one commit.
-- Returns one row per intent, in order: verdict ('stored', 'duplicate', 'stock_empty',
-- 'user_limit', 'fenced', 'epoch_ahead') and, for 'duplicate', the stored coupon and owner.
CREATE FUNCTION coupon_decide_claims(
    p_template uuid,
    p_enforce  boolean,
    p_limit    bigint,
    p_ids      uuid[],
    p_users    text[],
    p_rids     text[],
    p_epochs   bigint[],
    p_at       timestamptz[],
    p_from     timestamptz[],
    p_until    timestamptz[]
) RETURNS TABLE (verdict text, coupon_id uuid, owner text)
LANGUAGE plpgsql AS $$
DECLARE
    v_counted  bigint;
    v_total    bigint;
    v_epoch    bigint;
    v_n        integer := coalesce(array_length(p_ids, 1), 0);
    v_known    jsonb;   -- request id -> [coupon id, owner], stored or accepted in this batch
    v_held     jsonb;   -- user -> coupons counting against the limit
    v_accepted integer[] := '{}';
    v_verdicts text[] := '{}';
    v_coupons  uuid[] := '{}';
    v_owners   text[] := '{}';
    v_prior    jsonb;
    v_user_has bigint;
BEGIN
    SELECT s.counted, s.total_stock, s.epoch INTO v_counted, v_total, v_epoch
    FROM template_stock s WHERE s.template_id = p_template FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'template % has no stock row', p_template USING ERRCODE = 'no_data_found';
    END IF;
    SELECT coalesce(jsonb_object_agg(c.claim_request_id, jsonb_build_array(c.id, c.user_id)), '{}')
      INTO v_known
      FROM user_coupon c
     WHERE c.template_id = p_template AND c.claim_request_id = ANY (p_rids);
    SELECT coalesce(jsonb_object_agg(h.user_id, h.n), '{}') INTO v_held
      FROM (SELECT c.user_id, count(*) AS n FROM user_coupon c
             WHERE c.template_id = p_template AND c.user_id = ANY (p_users)
               AND c.status <> 'revoked'
             GROUP BY c.user_id) h;
    FOR i IN 1 .. v_n LOOP
        v_prior := v_known -> p_rids[i];
        IF p_epochs[i] < v_epoch THEN
            v_verdicts := v_verdicts || 'fenced'::text;
            v_coupons := v_coupons || NULL::uuid;
            v_owners := v_owners || NULL::text;
        ELSIF p_epochs[i] > v_epoch THEN
            v_verdicts := v_verdicts || 'epoch_ahead'::text;
            v_coupons := v_coupons || NULL::uuid;
            v_owners := v_owners || NULL::text;
        ELSIF v_prior IS NOT NULL THEN
            IF (v_prior ->> 0)::uuid = p_ids[i] THEN
                v_verdicts := v_verdicts || 'stored'::text;
                v_coupons := v_coupons || NULL::uuid;
                v_owners := v_owners || NULL::text;
            ELSE
                v_verdicts := v_verdicts || 'duplicate'::text;
                v_coupons := v_coupons || (v_prior ->> 0)::uuid;
                v_owners := v_owners || (v_prior ->> 1);
            END IF;
        ELSE
            v_user_has := coalesce((v_held ->> p_users[i])::bigint, 0);
            IF p_enforce AND v_counted + cardinality(v_accepted) >= v_total THEN
                v_verdicts := v_verdicts || 'stock_empty'::text;
                v_coupons := v_coupons || NULL::uuid;
                v_owners := v_owners || NULL::text;
            ELSIF p_enforce AND v_user_has >= p_limit THEN
                v_verdicts := v_verdicts || 'user_limit'::text;
                v_coupons := v_coupons || NULL::uuid;
                v_owners := v_owners || NULL::text;
            ELSE
                v_accepted := v_accepted || i;
                v_held := jsonb_set(v_held, ARRAY[p_users[i]], to_jsonb(v_user_has + 1));
                v_known := jsonb_set(v_known, ARRAY[p_rids[i]],
                                     jsonb_build_array(p_ids[i], p_users[i]));
                v_verdicts := v_verdicts || 'stored'::text;
                v_coupons := v_coupons || NULL::uuid;
                v_owners := v_owners || NULL::text;
            END IF;
        END IF;
    END LOOP;
    IF cardinality(v_accepted) > 0 THEN
        WITH ins AS (
            INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                     claimed_at, valid_from, valid_until)
            SELECT p_ids[a], p_template, p_users[a], 'issued', p_rids[a],
                   p_at[a], p_from[a], p_until[a]
              FROM unnest(v_accepted) AS a
            ON CONFLICT (template_id, claim_request_id) DO NOTHING
            RETURNING 1)
        -- The round-1 behaviour (p_enforce false) kept no counter.
        UPDATE template_stock SET counted = counted + (SELECT count(*) FROM ins)
         WHERE template_id = p_template AND p_enforce;
    END IF;
    RETURN QUERY SELECT v.verdict, v.coupon_id, v.owner
                   FROM unnest(v_verdicts, v_coupons, v_owners) AS v(verdict, coupon_id, owner);
END
$$;
