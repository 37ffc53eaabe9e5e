-- A claim batch inserts its rows before it locks the template's counter row, so that batches
-- of one template can overlap (docs/ARCHITECTURE.md, "Group commit").
--
-- Until now the whole decision ran under the counter row's lock: every request-id probe,
-- every insert into user_coupon and its indexes, then the commit's WAL flush. A
-- template's batches could only follow one another, and the engine's sync claims were bound
-- by that one chain while a quarter of the CPU sat idle (README, "Speed").
--
-- Now a batch first inserts its intents (ON CONFLICT on the request id: a request id that
-- already has a row, committed or committing, is not inserted), then locks the counter row
-- and checks, against everything committed before it took the lock plus its own rows, that
-- the common case holds: every intent is at the template's epoch, every intent got its row,
-- the stock covers them all, and no user of the batch now holds more than the limit. Then
-- the counter is bumped and every intent is stored. Otherwise (a retry, a duplicate, a
-- refusal, a fence) the batch deletes its own rows and decides as before, under the lock,
-- in the same transaction (coupon_decide_claims_locked, the previous function): nothing of
-- the first attempt is left and the verdicts are exactly the ones the previous function
-- gave.
--
-- Why the check under the lock is enough: every batch takes that lock before it commits, so
-- the batches of a template are ordered by it, and each one sees the rows of all batches
-- before it (READ COMMITTED takes a new snapshot per statement) and its own. A user's count
-- includes rows another batch inserted but has not committed only once that batch commits,
-- and then that batch was first in the order and this one sees them.
--
-- Rows are inserted in request-id order: two batches that share request ids (a retry racing
-- its original on another server) then wait on each other's ids in the same order, never in
-- a cycle. A batch under the counter lock waits for no row lock of another batch.

ALTER FUNCTION coupon_decide_claims(uuid, boolean, bigint, uuid[], text[], text[], bigint[],
                                    timestamptz[], timestamptz[], timestamptz[])
    RENAME TO coupon_decide_claims_locked;

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
LANGUAGE plpgsql
-- As for coupon_decide_claims_locked (migrations ..05 and ..06).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_counted bigint;
    v_total   bigint;
    v_epoch   bigint;
    v_n       bigint := cardinality(p_ids);
    v_mine    uuid[];
    v_fits    boolean;
BEGIN
    WITH ins AS (
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT t.id, p_template, t.uid, 'issued', t.rid, t.at, t.vfrom, t.vuntil
          FROM unnest(p_ids, p_users, p_rids, p_at, p_from, p_until)
               AS t(id, uid, rid, at, vfrom, vuntil)
         ORDER BY t.rid
        ON CONFLICT (template_id, claim_request_id) DO NOTHING
        RETURNING id
    )
    SELECT array_agg(ins.id) INTO v_mine FROM ins;

    SELECT s.counted, s.total_stock, s.epoch INTO v_counted, v_total, v_epoch
      FROM template_stock s WHERE s.template_id = p_template FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'template % has no stock row', p_template USING ERRCODE = 'no_data_found';
    END IF;

    v_fits := coalesce(cardinality(v_mine), 0) = v_n
              AND v_epoch = ALL (p_epochs)
              AND (NOT p_enforce OR v_counted + v_n <= v_total);
    IF v_fits AND p_enforce THEN
        -- One probe per user, by the index only this probe can use (migration ..06).
        SELECT NOT EXISTS (
                 SELECT FROM (SELECT DISTINCT u FROM unnest(p_users) AS u) AS q
                   JOIN LATERAL (SELECT count(*) AS n
                                   FROM (SELECT FROM user_coupon c
                                          WHERE c.user_id = q.u
                                            AND uuid_send(c.template_id) = uuid_send(p_template)
                                            AND c.status <> 'revoked'
                                          LIMIT p_limit + 1) AS counted) AS h ON true
                  WHERE h.n > p_limit)
          INTO v_fits;
    END IF;

    IF v_fits THEN
        IF p_enforce THEN
            UPDATE template_stock SET counted = counted + v_n WHERE template_id = p_template;
        END IF;
        RETURN QUERY SELECT 'stored'::text, NULL::uuid, NULL::text FROM generate_series(1, v_n);
        RETURN;
    END IF;

    IF v_mine IS NOT NULL THEN
        DELETE FROM user_coupon c USING unnest(v_mine) AS m(id) WHERE c.id = m.id;
    END IF;
    RETURN QUERY SELECT * FROM coupon_decide_claims_locked(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from, p_until);
END
$$;
