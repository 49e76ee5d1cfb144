"""A request's query parameters, read from its raw bytes: each given once, each UTF-8; its path UTF-8 too.

Starlette's own parsing keeps the last of a repeated parameter and turns bytes that are not UTF-8
into U+FFFD, so ``?step=1h&step=5m`` silently meant 5m, and ``%FF`` reached Prometheus as a
character its lexer refuses (a 502). Here both are a 400 that names the parameter.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.requests import Request

from gpu_execution_pack.query.params import bad, shown

NOT_UTF8 = "is not UTF-8 once percent-decoded; accepted: UTF-8 text, percent-encoded"


def decoded(raw: bytes, what: str) -> str:
    """``raw`` (form-encoded: ``+`` is a space) percent-decoded as strict UTF-8, else a 400 naming ``what``."""
    try:
        return unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        raise bad(f"{what} {NOT_UTF8}") from None


def query_of(request: Request, accepted: frozenset[str]) -> dict[str, str]:
    """The request's query parameters, name -> value; a 400 for a name given twice, a name not ``accepted`` (a
    misspelt ``stpe`` would silently mean the default step) or bytes not UTF-8.

    Which of two values would count is a guess, so none does (``series``' names go in one value,
    separated by commas). The execution id in the path is checked for UTF-8 the same way.
    """
    decoded(request.scope.get("raw_path", b""), "execution_id (the path)")
    params: dict[str, str] = {}
    counts: dict[str, int] = {}
    for pair in request.scope.get("query_string", b"").split(b"&"):
        if not pair:
            continue
        raw_name, _, raw_value = pair.partition(b"=")
        name = decoded(raw_name, "a parameter's name")
        params[name] = decoded(raw_value, name)
        counts[name] = counts.get(name, 0) + 1
    for name, count in counts.items():
        if name not in accepted:
            raise bad(
                f"{name if name.isidentifier() else shown(name)}: not a parameter of this route; accepted: "
                + (", ".join(sorted(accepted)) or "none (it takes no query parameters)")
            )
        if count > 1:
            how = "once, the names in one value separated by commas" if name == "series" else "once"
            raise bad(f"{name if name.isidentifier() else shown(name)}: given {count} times; accepted: {how}")
    return params
