"""Reading a JSON request body: media type, size, encoding, syntax, depth, then its JSON Schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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
    if _depth(document) > MAX_DEPTH:
        raise Problem(400, "bad-request", f"the JSON body is nested deeper than {MAX_DEPTH} levels")
    # JSON may carry U+0000 (as the escape \u0000); PostgreSQL text cannot hold it, so no string may.
    if "\\u0000" in text:
        found = _nul_pointers(document)
        if found:
            raise Problem(
                400,
                "bad-request",
                f"the request body holds the NUL character (U+0000) in {len(found)} string(s); it cannot be stored",
                errors=[{"path": pointer, "message": "contains the NUL character (U+0000)"} for pointer in found],
            )
    # An escape may also name half of a UTF-16 surrogate pair alone (\ud800); that is no text, and neither the
    # database nor the UTF-8 a webhook's body is hashed as can hold it. A whole pair decodes to one character.
    if "\\ud" in text or "\\uD" in text:
        found = _nul_pointers(document, bad=_LONE_SURROGATE.search)
        if found:
            raise Problem(
                400,
                "bad-request",
                f"the request body holds a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair) in "
                f"{len(found)} string(s); it is not text and cannot be stored",
                errors=[{"path": pointer, "message": "contains a lone UTF-16 surrogate"} for pointer in found],
            )
    return document


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _nul_pointers(document: Any, limit: int = 20, bad: Callable[[str], Any] = lambda s: "\x00" in s) -> list[str]:
    """JSON pointers of the strings (member names included) that hold U+0000 (or that `bad` finds wrong);
    iterative, like `_depth`."""
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack and len(found) < limit:
        node, pointer = stack.pop()
        if isinstance(node, str):
            if bad(node):
                found.append(pointer)
        elif isinstance(node, dict):
            for key, value in node.items():
                child = pointer + "/" + _escaped(key.replace("~", "~0").replace("/", "~1"))
                if bad(key):
                    found.append(child)
                stack.append((value, child))
        elif isinstance(node, list):
            stack.extend((value, f"{pointer}/{i}") for i, value in enumerate(node))
    return sorted(found)


def _escaped(name: str) -> str:
    """A member name as it can be shown: U+0000 and lone surrogates written as their JSON escapes."""
    return re.sub("[\\x00\\ud800-\\udfff]", lambda m: f"\\u{ord(m.group()):04x}", name)


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
