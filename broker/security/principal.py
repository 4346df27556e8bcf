"""Who a connection is: Kafka's KafkaPrincipal, and the name a client certificate maps to.

A connection starts as User:ANONYMOUS (PLAINTEXT, or SSL without a client certificate). SASL makes
it User:<username>; on an SSL listener with a client certificate (mTLS) it is User:<subject>, the
certificate's distinguished name in RFC 2253 form turned by `ssl.principal.mapping.rules`, as
Kafka's DefaultKafkaPrincipalBuilder and SslPrincipalMapper do. An authorizer compares principals as
"User:name" strings (ACLs name them that way), so `str(principal)` is that form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal("User", name)


def certificate_subject(der: bytes) -> str:
    """The subject of a DER certificate as a distinguished name string, most specific RDN first
    (what Java's X500Principal.getName() gives Kafka, e.g. "CN=alice,OU=eng,O=Example")."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        out = self.pattern.sub(self.replacement, dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


# One rule: DEFAULT, or RULE:pattern/replacement/ with an optional L or U after it; "/" inside
# pattern or replacement is written "\/". Rules are separated by commas (or newlines).
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """`ssl.principal.mapping.rules`: the first rule whose pattern matches the whole DN gives the
    name; DEFAULT gives the DN itself. No rule matching refuses the connection (Kafka: an
    IllegalArgumentException during authentication)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text = rules.strip().replace("\n", ",") or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"invalid rule at {text[pos:]!r}: expected DEFAULT or RULE:pattern/replacement/[LU]")
            if m.group(1):
                self.rules.append(_Rule(None))
            else:
                pattern = m.group(2).replace("\\/", "/")
                # Java's replacement syntax ($1) to Python's (\g<1>)
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3).replace("\\/", "/"))
                self.rules.append(_Rule(re.compile(pattern), replacement, m.group(4)))
            pos = m.end()

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise ValueError(f"no rule in ssl.principal.mapping.rules matches the certificate subject {dn!r}")
