-- The across-templates decision (migration 20261209000001) split a batch into its
-- templates in two places, by two copies of one 25-line query: when a request id is already
-- stored (each template decided by coupon_decide_claims) and for the templates that did not
-- fit (each decided by coupon_decide_claims_locked, its counter still held). Both now call
-- one function that does the split; the decision itself is unchanged.
CREATE FUNCTION coupon_decide_claims_each_template(
    p_parts uuid[], p_counters_held boolean, p_templates uuid[], p_limits bigint[],
    p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamptz[],
    p_from timestamptz[], p_until timestamptz[])
RETURNS TABLE(ord bigint, verdict text, coupon_id uuid, owner text)
LANGUAGE plpgsql
AS $$
DECLARE
    v_t       uuid;
    v_ords    bigint[];
    v_lim     bigint;
    v_ids     uuid[];
    v_uids    text[];
    v_rids    text[];
    v_epochs  bigint[];
    v_ats     timestamptz[];
    v_vfroms  timestamptz[];
    v_vuntils timestamptz[];
BEGIN
    -- In template id order, the order every batch takes counter rows in (no deadlock).
    FOREACH v_t IN ARRAY p_parts LOOP
        SELECT array_agg(x.i ORDER BY x.i), max(x.lim), array_agg(x.id ORDER BY x.i),
               array_agg(x.uid ORDER BY x.i), array_agg(x.rid ORDER BY x.i),
               array_agg(x.epoch ORDER BY x.i), array_agg(x.at ORDER BY x.i),
               array_agg(x.vfrom ORDER BY x.i), array_agg(x.vuntil ORDER BY x.i)
          INTO v_ords, v_lim, v_ids, v_uids, v_rids, v_epochs, v_ats, v_vfroms, v_vuntils
          FROM unnest(p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
                      p_until)
               WITH ORDINALITY AS x(tpl, lim, id, uid, rid, epoch, at, vfrom, vuntil, i)
         WHERE x.tpl = v_t;
        IF p_counters_held THEN
            RETURN QUERY SELECT v_ords[d.n::int], d.verdict, d.coupon_id, d.owner
              FROM coupon_decide_claims_locked(v_t, true, v_lim, v_ids, v_uids, v_rids,
                       v_epochs, v_ats, v_vfroms, v_vuntils)
                   WITH ORDINALITY AS d(verdict, coupon_id, owner, n);
        ELSE
            RETURN QUERY SELECT v_ords[d.n::int], d.verdict, d.coupon_id, d.owner
              FROM coupon_decide_claims(v_t, true, v_lim, v_ids, v_uids, v_rids, v_epochs,
                       v_ats, v_vfroms, v_vuntils)
                   WITH ORDINALITY AS d(verdict, coupon_id, owner, n);
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION coupon_decide_claims_across(
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
        RETURN QUERY SELECT * FROM coupon_decide_claims_each_template(
            v_parts, false, p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at,
            p_from, p_until);
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
    RETURN QUERY SELECT * FROM coupon_decide_claims_each_template(
        (SELECT array_agg(DISTINCT m ORDER BY m) FROM unnest(v_misfit) AS m), true,
        p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at, p_from, p_until);
END
$$;
