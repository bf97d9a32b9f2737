"""Schema version 5: the approval inbox, written only through functions with their own rules.

Two tables hold it: ``approval_requests`` (one row per request an agent filed: the
request as JSON, with the quorums of the policy's verdict, who must approve and how
many; who asked; when it was filed and expires; its stored state; ``filed_by``, the
database user that filed it) and ``approval_decisions`` (one row per reviewer and
request: approve or deny, the reason, the time, for an approval the signed record, and
``decided_by``, the database user that recorded it). ``expired`` is never stored: a
``pending`` row at or past ``expires_at`` reads as expired.

As with version 4, nobody but the owner writes the tables; each write is one
``SECURITY DEFINER`` function with a fixed ``search_path``, and so is the read:

* ``read_approval_requests(first, past, states, limit)`` — the requests whose id lies in
  ``[first, past)`` and whose state as read is in ``states``, newest first, each with its
  decisions and the database's clock. A database user reads the requests it filed
  itself, and every request only when it may ``SELECT`` ``approval_requests`` (reviewers,
  the owner): workers get no ``SELECT`` on the inbox's tables, so one agent does not
  read another's judged arguments;
* ``file_approval_request(...)`` — an agent files a request, timestamped by the
  database's clock (expiry from a few milliseconds to seven days), and gets it back as
  the read function answers it. The id is the client's: filing the same request under
  the same id again (a retry after a lost answer) inserts nothing and answers the stored
  request; the same id with another request, requester, lifetime or database user is
  refused (``unique_violation``). The requester's actor, the one that may not approve, is
  read from the request's own context; a request whose context, requester, digest or
  tool disagree, or whose ``quorums`` are not 1 to 16 valid quorums (a count from 1 to
  100; a group of distinct approver ids at least that many, or no group and no
  approvers), is refused (and a CHECK keeps the table's columns equal to the stored
  request's);
* ``cancel_approval_request(id)`` — an agent that stopped waiting withdraws a pending
  request it filed: ``cancelled``, ``unchanged`` (no longer pending), or ``unknown`` (no
  such request, or one another database user filed);
* ``decide_approval_request(id, reviewer, approve, reason, record)`` — a reviewer's
  decision. It locks the request's row (``FOR UPDATE``), so two reviewers deciding at once
  are judged one after the other, and enforces the inbox's rules itself, whoever calls
  it: nothing is decided once the request is closed or expired; the requester's actor
  never approves its own request; an approver is in a group the request's quorums name
  (any reviewer for a quorum that names none); a reviewer decides once; an approval's
  record names exactly the request's digest and is signed in the reviewer's name; a
  denial gives a reason. It answers ``recorded`` or the code of the broken rule
  (``unknown``, ``closed``, ``self``, ``outsider``, ``twice``, ``digest``, ``approver``,
  ``malformed``), recording nothing then. A denial makes the request ``denied``;
  approvals by distinct reviewers that meet every quorum make it ``approved``. The
  quorums are read from the stored request, never from the caller. The reviewer named is
  the caller's word; the database user that called is kept as ``decided_by``;
* ``prune_approval_requests(older_than)`` — delete the requests that can no longer
  change (approved, denied, cancelled, or pending past expiry) filed more than
  ``older_than`` ago, with their decisions; answers how many.

The database cannot check an Ed25519 signature; the PEP that uses an approval does. So a
role that may decide can at worst record a forged approval that no PEP accepts, or deny,
and either is attributable to its login. ``EXECUTE`` on every function is revoked from
``PUBLIC``; then every privilege a role other than the owner holds on the new tables or
functions — which only default privileges (``ALTER DEFAULT PRIVILEGES ... GRANT ... TO``
a role) can have given, and which ``REVOKE ... FROM PUBLIC`` leaves — is revoked, each a
notice; should one remain all the same, the migration fails and names it. Workers,
reviewers and the pruning job get their grants after migrating (docs/deployment.md).
"""

from __future__ import annotations

__all__ = ["INBOX_FUNCTIONS"]

# {s} is the quoted schema; no other braces, and no % placeholders for the driver.
INBOX_FUNCTIONS = """
CREATE TABLE {s}.approval_requests (
    request_id    text PRIMARY KEY CHECK (request_id ~ '^[0-9a-f]{{32}}$'),
    action_digest text NOT NULL,
    tool          text NOT NULL,
    request       jsonb NOT NULL,
    requester     jsonb NOT NULL,
    actor_id      text NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    state         text NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'cancelled')),
    decided_at    timestamptz,
    filed_by      text NOT NULL,
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '7 days'),
    CONSTRAINT approval_requests_document_agrees CHECK (
        request ->> 'action_digest' IS NOT DISTINCT FROM action_digest
        AND request ->> 'tool' IS NOT DISTINCT FROM tool
        AND request -> 'context' ->> 'actor_id' IS NOT DISTINCT FROM actor_id
        AND requester ->> 'actor_id' IS NOT DISTINCT FROM actor_id
        AND jsonb_typeof(request -> 'quorums') IS NOT DISTINCT FROM 'array'
    )
);
CREATE INDEX approval_requests_created_at ON {s}.approval_requests (created_at);
CREATE TABLE {s}.approval_decisions (
    request_id text NOT NULL REFERENCES {s}.approval_requests (request_id),
    reviewer   text NOT NULL,
    approve    boolean NOT NULL,
    reason     text NOT NULL,
    decided_at timestamptz NOT NULL,
    record     jsonb,
    decided_by text NOT NULL,
    PRIMARY KEY (request_id, reviewer)
);

-- what every reader gets: the request, its decisions oldest first, and the database's
-- clock; a role reads the requests its own login filed, or every request when it may
-- SELECT the table (reviewers, the owner)
CREATE FUNCTION {s}.read_approval_requests(
    first_id text, past_id text, wanted text[], most integer
) RETURNS TABLE (
    request_id text, action_digest text, tool text, request jsonb, requester jsonb,
    created_at timestamptz, expires_at timestamptz, state text, decided_at timestamptz,
    decisions json, read_at timestamptz
)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT r.request_id, r.action_digest, r.tool, r.request, r.requester,
        r.created_at, r.expires_at, r.state, r.decided_at,
        coalesce((
            SELECT pg_catalog.json_agg(pg_catalog.json_build_object(
                'reviewer', d.reviewer, 'approve', d.approve, 'reason', d.reason,
                'decided_at', d.decided_at, 'record', d.record)
                ORDER BY d.decided_at, d.reviewer)
            FROM {s}.approval_decisions AS d WHERE d.request_id = r.request_id
        ), '[]'::json),
        pg_catalog.now()
    FROM {s}.approval_requests AS r
    WHERE r.request_id >= $1 AND r.request_id < $2
        AND (CASE WHEN r.state = 'pending' AND pg_catalog.now() >= r.expires_at
            THEN 'expired' ELSE r.state END) = ANY ($3)
        AND (r.filed_by = SESSION_USER OR pg_catalog.has_table_privilege(
            SESSION_USER, '{s}.approval_requests', 'SELECT'))
    ORDER BY r.created_at DESC, r.request_id
    LIMIT $4
$$;

CREATE FUNCTION {s}.file_approval_request(
    new_id text, digest text, tool_name text, document jsonb, asker jsonb, lifetime interval
) RETURNS TABLE (
    request_id text, action_digest text, tool text, request jsonb, requester jsonb,
    created_at timestamptz, expires_at timestamptz, state text, decided_at timestamptz,
    decisions json, read_at timestamptz
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    stored {s}.approval_requests%ROWTYPE;
    actor text := document -> 'context' ->> 'actor_id';
    quorums jsonb := document -> 'quorums';
    quorum jsonb;
    member jsonb;
    members text[];
    bad boolean := false;
BEGIN
    IF actor IS NULL OR (asker ->> 'actor_id') IS DISTINCT FROM actor
            OR (document ->> 'action_digest') IS DISTINCT FROM digest
            OR (document ->> 'tool') IS DISTINCT FROM tool_name THEN
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            MESSAGE = 'the approval request does not agree with what is filed with it: '
                || 'its context names the actor that asks, and the requester, the digest '
                || 'and the tool must be its own',
            HINT = 'file the ApprovalRequest the guard built through ApprovalInbox.file';
    END IF;
    -- who must approve is the request's own (the policy's verdict): checked here once,
    -- so that every decision can read it from the stored request
    IF jsonb_typeof(quorums) IS DISTINCT FROM 'array'
            OR jsonb_array_length(quorums) NOT BETWEEN 1 AND 16 THEN
        bad := true;
    ELSE
        FOR quorum IN SELECT value FROM jsonb_array_elements(quorums) LOOP
            IF jsonb_typeof(quorum) IS DISTINCT FROM 'object'
                    OR (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(quorum) AS k)
                        IS DISTINCT FROM ARRAY['approvers', 'count', 'group']
                    OR jsonb_typeof(quorum -> 'count') IS DISTINCT FROM 'number'
                    OR (quorum ->> 'count') !~ '^(100|[1-9][0-9]?)$' THEN
                bad := true;
            ELSIF jsonb_typeof(quorum -> 'approvers') = 'null' THEN
                bad := bad OR jsonb_typeof(quorum -> 'group') IS DISTINCT FROM 'null';
            ELSIF jsonb_typeof(quorum -> 'approvers') = 'array'
                    AND jsonb_typeof(quorum -> 'group') = 'string'
                    AND (quorum ->> 'group') ~ '^[A-Za-z0-9][A-Za-z0-9._:@+-]{{0,127}}$' THEN
                members := ARRAY[]::text[];
                FOR member IN SELECT value FROM jsonb_array_elements(quorum -> 'approvers') LOOP
                    IF jsonb_typeof(member) IS DISTINCT FROM 'string'
                            OR (member #>> '{{}}') !~ '^[A-Za-z0-9][A-Za-z0-9._:@+-]{{0,127}}$'
                            OR (member #>> '{{}}') = ANY (members) THEN
                        bad := true;
                    ELSE
                        members := members || (member #>> '{{}}');
                    END IF;
                END LOOP;
                bad := bad OR cardinality(members) < (quorum ->> 'count')::integer;
            ELSE
                bad := true;
            END IF;
        END LOOP;
    END IF;
    IF bad THEN
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            MESSAGE = 'the approval request does not say who may approve it: its quorums '
                || 'must be 1 to 16 objects of count (1 to 100), group and approvers (a '
                || 'group of at least count distinct approver ids, or neither)',
            HINT = 'file the ApprovalRequest the guard built through ApprovalInbox.file';
    END IF;
    -- the client chose the id: filing it again (a retry after a lost answer) finds the
    -- row it filed and answers it; a different request under that id is refused
    INSERT INTO {s}.approval_requests (
        request_id, action_digest, tool, request, requester, actor_id,
        created_at, expires_at, state, filed_by
    ) VALUES (
        new_id, digest, tool_name, document, asker, actor,
        now(), now() + lifetime, 'pending', SESSION_USER
    ) ON CONFLICT ON CONSTRAINT approval_requests_pkey DO NOTHING;
    SELECT * INTO stored FROM {s}.approval_requests AS r WHERE r.request_id = new_id;
    IF stored.filed_by IS DISTINCT FROM SESSION_USER
            OR stored.action_digest IS DISTINCT FROM digest
            OR stored.tool IS DISTINCT FROM tool_name
            OR stored.request IS DISTINCT FROM document
            OR stored.requester IS DISTINCT FROM asker
            OR stored.expires_at IS DISTINCT FROM stored.created_at + lifetime THEN
        RAISE EXCEPTION USING
            ERRCODE = 'unique_violation',
            MESSAGE = 'another approval request is already filed under the id ' || new_id,
            HINT = 'file the request under a new random id (ApprovalInbox.file picks one)';
    END IF;
    RETURN QUERY SELECT * FROM {s}.read_approval_requests(
        new_id, new_id || 'g', ARRAY['pending', 'approved', 'denied', 'cancelled', 'expired'], 1
    );
END
$$;

CREATE FUNCTION {s}.cancel_approval_request(wanted text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- only the login that filed a request withdraws it; to every other one it is unknown
    PERFORM 1 FROM {s}.approval_requests AS r
        WHERE r.request_id = wanted AND r.filed_by = SESSION_USER FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    UPDATE {s}.approval_requests
        SET state = 'cancelled', decided_at = pg_catalog.now()
        WHERE request_id = wanted AND state = 'pending' AND expires_at > pg_catalog.now();
    RETURN CASE WHEN FOUND THEN 'cancelled' ELSE 'unchanged' END;
END
$$;

CREATE FUNCTION {s}.decide_approval_request(
    wanted text, who text, approving boolean, why text, signed jsonb
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    found_request {s}.approval_requests%ROWTYPE;
BEGIN
    SELECT * INTO found_request FROM {s}.approval_requests AS r
        WHERE r.request_id = wanted FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    IF found_request.state <> 'pending' OR pg_catalog.now() >= found_request.expires_at THEN
        RETURN 'closed';
    END IF;
    IF approving AND who = found_request.actor_id THEN
        RETURN 'self';
    END IF;
    IF approving AND NOT EXISTS (
        SELECT 1 FROM pg_catalog.jsonb_array_elements(found_request.request -> 'quorums') AS q
        WHERE pg_catalog.jsonb_typeof(q.value -> 'approvers') = 'null'
            OR (q.value -> 'approvers') ? who
    ) THEN
        RETURN 'outsider';
    END IF;
    IF EXISTS (
        SELECT 1 FROM {s}.approval_decisions AS d
        WHERE d.request_id = wanted AND d.reviewer = who
    ) THEN
        RETURN 'twice';
    END IF;
    IF approving AND (signed IS NULL
            OR (signed ->> 'action_digest') IS DISTINCT FROM found_request.action_digest) THEN
        RETURN 'digest';
    END IF;
    IF approving AND (signed ->> 'approver_id') IS DISTINCT FROM who THEN
        RETURN 'approver';
    END IF;
    IF approving IS NULL OR who IS NULL OR why IS NULL
            OR (NOT approving AND (signed IS NOT NULL OR pg_catalog.btrim(why) = '')) THEN
        RETURN 'malformed';
    END IF;
    -- who decided is the reviewer named; which database login recorded it is kept beside
    INSERT INTO {s}.approval_decisions (
        request_id, reviewer, approve, reason, decided_at, record, decided_by
    ) VALUES (wanted, who, approving, why, pg_catalog.now(), signed, SESSION_USER);
    IF NOT approving THEN
        UPDATE {s}.approval_requests SET state = 'denied', decided_at = pg_catalog.now()
            WHERE request_id = wanted;
    ELSIF NOT EXISTS (
        -- a quorum not yet met: fewer of its approvers (distinct: one row per reviewer)
        -- approved than it needs
        SELECT 1 FROM pg_catalog.jsonb_array_elements(found_request.request -> 'quorums') AS q
        WHERE (
            SELECT pg_catalog.count(*) FROM {s}.approval_decisions AS d
            WHERE d.request_id = wanted AND d.approve
                AND (pg_catalog.jsonb_typeof(q.value -> 'approvers') = 'null'
                    OR (q.value -> 'approvers') ? d.reviewer)
        ) < (q.value ->> 'count')::integer
    ) THEN
        UPDATE {s}.approval_requests SET state = 'approved', decided_at = pg_catalog.now()
            WHERE request_id = wanted;
    END IF;
    RETURN 'recorded';
END
$$;

CREATE FUNCTION {s}.prune_approval_requests(older_than interval) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    forgotten bigint;
BEGIN
    IF older_than IS NULL OR older_than < interval '0 seconds' THEN
        RAISE EXCEPTION 'cannot prune approval requests filed more than % ago', older_than
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give how old a request must be to go, zero or more';
    END IF;
    -- only requests that can no longer change: decided, cancelled, or pending past expiry
    WITH gone AS (
        DELETE FROM {s}.approval_requests AS r
        WHERE r.created_at < pg_catalog.now() - older_than
            AND (r.state <> 'pending' OR r.expires_at <= pg_catalog.now())
        RETURNING r.request_id
    ), decisions AS (
        DELETE FROM {s}.approval_decisions AS d USING gone WHERE d.request_id = gone.request_id
    )
    SELECT pg_catalog.count(*) INTO forgotten FROM gone;
    RETURN forgotten;
END
$$;

REVOKE ALL ON FUNCTION
    {s}.read_approval_requests, {s}.file_approval_request, {s}.cancel_approval_request,
    {s}.decide_approval_request, {s}.prune_approval_requests
FROM PUBLIC;

-- The tables and functions above are new: whatever a role other than the owner holds on
-- them now came from default privileges (ALTER DEFAULT PRIVILEGES ... GRANT ... TO a
-- role), which REVOKE ... FROM PUBLIC leaves in place. Take it all back; the grants each
-- role needs are given after migrating (docs/deployment.md). Should anything remain, fail.
DO $$
DECLARE
    held record;
BEGIN
    FOR held IN
        SELECT DISTINCT c.relname AS name, a.privilege_type,
            CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS role
        FROM pg_catalog.pg_class AS c,
            LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            AND c.relname IN ('approval_requests', 'approval_decisions')
        ORDER BY role, name, a.privilege_type
    LOOP
        EXECUTE pg_catalog.format(
            'REVOKE %s ON {s}.%I FROM %s CASCADE', held.privilege_type, held.name, held.role
        );
        RAISE NOTICE 'revoked % on %.% from %', held.privilege_type, '{s}', held.name, held.role;
    END LOOP;
    FOR held IN
        SELECT DISTINCT p.proname AS name,
            CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS role
        FROM pg_catalog.pg_proc AS p,
            LATERAL pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.pronamespace = '{s}'::regnamespace AND a.grantee <> p.proowner
            AND p.proname IN ('read_approval_requests', 'file_approval_request',
                'cancel_approval_request', 'decide_approval_request',
                'prune_approval_requests')
        ORDER BY role, name
    LOOP
        EXECUTE pg_catalog.format(
            'REVOKE ALL ON FUNCTION {s}.%I FROM %s CASCADE', held.name, held.role
        );
        RAISE NOTICE 'revoked EXECUTE on %.% from % (a default privilege granted it)',
            '{s}', held.name, held.role;
    END LOOP;
    FOR held IN
        SELECT c.relname AS name, a.privilege_type, a.grantee
        FROM pg_catalog.pg_class AS c,
            LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            AND c.relname IN ('approval_requests', 'approval_decisions')
        UNION
        SELECT c.relname, a.privilege_type, a.grantee
        FROM pg_catalog.pg_class AS c
            JOIN pg_catalog.pg_attribute AS t ON t.attrelid = c.oid,
            LATERAL pg_catalog.aclexplode(t.attacl) AS a
        WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            AND c.relname IN ('approval_requests', 'approval_decisions')
        UNION
        SELECT p.proname, a.privilege_type, a.grantee
        FROM pg_catalog.pg_proc AS p,
            LATERAL pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.pronamespace = '{s}'::regnamespace AND a.grantee <> p.proowner
            AND p.proname IN ('read_approval_requests', 'file_approval_request',
                'cancel_approval_request', 'decide_approval_request',
                'prune_approval_requests')
    LOOP
        RAISE EXCEPTION 'role % still holds % on %.% after the migration revoked it: '
            'have its grantor revoke it, then migrate again',
            CASE WHEN held.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.pg_get_userbyid(held.grantee)::text END,
            held.privilege_type, '{s}', held.name
            USING ERRCODE = 'insufficient_privilege';
    END LOOP;
END
$$;
"""
