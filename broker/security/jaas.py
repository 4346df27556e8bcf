"""Kafka's `sasl.jaas.config` values: `<LoginModule class> <flag> key="value" ...;`.

A broker reads its static PLAIN users from
`listener.name.<listener>.plain.sasl.jaas.config`, whose PlainLoginModule entries
`user_<name>="<password>"` list them (Kafka's PlainServerCallbackHandler). Only parsing here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_HEAD = re.compile(r"\s*([A-Za-z_$][\w$.]*)\s+(\w+)")
_OPTION = re.compile(r'\s*([^\s=;]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s";]+))')


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """user_<name>="<password>" options: name -> password."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse(text: str) -> JaasEntry:
    """One login module entry ending in ';' (Kafka allows exactly one per sasl.jaas.config)."""
    m = _HEAD.match(text)
    if m is None:
        raise ValueError("expected '<LoginModule class> required key=\"value\" ... ;'")
    module, flag = m.group(1), m.group(2).lower()
    if flag not in _FLAGS:
        raise ValueError(f"login module control flag {m.group(2)!r} is not one of {', '.join(_FLAGS)}")
    pos, options = m.end(), {}
    while True:
        rest = text[pos:].lstrip()
        if rest.startswith(";"):
            if rest[1:].strip():
                raise ValueError("exactly one login module is allowed in sasl.jaas.config")
            return JaasEntry(module, flag, options)
        o = _OPTION.match(text, pos)
        if o is None:
            raise ValueError(f"cannot parse options at {rest[:40]!r} (expected key=\"value\" ... ;)")
        value = o.group(2) if o.group(2) is not None else o.group(3)
        options[o.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = o.end()
