-- The sold-out gate (docs/ARCHITECTURE.md, "The sold-out gate"): a server answers a sold-out
-- template's refusals without Redis for as long as nothing can have been granted since it
-- read the granted request ids. At `counted = total_stock` no claim can be granted until a
-- coupon's place comes back (`counted` goes down) or the stock is raised; this count goes
-- up on each, whichever code path does it, so a server that sees it unchanged knows its set
-- is still the whole set (a return followed by a grant leaves `counted` where it was, and
-- this count does not).
ALTER TABLE template_stock ADD COLUMN stock_returns bigint NOT NULL DEFAULT 0;

CREATE FUNCTION template_stock_count_returns() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.stock_returns := OLD.stock_returns + 1;
    RETURN NEW;
END
$$;

-- The WHEN clause runs without calling the function, so a claim batch's UPDATE (which only
-- raises `counted`) pays nothing for it.
CREATE TRIGGER template_stock_returns
    BEFORE UPDATE ON template_stock
    FOR EACH ROW
    WHEN (NEW.counted < OLD.counted OR NEW.total_stock <> OLD.total_stock)
    EXECUTE FUNCTION template_stock_count_returns();
