"""Schema version 5: the approval inbox, written only through functions with their own rules.

Two tables hold it: ``approval_requests`` (one row per request an agent filed: the
request as JSON, with the quorums of the policy's verdict, who must approve and how
many; who asked; when it was filed and expires; its stored state) and
``approval_decisions`` (one row per reviewer and request: approve or deny, the reason,
the time, and for an approval the signed record). ``expired`` is
never stored: a ``pending`` row at or past ``expires_at`` reads as expired.

As with version 4, nobody but the owner writes the tables; each write is one
``SECURITY DEFINER`` function with a fixed ``search_path``:

* ``file_approval_request(...)`` — an agent files a request, timestamped by the
  database's clock (expiry from a few milliseconds to seven days). The requester's
  actor, the one that may not approve, is read from the request's own context; a
  request whose context, requester, digest or tool disagree, or whose ``quorums`` are
  not 1 to 16 valid quorums (a count from 1 to 100; a group of distinct approver ids at
  least that many, or no group and no approvers), is refused (and a CHECK keeps the
  table's columns equal to the stored request's);
* ``cancel_approval_request(id)`` — an agent that stopped waiting withdraws a pending
  request;
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
  quorums are read from the stored request, never from the caller.

The database cannot check an Ed25519 signature; the PEP that uses an approval does. So a
role that may decide can at worst record a forged approval that no PEP accepts, or deny.
Workers get ``EXECUTE`` on filing and cancelling, reviewers on deciding
(docs/deployment.md lists both roles' grants). Should a default privilege give any role
more than ``SELECT`` on the new tables, it is revoked here, each step a notice.
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
    PRIMARY KEY (request_id, reviewer)
);

CREATE FUNCTION {s}.file_approval_request(
    new_id text, digest text, tool_name text, document jsonb, asker jsonb, lifetime interval
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
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
    INSERT INTO {s}.approval_requests (
        request_id, action_digest, tool, request, requester, actor_id,
        created_at, expires_at, state
    ) VALUES (
        new_id, digest, tool_name, document, asker, actor,
        now(), now() + lifetime, 'pending'
    );
END
$$;

CREATE FUNCTION {s}.cancel_approval_request(wanted text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH cancelled AS (
        UPDATE {s}.approval_requests
            SET state = 'cancelled', decided_at = pg_catalog.now()
            WHERE request_id = $1 AND state = 'pending' AND expires_at > pg_catalog.now()
            RETURNING 1
    )
    SELECT pg_catalog.count(*) = 1 FROM cancelled
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
    INSERT INTO {s}.approval_decisions (request_id, reviewer, approve, reason, decided_at, record)
        VALUES (wanted, who, approving, why, pg_catalog.now(), signed);
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

REVOKE ALL ON FUNCTION
    {s}.file_approval_request, {s}.cancel_approval_request, {s}.decide_approval_request
FROM PUBLIC;

DO $$
DECLARE
    held record;
BEGIN
    FOR held IN
        SELECT DISTINCT c.relname, a.privilege_type,
            CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS role
        FROM pg_catalog.pg_class AS c,
            LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.relnamespace = '{s}'::regnamespace AND a.grantee <> c.relowner
            AND c.relname IN ('approval_requests', 'approval_decisions')
            AND a.privilege_type <> 'SELECT'
    LOOP
        EXECUTE pg_catalog.format(
            'REVOKE %s ON {s}.%I FROM %s CASCADE', held.privilege_type, held.relname, held.role
        );
        RAISE NOTICE 'revoked % on %.% from %', held.privilege_type, '{s}', held.relname, held.role;
    END LOOP;
END
$$;
"""
