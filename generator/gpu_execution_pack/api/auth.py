"""Bearer-token keys, each scoped to a tenant (or ``*`` for all), compared in constant time."""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from gpu_execution_pack.config import ConfigError

ENV_KEYS = "GPU_PACK_API_KEYS"
ALL_TENANTS = "*"
INSECURE_FLAG = "--insecure-no-auth"


def no_keys_message(keys_file: str) -> str:
    """Why the endpoint refuses to start without keys, and where keys come from."""
    found = f"api.keys_file ({keys_file}) holds no keys" if keys_file else f"no api.keys_file and no {ENV_KEYS}"
    return (
        f"the metrics endpoint has no API keys ({found}): set api.keys_file in the config to a file of "
        f"`<key> <tenant>` lines (tenant `*`: every tenant), or, when no file is set, "
        f"{ENV_KEYS}=key:tenant,... in the environment; or pass {INSECURE_FLAG} to serve every tenant "
        "without a key"
    )


def load_keys(keys_file: str) -> dict[str, str]:
    """key -> tenant, from ``keys_file`` (``<key> <tenant>`` per line, # comments) or $GPU_PACK_API_KEYS."""
    if keys_file:
        try:
            # utf-8-sig: a BOM an editor wrote is not part of the first key.
            lines = Path(keys_file).read_text(encoding="utf-8-sig").splitlines()
        except OSError as err:
            raise ConfigError(f"api.keys_file: cannot read {keys_file}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"api.keys_file: {keys_file} is not UTF-8 text") from None
        source, entry = keys_file, "<key of 16+ characters> <tenant or *>"
    else:
        lines = [item.replace(":", " ", 1) for item in os.environ.get(ENV_KEYS, "").split(",")]
        source, entry = ENV_KEYS, "<key of 16+ characters>:<tenant or *>, comma-separated"
    keys: dict[str, str] = {}
    entries: dict[str, int] = {}
    for n, line in enumerate(lines, start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) < 16:
            raise ConfigError(f"{source}: entry {n}: expected `{entry}`")
        if parts[0] in entries:  # the later tenant would win unseen, and may widen what the key reads
            raise ConfigError(f"{source}: entry {n}: its key is given on entry {entries[parts[0]]} already")
        keys[parts[0]], entries[parts[0]] = parts[1], n
    return keys


def tenant_for(authorization: str | None, keys: dict[str, str]) -> str | None:
    """The tenant a request's ``Authorization: Bearer <key>`` grants, ``*`` for all; None if it grants nothing.

    Every key is compared, in constant time, so timing tells nothing about which one was close.
    """
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    found = None
    for key, tenant in keys.items():
        if hmac.compare_digest(key.encode(), token.strip().encode()):
            found = tenant
    return found
