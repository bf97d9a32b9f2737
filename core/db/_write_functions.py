"""Schema version 4: workers write only through functions that run as the schema's owner.

Before it, a worker needed ``INSERT`` and ``UPDATE`` on the tables themselves, and with
them it could break the whole fleet or re-enable a used approval: one stray
``audit_log`` row at ``seq = count`` made every later append fail, a changed
``audit_head`` did the same, a row in ``schema_version`` made every worker refuse the
schema, and a renamed ``consumed_approvals`` row let an approval be used again.

From this version on, each write a worker makes is one ``SECURITY DEFINER`` function,
owned by the role that migrates (the tables' owner) and run with a fixed ``search_path``
(``pg_catalog, pg_temp``; every table is named with its schema), so that nothing the
caller creates or sets can change what it does:

* ``append_records(...)`` — lock the head, chain, insert, move the head (version 3's
  function, now run as the owner);
* ``flush_appends()`` — touch the calling server process's ``audit_flush`` row, in a
  transaction of its own that commits synchronously;
* ``consume_approval(approval, digest)`` — insert the approval id; ``true`` for the one
  caller that inserted it, ``false`` for every other;
* ``prune_consumed_approvals(older_than)`` — forget approvals consumed longer ago, and
  refuse any ``older_than`` shorter than the six minutes in which an approval may still
  be fresh somewhere (``MINIMUM_RETENTION``: the freshness window plus twice the clock
  skew).

``EXECUTE`` on them is revoked from ``PUBLIC``. So that an existing fleet keeps working,
a role that could write a table before gets ``EXECUTE`` on the function that now does
that write (``INSERT`` on ``audit_log``: the two audit functions; ``INSERT`` on
``consumed_approvals``: ``consume_approval``; ``DELETE`` on it: the pruning function).
Then every privilege but ``SELECT`` that a role other than the owner holds on a table of
the schema — on the table or on any of its columns — is revoked, with whatever a grantee
passed on (``CASCADE``), each step reported as a notice; should one remain all the same,
the migration fails and names it.
"""

from __future__ import annotations

__all__ = ["WRITE_FUNCTIONS"]

# {s} is the quoted schema; the SQL holds no other braces and no % placeholders for the
# driver (format() patterns are the server's).
WRITE_FUNCTIONS = """
ALTER FUNCTION {s}.append_records(
    bytea[], bytea[], text[], text[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], text[], text[], text[], boolean[]
) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION {s}.flush_appends() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO {s}.audit_flush AS mark (backend_pid, flushes)
        VALUES (pg_catalog.pg_backend_pid(), 1)
        ON CONFLICT (backend_pid) DO UPDATE SET flushes = mark.flushes + 1
$$;

CREATE FUNCTION {s}.consume_approval(approval text, digest text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH used AS (
        INSERT INTO {s}.consumed_approvals (approval_id, action_digest)
            VALUES ($1, $2)
            ON CONFLICT (approval_id) DO NOTHING
            RETURNING 1
    )
    SELECT pg_catalog.count(*) = 1 FROM used
$$;

CREATE FUNCTION {s}.prune_consumed_approvals(older_than interval) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    forgotten bigint;
BEGIN
    IF older_than IS NULL OR older_than < interval '360 seconds' THEN
        RAISE EXCEPTION 'pruning approvals consumed more than % ago would forget approvals '
            'that may still be fresh', older_than
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'keep them at least 6 minutes (the freshness window plus twice '
                         'the clock skew)';
    END IF;
    DELETE FROM {s}.consumed_approvals WHERE consumed_at < pg_catalog.now() - older_than;
    GET DIAGNOSTICS forgotten = ROW_COUNT;
    RETURN forgotten;
END
$$;

REVOKE ALL ON FUNCTION
    {s}.append_records, {s}.flush_appends, {s}.consume_approval,
    {s}.prune_consumed_approvals
FROM PUBLIC;

DO $$
DECLARE
    held record;
    functions text;
BEGIN
    FOR held IN
        WITH grants AS (
            SELECT c.relname, a.privilege_type, a.grantee
            FROM pg_catalog.pg_class AS c,
                LATERAL pg_catalog.aclexplode(c.relacl) AS a
            WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            UNION
            SELECT c.relname, a.privilege_type, a.grantee
            FROM pg_catalog.pg_class AS c
                JOIN pg_catalog.pg_attribute AS t ON t.attrelid = c.oid,
                LATERAL pg_catalog.aclexplode(t.attacl) AS a
            WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
        )
        SELECT DISTINCT relname, privilege_type,
            CASE WHEN grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(grantee)) END AS role
        FROM grants
        WHERE privilege_type <> 'SELECT'
        ORDER BY role, relname, privilege_type
    LOOP
        functions := CASE
            WHEN held.relname = 'audit_log' AND held.privilege_type = 'INSERT'
                THEN '{s}.append_records, {s}.flush_appends'
            WHEN held.relname = 'consumed_approvals' AND held.privilege_type = 'INSERT'
                THEN '{s}.consume_approval'
            WHEN held.relname = 'consumed_approvals' AND held.privilege_type = 'DELETE'
                THEN '{s}.prune_consumed_approvals'
        END;
        IF functions IS NOT NULL THEN
            EXECUTE pg_catalog.format(
                'GRANT EXECUTE ON FUNCTION %s TO %s', functions, held.role
            );
            RAISE NOTICE 'granted EXECUTE on % to % (it held % on %)',
                functions, held.role, held.privilege_type, held.relname;
        END IF;
        EXECUTE pg_catalog.format(
            'REVOKE %s ON {s}.%I FROM %s CASCADE',
            held.privilege_type, held.relname, held.role
        );
        RAISE NOTICE 'revoked % on %.% from %',
            held.privilege_type, '{s}', held.relname, held.role;
    END LOOP;
    FOR held IN
        SELECT c.relname, a.privilege_type, a.grantee
        FROM pg_catalog.pg_class AS c,
            LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            AND a.privilege_type <> 'SELECT'
        UNION
        SELECT c.relname, a.privilege_type, a.grantee
        FROM pg_catalog.pg_class AS c
            JOIN pg_catalog.pg_attribute AS t ON t.attrelid = c.oid,
            LATERAL pg_catalog.aclexplode(t.attacl) AS a
        WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            AND a.privilege_type <> 'SELECT'
    LOOP
        RAISE EXCEPTION 'role % still holds % on %.% after the migration revoked it: '
            'have its grantor revoke it, then migrate again',
            CASE WHEN held.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.pg_get_userbyid(held.grantee)::text END,
            held.privilege_type, '{s}', held.relname
            USING ERRCODE = 'insufficient_privilege';
    END LOOP;
END
$$;
"""
