-- Group commit without the fsync in the lock (docs/ARCHITECTURE.md, "Group commit").
--
-- A claim batch holds its template's counter row until it commits, and with
-- synchronous_commit on a commit returns only after its WAL is flushed: the template's
-- batches queued behind each other's fsync, one at a time. Now a batch commits without
-- waiting for the flush (its lock is released at once, the next batch decides while the
-- flush is in flight), and its claims are answered only after a durability barrier,
-- coupon_claims_durable(): a synchronous commit of a transaction that wrote WAL, which
-- returns only when the WAL up to its own commit record — so every batch committed before
-- it — is on disk. One barrier covers every batch committed before it.
--
-- What others may see: a batch's rows are visible from its commit, before they are
-- durable. If Postgres crashes in between they are lost together with everything that
-- read them (the WAL is replayed as a prefix), and no claim of theirs was acknowledged.

CREATE OR REPLACE FUNCTION coupon_decide_claims(
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
    -- Commit without waiting for the WAL flush: the counter row's lock is released at
    -- commit, so the template's next batch runs while this one's fsync is in flight.
    -- Nobody is answered before coupon_claims_durable() has returned (see below).
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT s.counted, s.total_stock, s.epoch INTO v_counted, v_total, v_epoch
    FROM template_stock s WHERE s.template_id = p_template FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'template % has no stock row', p_template USING ERRCODE = 'no_data_found';
    END IF;
    -- One index probe per request id and per user, by equality on both columns of an
    -- index. `column = ANY (array)` let a plan made while the table was still empty (the
    -- first batches of a new database) scan every row of the template through the
    -- template_id prefix of the other index, for every batch, for the whole session.
    SELECT coalesce(jsonb_object_agg(c.claim_request_id, jsonb_build_array(c.id, c.user_id)), '{}')
      INTO v_known
      FROM (SELECT DISTINCT r FROM unnest(p_rids) AS r) AS q
      JOIN LATERAL (SELECT c.claim_request_id, c.id, c.user_id FROM user_coupon c
                     WHERE c.template_id = p_template AND c.claim_request_id = q.r) AS c ON true;
    SELECT coalesce(jsonb_object_agg(h.user_id, h.n), '{}') INTO v_held
      FROM (SELECT q.u AS user_id, n.n
              FROM (SELECT DISTINCT u FROM unnest(p_users) AS u) AS q
              JOIN LATERAL (SELECT count(*) AS n FROM user_coupon c
                             WHERE c.template_id = p_template AND c.user_id = q.u
                               AND c.status <> 'revoked') AS n ON n.n > 0) h;
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

-- The durability barrier. A transactional logical message is the smallest write that
-- takes a transaction id and WAL, so the commit (synchronous_commit on, the default) waits
-- for the flush (as `synchronous_commit` is configured); it touches no table, so barriers
-- never contend for a lock.
CREATE FUNCTION coupon_claims_durable() RETURNS void
LANGUAGE sql AS $$
    SELECT pg_logical_emit_message(true, 'coupon-claims-durable', '');
$$;
