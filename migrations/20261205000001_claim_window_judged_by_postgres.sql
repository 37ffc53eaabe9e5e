-- One clock for the sale (docs/ARCHITECTURE.md, "One clock"): a sync claim batch is judged
-- against the template's claim window by Postgres's clock (now(), the batch's transaction
-- start), not by the server that admitted it. Before this, each server judged the window by
-- its own clock only, and a server whose clock ran 60 s fast granted a coupon 30 s before
-- the sale opened. A server's own check stays in front (it can only make it refuse sooner).
--
-- Outside the window nothing is inserted and no lock is taken: an intent whose request id is
-- already stored is answered from its row (a retry of a claim granted in time), any other
-- gets 'not_open' or 'closed'. The group commit calls this function; the async persister and
-- the reconciler call coupon_decide_claims directly, since they store claims that were
-- already admitted (async: already acknowledged) and must not refuse them late.

CREATE FUNCTION coupon_decide_claims_in_window(
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
AS $$
DECLARE
    v_starts timestamptz;
    v_ends   timestamptz;
    v_now    timestamptz := now();
BEGIN
    SELECT t.claim_starts_at, t.claim_ends_at INTO v_starts, v_ends
      FROM coupon_template t WHERE t.id = p_template;
    IF (v_starts IS NULL OR v_now >= v_starts) AND (v_ends IS NULL OR v_now < v_ends) THEN
        RETURN QUERY SELECT * FROM coupon_decide_claims(
            p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
            p_until);
        RETURN;
    END IF;
    RETURN QUERY
        SELECT CASE WHEN c.id IS NULL THEN
                        CASE WHEN v_starts IS NOT NULL AND v_now < v_starts
                             THEN 'not_open' ELSE 'closed' END
                    WHEN c.id = i.id THEN 'stored'
                    ELSE 'duplicate' END,
               CASE WHEN c.id IS NOT NULL AND c.id <> i.id THEN c.id END,
               CASE WHEN c.id IS NOT NULL AND c.id <> i.id THEN c.user_id END
          FROM unnest(p_ids, p_rids) WITH ORDINALITY AS i(id, rid, n)
          LEFT JOIN user_coupon c
                 ON c.template_id = p_template AND c.claim_request_id = i.rid
         ORDER BY i.n;
END
$$;
