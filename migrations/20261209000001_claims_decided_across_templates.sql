-- Many sales at once (docs/ARCHITECTURE.md, "Group commit"): a batch whose claims span
-- many templates, decided by one set of statements instead of one call of
-- coupon_decide_claims per template. Each statement of a call costs the same whether it
-- carries fifty claims or one (executor start-up, cached-plan checks, the table's CHECK
-- constraints parsed again from their text: ~250 µs of Postgres CPU a call,
-- docs/speed-log.md), and over 1,000 live templates a batch holds one or two claims of
-- each. The decision is the per-template one, taken for all templates at once:
--
-- 1. one INSERT of every claim, in (template, request id) order, before any counter row is
--    locked (the order and the reason are coupon_decide_claims's: a batch that meets a
--    request id being inserted elsewhere waits for it without holding a counter). A
--    request id already stored raises unique_violation: every insert is taken back and each
--    template is decided by coupon_decide_claims in template order, as before;
-- 2. every counter row locked in one statement, in template id order (two such batches,
--    from any servers, take the rows they share in the same order: no deadlock);
-- 3. a template fits when its claims' epochs are its epoch, its counter plus its claims is
--    within its stock, and none of its users is over the limit (the probe counts the rows
--    just inserted, as coupon_decide_inserted_claims does). Fitting templates' counters are
--    raised in one UPDATE and their claims answered 'stored';
-- 4. a template that does not fit has its rows taken back and is decided, its counter still
--    held, by coupon_decide_claims_locked, exactly as a lone batch of it would be.
--
-- The answer carries each claim's position in the arrays (ord, from 1).
CREATE FUNCTION coupon_decide_claims_across(
    p_templates uuid[], p_limits bigint[], p_ids uuid[], p_users text[], p_rids text[],
    p_epochs bigint[], p_at timestamptz[], p_from timestamptz[], p_until timestamptz[])
RETURNS TABLE(ord bigint, verdict text, coupon_id uuid, owner text)
LANGUAGE plpgsql
SET plan_cache_mode TO 'force_generic_plan'
SET enable_seqscan TO 'off'
AS $$
DECLARE
    v_parts  uuid[];
    v_locked bigint;
    v_misfit uuid[];
    v_over   uuid[];
    v_t      uuid;
BEGIN
    SELECT array_agg(DISTINCT t ORDER BY t) INTO v_parts FROM unnest(p_templates) AS t;
    BEGIN
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT x.id, x.tpl, x.uid, 'issued', x.rid, x.at, x.vfrom, x.vuntil
          FROM unnest(p_templates, p_ids, p_users, p_rids, p_at, p_from, p_until)
               AS x(tpl, id, uid, rid, at, vfrom, vuntil)
         ORDER BY x.tpl, x.rid;
    EXCEPTION WHEN unique_violation THEN
        FOREACH v_t IN ARRAY v_parts LOOP
            RETURN QUERY
            WITH part AS (
                SELECT array_agg(x.i ORDER BY x.i) AS ords, max(x.lim) AS lim,
                       array_agg(x.id ORDER BY x.i) AS ids, array_agg(x.uid ORDER BY x.i) AS uids,
                       array_agg(x.rid ORDER BY x.i) AS rids,
                       array_agg(x.epoch ORDER BY x.i) AS epochs,
                       array_agg(x.at ORDER BY x.i) AS ats,
                       array_agg(x.vfrom ORDER BY x.i) AS vfroms,
                       array_agg(x.vuntil ORDER BY x.i) AS vuntils
                  FROM unnest(p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at,
                              p_from, p_until)
                       WITH ORDINALITY AS x(tpl, lim, id, uid, rid, epoch, at, vfrom, vuntil, i)
                 WHERE x.tpl = v_t
            )
            SELECT part.ords[d.n::int], d.verdict, d.coupon_id, d.owner
              FROM part
              CROSS JOIN LATERAL coupon_decide_claims(
                       v_t, true, part.lim, part.ids, part.uids, part.rids, part.epochs,
                       part.ats, part.vfroms, part.vuntils)
                   WITH ORDINALITY AS d(verdict, coupon_id, owner, n);
        END LOOP;
        RETURN;
    END;

    SELECT count(*) INTO v_locked
      FROM (SELECT FROM template_stock s WHERE s.template_id = ANY (v_parts)
             ORDER BY s.template_id FOR UPDATE) AS l;
    IF v_locked <> cardinality(v_parts) THEN
        RAISE EXCEPTION 'a template of the batch has no stock row' USING ERRCODE = 'no_data_found';
    END IF;

    SELECT array_agg(p.tpl) INTO v_misfit
      FROM (SELECT x.tpl, count(*) AS n, bool_and(x.epoch = s.epoch) AS same_epoch,
                   min(s.counted) AS counted, min(s.total_stock) AS total
              FROM unnest(p_templates, p_epochs) AS x(tpl, epoch)
              JOIN template_stock s ON s.template_id = x.tpl
             GROUP BY x.tpl) AS p
     WHERE NOT p.same_epoch OR p.counted + p.n > p.total;
    -- One probe per (template, user), by the index only this probe can use (migration ..06).
    SELECT array_agg(DISTINCT q.tpl) INTO v_over
      FROM (SELECT DISTINCT x.tpl, x.uid, x.lim
              FROM unnest(p_templates, p_users, p_limits) AS x(tpl, uid, lim)) AS q
      JOIN LATERAL (SELECT count(*) AS n
                      FROM (SELECT FROM user_coupon c
                             WHERE c.user_id = q.uid
                               AND uuid_send(c.template_id) = uuid_send(q.tpl)
                               AND c.status <> 'revoked'
                             LIMIT q.lim + 1) AS counted) AS h ON true
     WHERE h.n > q.lim;
    v_misfit := coalesce(v_misfit, '{}') || coalesce(v_over, '{}');

    UPDATE template_stock s SET counted = s.counted + p.n
      FROM (SELECT x.tpl, count(*) AS n FROM unnest(p_templates) AS x(tpl)
             WHERE x.tpl <> ALL (v_misfit) GROUP BY x.tpl) AS p
     WHERE s.template_id = p.tpl;
    RETURN QUERY
        SELECT x.i, 'stored'::text, NULL::uuid, NULL::text
          FROM unnest(p_templates) WITH ORDINALITY AS x(tpl, i)
         WHERE x.tpl <> ALL (v_misfit);

    IF cardinality(v_misfit) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM user_coupon c USING unnest(p_templates, p_ids) AS x(tpl, id)
     WHERE c.id = x.id AND x.tpl = ANY (v_misfit);
    FOREACH v_t IN ARRAY (SELECT array_agg(DISTINCT m ORDER BY m) FROM unnest(v_misfit) AS m) LOOP
        RETURN QUERY
        WITH part AS (
            SELECT array_agg(x.i ORDER BY x.i) AS ords, max(x.lim) AS lim,
                   array_agg(x.id ORDER BY x.i) AS ids, array_agg(x.uid ORDER BY x.i) AS uids,
                   array_agg(x.rid ORDER BY x.i) AS rids,
                   array_agg(x.epoch ORDER BY x.i) AS epochs,
                   array_agg(x.at ORDER BY x.i) AS ats,
                   array_agg(x.vfrom ORDER BY x.i) AS vfroms,
                   array_agg(x.vuntil ORDER BY x.i) AS vuntils
              FROM unnest(p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at,
                          p_from, p_until)
                   WITH ORDINALITY AS x(tpl, lim, id, uid, rid, epoch, at, vfrom, vuntil, i)
             WHERE x.tpl = v_t
        )
        SELECT part.ords[d.n::int], d.verdict, d.coupon_id, d.owner
          FROM part
          CROSS JOIN LATERAL coupon_decide_claims_locked(
                   v_t, true, part.lim, part.ids, part.uids, part.rids, part.epochs,
                   part.ats, part.vfroms, part.vuntils)
               WITH ORDINALITY AS d(verdict, coupon_id, owner, n);
    END LOOP;
END
$$;
