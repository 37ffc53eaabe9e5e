-- A claim batch inserts its rows with a plain INSERT, not ON CONFLICT DO NOTHING
-- (docs/ARCHITECTURE.md, "Group commit").
--
-- ON CONFLICT makes every row a speculative insertion: a probe of the unique
-- (template_id, claim_request_id) index before the heap insert, which the insert into that
-- index then repeats, and a second WAL record per row to confirm the tuple. A conflict is
-- rare (a retry racing its original, a batch retried after a commit that went through
-- unseen), so the batch now inserts plainly inside a block that catches unique_violation,
-- whose subtransaction takes every row of the batch back; the batch is then decided by the
-- previous function, renamed coupon_decide_claims_on_conflict, exactly as before.
--
-- Why the previous function and not straight to coupon_decide_claims_locked: the plain
-- insert stops at the first conflict. A batch whose first request id (in request-id order)
-- is already stored would go to the counter lock before it met a later request id that
-- another server's batch is inserting; it would then wait for that batch under the lock
-- while that batch waits for the lock, and Postgres aborts one of them as a deadlock
-- (test: arbiter::a_batch_with_a_stored_request_id_waits_for_one_in_flight_before_the_counter,
-- which failed so before this fallback). ON CONFLICT waits for every request id in flight
-- before the lock is taken, as it always did. The verdicts are unchanged.
--
-- What both do once their rows are inserted (take the counter row, check the batch, bump
-- the counter or take the rows back and decide under the lock) is one function,
-- coupon_decide_inserted_claims, so the stock and limit checks are written once.
--
-- Measured by `pgbench` of the function alone (20 claims a call, one client,
-- synchronous_commit off so that only CPU is counted, three alternating pairs of 8,000
-- claims, a build busy on the other core): Postgres CPU 50.0, 47.5, 46.3 µs a claim with
-- ON CONFLICT against 43.8, 40.0, 36.3 without, of which ~9 µs is the driver generating
-- the intents; a `perf` profile of the same put 10% of the backend's samples in
-- ExecCheckIndexConstraints, the pre-check alone. In `coupon-loadtest bench` (three
-- alternating pairs of one-round runs): batches of ~20 claims took 1.28, 1.52, 1.22 ms
-- before and 1.08, 1.04, 1.05 ms after; Postgres CPU per async claim 17, 21, 21 µs
-- before and 14, 14, 14 after.

ALTER FUNCTION coupon_decide_claims(uuid, boolean, bigint, uuid[], text[], text[], bigint[],
                                    timestamptz[], timestamptz[], timestamptz[])
    RENAME TO coupon_decide_claims_on_conflict;

-- After a batch inserted its rows (p_mine: the coupon ids it inserted), under the template's
-- counter row: the batch is stored whole if every intent got its row, every intent is at the
-- template's epoch, the stock covers them all and no user of the batch now holds more than
-- the limit; otherwise its rows are taken back and it is decided under the lock
-- (coupon_decide_claims_locked). The body of migration ..02000001's function after its insert.
CREATE FUNCTION coupon_decide_inserted_claims(
    p_template uuid,
    p_enforce  boolean,
    p_limit    bigint,
    p_ids      uuid[],
    p_users    text[],
    p_rids     text[],
    p_epochs   bigint[],
    p_at       timestamptz[],
    p_from     timestamptz[],
    p_until    timestamptz[],
    p_mine     uuid[]
) RETURNS TABLE (verdict text, coupon_id uuid, owner text)
LANGUAGE plpgsql
-- No SET clauses of its own (each costs a save and a restore per call): it runs only inside
-- its two callers, whose settings (generic plans, no sequential scans; migrations ..05 and
-- ..06) hold for the whole call.
AS $$
DECLARE
    v_counted bigint;
    v_total   bigint;
    v_epoch   bigint;
    v_n       bigint := cardinality(p_ids);
    v_fits    boolean;
BEGIN
    SELECT s.counted, s.total_stock, s.epoch INTO v_counted, v_total, v_epoch
      FROM template_stock s WHERE s.template_id = p_template FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'template % has no stock row', p_template USING ERRCODE = 'no_data_found';
    END IF;

    v_fits := coalesce(cardinality(p_mine), 0) = v_n
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

    IF p_mine IS NOT NULL THEN
        DELETE FROM user_coupon c USING unnest(p_mine) AS m(id) WHERE c.id = m.id;
    END IF;
    RETURN QUERY SELECT * FROM coupon_decide_claims_locked(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until);
END
$$;

-- The previous function, its checks now in coupon_decide_inserted_claims: it skips request
-- ids already stored and waits for those being inserted elsewhere before the counter lock.
CREATE OR REPLACE FUNCTION coupon_decide_claims_on_conflict(
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
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_mine uuid[];
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
    RETURN QUERY SELECT * FROM coupon_decide_inserted_claims(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until, v_mine);
END
$$;

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
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    BEGIN
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT t.id, p_template, t.uid, 'issued', t.rid, t.at, t.vfrom, t.vuntil
          FROM unnest(p_ids, p_users, p_rids, p_at, p_from, p_until)
               AS t(id, uid, rid, at, vfrom, vuntil)
         ORDER BY t.rid;
    EXCEPTION WHEN unique_violation THEN
        -- A request id (or coupon id) is stored or being stored: none of the batch's rows
        -- are now. The previous function waits for any in flight before the counter lock.
        RETURN QUERY SELECT * FROM coupon_decide_claims_on_conflict(
            p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until);
        RETURN;
    END;
    RETURN QUERY SELECT * FROM coupon_decide_inserted_claims(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until, p_ids);
END
$$;
