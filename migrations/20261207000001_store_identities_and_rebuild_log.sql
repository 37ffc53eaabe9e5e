-- Both stores have an identity (docs/ARCHITECTURE.md, "Store identities"): Redis state is
-- built against a pair of them, Redis's `run_id` and Postgres's system identifier and
-- timeline. A Postgres failover to a standby that lacked the last commits, or a restore,
-- gives Postgres a new timeline; the engine then rebuilds the live templates from what this
-- Postgres holds. Rows recorded before this column existed read as "unknown" and are
-- completed by the next check without a rebuild.
ALTER TABLE redis_identity ADD COLUMN postgres_identity text;

-- Every rebuild of a template's Redis state, with why it was made and against which pair of
-- identities: N servers that notice one change must rebuild each template once, and the
-- harness counts these rows to prove it (a rebuild per check would show here).
CREATE TABLE template_rebuild (
    template_id       uuid        NOT NULL,
    epoch             bigint      NOT NULL,
    trigger           text        NOT NULL,
    redis_identity    text,
    postgres_identity text,
    rebuilt_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (template_id, epoch)
);
