"""What DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) decide, apart from the
wire: Kafka's checks, errors and messages (its ScramControlManager and ScramImage), on the
credentials a broker knows (credentials.py: the metadata store's over the static file's).

Alter: a user may appear once per request (a second deletion or upsertion of the same user, any
mechanism, makes that user's answer DUPLICATE_RESOURCE and drops its changes); an empty name or a
mechanism other than SCRAM-SHA-256/512 is refused; iterations must be 4096..16384 (and, Flotilla's own limit, the salt at least 12 bytes:
see MIN_SALT_BYTES); deleting a
credential not stored answers RESOURCE_NOT_FOUND. The accepted changes are written at once. The
client sends the salted password (Hi(password, salt, i)); only StoredKey and ServerKey are kept.
Answers list deletions, then upsertions, then refusals, one per user.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.security.credentials import SCRAM_MECHANISMS, ScramCredential, ScramCredentials, from_salted_password

MECHANISM_OF_TYPE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism type bytes
TYPE_OF_MECHANISM = {m: t for t, m in MECHANISM_OF_TYPE.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
# scramp refuses to authenticate with a shorter salt (RFC 5802 sets no minimum; Kafka's clients
# send 32 or more random bytes), so such a credential is refused here rather than stored unusable.
MIN_SALT_BYTES = 12
assert set(TYPE_OF_MECHANISM) == set(SCRAM_MECHANISMS)

DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
DESCRIBE_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
ALTER_DUPLICATE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"


@dataclass(frozen=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations), Describe only


def effective(credentials: ScramCredentials, stored) -> dict[tuple[str, str], ScramCredential]:
    """Every credential the broker authenticates with, by (user, mechanism): the static file's
    under the metadata store's."""
    out = {(user, mechanism): c for (mechanism, user), c in credentials.static.items()}
    out.update(stored.credentials)
    return out


def describe(known: dict[tuple[str, str], ScramCredential], users: list[str] | None) -> list[UserResult]:
    """ScramImage.describe: every user with a credential when `users` is null or empty."""
    if not users:
        wanted = {user: False for user, _ in sorted(known)}
    else:
        wanted: dict[str, bool] = {}
        for user in users:
            wanted[user] = user in wanted  # True: named twice
    out = []
    for user, duplicate in wanted.items():
        if duplicate:
            out.append(UserResult(user, ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE + user))
            continue
        infos = tuple((TYPE_OF_MECHANISM[m], known[(user, m)].iterations)
                      for m in sorted(TYPE_OF_MECHANISM, key=TYPE_OF_MECHANISM.get) if (user, m) in known)
        out.append(UserResult(user, credentials=infos) if infos else
                   UserResult(user, ErrorCode.resource_not_found, DESCRIBE_MISSING + user))
    return out


def _check_name_and_mechanism(name: str, mechanism_type: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism_type not in MECHANISM_OF_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def plan_alter(stored: dict[tuple[str, str], ScramCredential], deletions, upsertions
               ) -> tuple[dict[tuple[str, str], ScramCredential | None], list[UserResult]]:
    """(changes to write: (user, mechanism) -> credential or None to delete, one result per user).
    `deletions` have .name/.mechanism, `upsertions` also .iterations/.salt/.salted_password."""
    deletes: dict[str, tuple[str, str]] = {}
    upserts: dict[str, tuple[tuple[str, str], ScramCredential]] = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for d in deletions:
        if d.name in errors:
            continue
        if deletes.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.duplicate_resource, ALTER_DUPLICATE)
            continue
        problem = _check_name_and_mechanism(d.name, int(d.mechanism))
        key = None if problem else (d.name, MECHANISM_OF_TYPE[int(d.mechanism)])
        if problem is None and key not in stored:
            problem = ErrorCode.resource_not_found, DELETE_MISSING
        if problem is not None:
            errors[d.name] = problem
        else:
            deletes[d.name] = key
    for u in upsertions:
        if u.name in errors:
            continue
        if deletes.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.duplicate_resource, ALTER_DUPLICATE)
            continue
        problem = _check_name_and_mechanism(u.name, int(u.mechanism))
        if problem is None and u.iterations < MIN_ITERATIONS:
            problem = ErrorCode.unacceptable_credential, "Too few iterations"
        elif problem is None and u.iterations > MAX_ITERATIONS:
            problem = ErrorCode.unacceptable_credential, "Too many iterations"
        elif problem is None and not u.salted_password:
            problem = ErrorCode.unacceptable_credential, "The salted password must not be empty"
        elif problem is None and len(u.salt) < MIN_SALT_BYTES:
            problem = ErrorCode.unacceptable_credential, f"The salt must be at least {MIN_SALT_BYTES} bytes long"
        if problem is not None:
            errors[u.name] = problem
            continue
        mechanism = MECHANISM_OF_TYPE[int(u.mechanism)]
        upserts[u.name] = ((u.name, mechanism),
                           from_salted_password(mechanism, bytes(u.salted_password), bytes(u.salt), int(u.iterations)))
    changes: dict[tuple[str, str], ScramCredential | None] = {key: None for key in deletes.values()}
    changes.update(dict(upserts.values()))
    results = [UserResult(user) for user in deletes] + [UserResult(user) for user in upserts]
    results += [UserResult(user, code, message) for user, (code, message) in errors.items()]
    return changes, results
