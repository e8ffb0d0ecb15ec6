"""Reading a JSON request body: media type, size, encoding, syntax, depth, then its JSON Schema."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs

import falcon

import contracts
from api.errors import Problem

MAX_DEPTH = 32


def is_json_media(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def media_type(content_type: str | None) -> str | None:
    """`application/json` of `application/json; charset=utf-8`, lower-cased; None without a Content-Type."""
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def parse_form_payload(data: bytes) -> Any:
    """The JSON document in the `payload` field of a form-encoded body, as GitHub sends a webhook whose content
    type is `application/x-www-form-urlencoded`."""
    try:
        text = data.decode("ascii")
        fields = parse_qs(text, keep_blank_values=True, strict_parsing=True, errors="strict", max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Problem(400, "bad-request", f"the form-encoded body cannot be read: {exc}") from None
    payload = fields.get("payload")
    if payload is None or len(payload) != 1:
        found = "no payload field" if payload is None else f"{len(payload)} payload fields"
        raise Problem(400, "bad-request", f"a form-encoded delivery carries its JSON in one payload field; {found}")
    return parse_json(payload[0].encode("utf-8"))


def read_raw(req: falcon.Request, limit: int) -> bytes:
    """The body's bytes, refusing (413) anything longer than `limit` even when no length was declared."""
    data = req.bounded_stream.read(limit + 1)
    if len(data) > limit:
        raise Problem(413, "payload-too-large", f"the request body is larger than {limit} bytes")
    return data


def parse_json(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Problem(400, "bad-request", f"the request body is not valid UTF-8 (byte {exc.start})") from None
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise Problem(400, "bad-request", f"the JSON body is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise Problem(400, "bad-request", f"the request body is not valid JSON: {exc}") from None
    # A document cannot nest deeper than it has brackets: counting them (in C) spares most bodies the walk.
    if text.count("{") + text.count("[") > MAX_DEPTH and _depth(document) > MAX_DEPTH:
        raise Problem(400, "bad-request", f"the JSON body is nested deeper than {MAX_DEPTH} levels")
    # JSON may carry U+0000 (as the escape \u0000); PostgreSQL text cannot hold it, so no string may.
    if "\\u0000" in text:
        found = _pointers(document, _has_nul)
        if found:
            raise Problem(
                400,
                "bad-request",
                f"the request body holds the NUL character (U+0000) in {len(found)} string(s); it cannot be stored",
                errors=[{"path": pointer, "message": "contains the NUL character (U+0000)"} for pointer in found],
            )
    # JSON may also escape half of a UTF-16 surrogate pair alone ("\ud800"): no UTF-8 text, so no database
    # and no validator, can hold that string. (A pair escaped whole is one character, and fine.)
    if _SURROGATE_ESCAPE.search(text):
        found = _pointers(document, _has_lone_surrogate)
        if found:
            raise Problem(
                400,
                "bad-request",
                f"the request body holds an unpaired UTF-16 surrogate in {len(found)} string(s); it cannot be stored",
                errors=[{"path": pointer, "message": "contains an unpaired UTF-16 surrogate"} for pointer in found],
            )
    return document


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_nul(text: str) -> bool:
    return "\x00" in text


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _shown(key: str) -> str:
    """A member name as a JSON pointer segment, with what cannot be printed escaped as JSON would."""
    key = key.replace("~", "~0").replace("/", "~1")
    return key if key.isprintable() and not _has_lone_surrogate(key) else json.dumps(key)[1:-1]


def _pointers(document: Any, bad, limit: int = 20) -> list[str]:
    """JSON pointers of the strings (member names included) for which `bad` holds; iterative, like `_depth`."""
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack and len(found) < limit:
        node, pointer = stack.pop()
        if isinstance(node, str):
            if bad(node):
                found.append(pointer)
        elif isinstance(node, dict):
            for key, value in node.items():
                child = pointer + "/" + _shown(key)
                if bad(key):
                    found.append(child)
                stack.append((value, child))
        elif isinstance(node, list):
            stack.extend((value, f"{pointer}/{i}") for i, value in enumerate(node))
    return sorted(found)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(document: Any) -> int:
    """Nesting depth, computed without recursion so a hostile document cannot exhaust the stack."""
    deepest = 0
    stack = [(document, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            stack.extend((v, level + 1) for v in node)
    return deepest


def read_json(req: falcon.Request, *, schema: str | None, limit: int, optional: bool = False) -> Any:
    """Read, parse and validate the body; `optional` bodies may be absent and then read as {}."""
    declared = req.content_length
    if optional and not declared and not req.content_type:
        data = read_raw(req, limit)
        if not data.strip():
            return contracts.check(schema, {}) if schema else {}
        raise Problem(415, "unsupported-media-type", "send the body as application/json")
    if not is_json_media(req.content_type):
        shown = req.content_type or "no Content-Type"
        raise Problem(415, "unsupported-media-type", f"expected application/json, got {shown}")
    data = read_raw(req, limit)
    if not data.strip():
        if optional:
            return contracts.check(schema, {}) if schema else {}
        raise Problem(400, "bad-request", "the request body is empty; a JSON document is required")
    document = parse_json(data)
    return contracts.check(schema, document) if schema else document


def json_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object `data` holds, or None when it holds none: empty, not UTF-8 JSON (or JSON no database can
    hold), an array or a scalar. A worker's result is judged so: anything else fails its job (`/bad-output`)."""
    if not data.strip():
        return None
    try:
        document = parse_json(data)
    except Problem:
        return None
    return document if isinstance(document, dict) else None
