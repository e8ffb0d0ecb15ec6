"""The text the service writes to a forge for a worker (a pull request's title and body, a comment), neutralized
before it leaves: the author's intent travels, its side effects do not. A worker's coding agent may have been
prompt-injected by the issue it read, and the forge acts on text as the service's own user.

Outside code spans and fenced code blocks, for GitHub and GitLab alike:
- an `@mention` (a person, `@org/team`, GitLab's `@all`) is wrapped in backticks, so nobody is pinged;
- a closing keyword (`close[sd]?`, `fix(es|ed)?`, `resolve[sd]?`, in any case, and GitLab's `closing`, `fixing`,
  `resolving`, `implement(s|ed|ing)?`) followed by issue references (`#12`, `owner/repo#12`, `GH-12`, an issue URL,
  GitLab's `group/sub/project#12` and a tracker's `ABC-12`, a list of them) has each reference wrapped in
  backticks, so nothing is closed on merge, in this repository or another;
- a line starting with `/` (a GitLab quick action such as `/merge` or `/approve`, a bot's command) is wrapped in
  backticks, so the forge executes nothing as the service's user;
- HTML comments and markdown link titles (inline and in reference definitions, and `title` attributes) are removed,
  so nothing hidden travels;
- control characters (but line breaks and tabs), zero-width characters and bidirectional overrides are removed
  first, so none of the above can be hidden by them; `&#64;` and its kin count as `@`;
- lengths are capped (the title to what the forge takes, the body and a comment to `BODY_MAX`).

How it reads markdown, and why it is safe where it is unsure: it leaves text alone only where it is certain a
renderer (CommonMark, GitHub's and GitLab's flavours) shows it as code. A fenced code block counts only when its
opening fence is at the line's start (no container can end it early) and it is closed; a code span only when it
closes on its own line and holds no `|` (a table cell would split it). Every other backtick is escaped, so the code
spans the forge sees are exactly the ones read here and the ones written here. Where it is unsure whether a line is
markdown or raw HTML (an HTML block, where backticks make no code), it wraps in `<code>...</code>` instead, which
is code in either. An unclosed fence is escaped (it would swallow the rest, footer included).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# What the forges take: GitHub's title 256 characters, its body and comments 65536; GitLab's title 255 with its
# `Draft: ` prefix (`TITLE_MAX_GITLAB`), far more in a description or a note. The body keeps room for the footer.
TITLE_MAX_GITHUB = 256
TITLE_MAX_GITLAB = 255 - len("Draft: ")
BODY_MAX = 60_000
COMMENT_MAX = 65_536
TRUNCATED = "\n\n(cut short by svc: the text was longer than a forge takes)"

# Control characters but line feed and tab (a carriage return is read as a line break first), zero-width characters
# and the bidirectional controls that reorder what is shown.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
# `@` written as an HTML character reference, which a renderer shows as `@`.
_AT_ENTITY = re.compile(r"&(?:#0*64|#[xX]0*40|commat);")
_HASH_ENTITY = re.compile(r"&(?:#0*35|#[xX]0*23|num);")

_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
# Where a line starts a CommonMark HTML block (read liberally: a line taken for HTML is only wrapped otherwise), and,
# for the kinds that end at a marker rather than at a blank line, that marker.
_HTML_START = re.compile(r"^ {0,3}<(?:[A-Za-z/?!])")
_HTML_ENDS = (
    (
        re.compile(r"^ {0,3}<(?:script|pre|style|textarea)(?:\s|>|$)", re.I),
        re.compile(r"</(?:script|pre|style|textarea)>", re.I),
    ),
    (re.compile(r"^ {0,3}<!--"), re.compile(r"-->")),
    (re.compile(r"^ {0,3}<\?"), re.compile(r"\?>")),
    (re.compile(r"^ {0,3}<!\[CDATA\["), re.compile(r"\]\]>")),
    (re.compile(r"^ {0,3}<![A-Za-z]"), re.compile(r">")),
)

# Inline raw HTML and autolinks (CommonMark's), which bind before a code span that starts after them.
_ATTRIBUTE = r"""\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?"""
_INLINE_HTML = re.compile(
    r"<(?:"
    rf"[A-Za-z][A-Za-z0-9-]*(?:{_ATTRIBUTE})*\s*/?>"  # an open tag
    r"|/[A-Za-z][A-Za-z0-9-]*\s*>"  # a closing tag (comments: `_comments`)
    r"|\?[\s\S]*?\?>"  # a processing instruction
    r"|![A-Za-z][^>]*>"  # a declaration
    r"|!\[CDATA\[[\s\S]*?\]\]>"  # CDATA
    r"|[A-Za-z][A-Za-z0-9.+-]{1,31}:[^\s<>\x00-\x1f]*>"  # an autolink
    r"|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*>"  # an email autolink
    r")"
)
_COMMENT_END = re.compile(r"--!?>")
# A stretch of markdown holding more than this many `<` and link brackets is read as text alone (`_as_text`): each
# can cost a scan to the end of the text, and a hostile worker could hand back thousands.
CONSTRUCTS_MAX = 500
# How many times a removal is made again on what the one before left.
PASSES = 5
_TITLE_ATTRIBUTE = re.compile(r"""\s+title\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+)""", re.I)

# A markdown link's destination and title, inline (`[text](dest "title")`) and in a reference definition.
_LINK_DEST = r"(?:<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)"
_LINK_TITLE = r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))"""
_INLINE_LINK_TITLE = re.compile(rf"(\]\([ \t\n]*{_LINK_DEST})[ \t]*\n?[ \t]*{_LINK_TITLE}[ \t\n]*\)")
_DEFINITION_TITLE = re.compile(
    rf"^( {{0,3}}\[(?:[^\]\\]|\\.)+\]:[ \t]*\n?[ \t]*{_LINK_DEST})[ \t]*\n?[ \t]*{_LINK_TITLE}[ \t]*$", re.M
)

_NAME = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
# An `@` after a letter, a digit or `_` is an address (`ada@example.com`), not a mention.
_MENTION = re.compile(rf"(?<![A-Za-z0-9_])@{_NAME}(?:/{_NAME})*")
_KEYWORD = re.compile(
    r"(?<![A-Za-z0-9_])(?:close[sd]?|closing|fix(?:e[sd])?|fixing|resolve[sd]?|resolving|implement(?:s|ed|ing)?)"
    r"(?![A-Za-z0-9_])",
    re.I,
)
# Between a keyword and its first reference (`Fixes: #1`, `fixes **#1**`, GitLab's `Closes issue #1`), and between
# references of a list (`#1, #2 and #3`).
_AFTER_KEYWORD = re.compile(r"[ \t\n:*_~]*(?:issues?[ \t]+)?[*_~]*", re.I)
_BETWEEN = re.compile(r"[*_~]*[ \t\n]*(?:,|&|\+|\band\b)?[ \t\n]*(?:issues?[ \t]+)?[*_~]*", re.I)
_REFERENCE = re.compile(
    r"(?:[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+)?#[0-9]+"  # #12, owner/repo#12, group/sub/project#12
    r"|GH-[0-9]+"
    r"|<https?://[^\s<>`]+>"  # an issue's address (any: which one closes an issue is the forge's to say)
    r"|https?://[^\s<>`]*[^\s<>`.,;:!?)\]]"
    r"|\[[^\]\n]*\]\([^)\s]*\)"  # a link to one
    r"|[A-Z][A-Z0-9_]+-[0-9]+"  # a tracker's key (GitLab's Jira integration closes those too)
    r"|![0-9]+",
)
_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


@dataclass
class _Piece:
    """A stretch of a line: text to neutralize, or code left as it is (a span read or written here). `start` and `end`
    are where it came from in the line (written pieces: where they stand in for what they wrap)."""

    text: str
    code: bool = False
    start: int = 0
    end: int = 0


def title(text: str, *, limit: int = TITLE_MAX_GITHUB) -> str:
    """A pull request's title: one line, neutralized, at most `limit` characters."""
    flat = " ".join(_visible(text).split())
    return _capped(flat, limit, _neutralized, marker="…")


def body(text: str, *, limit: int = BODY_MAX) -> str:
    """A pull request's body or a comment: neutralized markdown, at most `limit` characters."""
    return _capped(_visible(text), limit, _neutralized, marker=TRUNCATED)


def comment(text: str) -> str:
    """A comment on a pull request (a note on a merge request), neutralized."""
    return body(text, limit=COMMENT_MAX)


def footer(*, ticket: str, job_id: int, role: str, rule: str | None) -> str:
    """The service's own lines at the end of a pull request's body: they name the ticket and the job (which is how the
    service knows a pull request of its own on a branch, `domain/dispatch/ownership.py`), and say `Refs <ticket>`."""
    return f"---\nOpened by svc for {ticket}, job {job_id} ({role}, rule {rule}).\nRefs {ticket}"


def pull_request_body(text: str, *, ticket: str, job_id: int, role: str, rule: str | None) -> str:
    """The worker's text, neutralized, then the service's footer."""
    signature = footer(ticket=ticket, job_id=job_id, role=role, rule=rule)
    said = body(text, limit=BODY_MAX).rstrip()
    return f"{said}\n\n{signature}" if said else signature


# -- the steps -------------------------------------------------------------------------------------------------------


def _visible(text: str) -> str:
    """Line breaks as `\\n`; no control, zero-width or bidirectional character; `@` and `#` as themselves."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _INVISIBLE.sub("", text)
    text = _AT_ENTITY.sub("@", text)
    return _HASH_ENTITY.sub("#", text)


def _capped(text: str, limit: int, neutralize, *, marker: str) -> str:
    """`neutralize(text)`, the text cut before neutralizing (so that no span written here is cut in two) until what
    comes out fits `limit`, the marker saying so."""
    done = neutralize(text)
    keep = len(text)
    while len(done) > limit:
        # Neutralizing lengthens a text by about as much again as it lengthened the longer one: scale down by that.
        keep = min(keep - 1, int(keep * (limit - len(marker)) / len(done)))
        if keep <= 0:
            return marker.strip()[:limit]
        done = neutralize(text[:keep]).rstrip() + marker
    return done


def _neutralized(text: str) -> str:
    """Every line outside a fenced code block left as it is, neutralized as markdown or as raw HTML (see the
    module); in a fenced block, only lines starting with `/` where GitLab would not read the block as one."""
    lines = text.split("\n")
    out: list[str] = []
    markdown: list[str] = []
    index = 0

    def flush() -> None:
        if markdown:
            out.append(_markdown(markdown))
            markdown.clear()

    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            end = _closing_fence(lines, index, fence.group(2))
            if end is None:
                # Unclosed, it would take every line after it (the footer too) into a code block: escape it.
                markdown.append(f"{fence.group(1)}\\{fence.group(2)}{fence.group(3)}")
                index += 1
                continue
            if fence.group(1) == "":
                flush()
                block = lines[index : end + 1]
                if not (fence.group(2) == "```" and block[-1] == "```"):
                    # GitLab reads quick actions in every block but one fenced by exactly ``` at the line's start.
                    block = [block[0], *(_quick_action(line) for line in block[1:-1]), block[-1]]
                out.append("\n".join(block))
                index = end + 1
                continue
        if _HTML_START.match(line):
            flush()
            end = _html_block_end(lines, index)
            out.append(_html("\n".join(lines[index : end + 1])))
            index = end + 1
            continue
        markdown.append(line)
        index += 1
    flush()
    return "\n".join(out)


def _quick_action(line: str) -> str:
    stripped = line.lstrip(" \t")
    return line[: len(line) - len(stripped)] + _code_span(stripped) if stripped.startswith("/") else line


def _closing_fence(lines: list[str], start: int, opening: str) -> int | None:
    closing = re.compile(rf"^ {{0,3}}{re.escape(opening[0])}{{{len(opening)},}}[ \t]*$")
    for index in range(start + 1, len(lines)):
        if closing.match(lines[index]):
            return index
    return None


def _html_block_end(lines: list[str], start: int) -> int:
    """The last line of the HTML block starting at `start`: its end marker's line, or the line before a blank one."""
    for opening, marker in _HTML_ENDS:
        if opening.match(lines[start]):
            for index in range(start, len(lines)):
                if marker.search(lines[index], lines[index].index("<") + 2 if index == start else 0):
                    return index
            return len(lines) - 1
    index = start
    while index + 1 < len(lines) and lines[index + 1].strip():
        index += 1
    return index


def _html(block: str) -> str:
    """An HTML block: comments and `title` attributes removed; mentions, references after closing keywords and lines
    starting with `/` wrapped in `<code>` (backticks make no code in raw HTML)."""
    block = _without_comments(block, unclosed=True)
    # Too full of tags to read at a bounded cost: read as text alone (no tag is left, so no attribute).
    block = block.replace("<", "&lt;") if _constructs(block) > CONSTRUCTS_MAX else _without_title_attributes(block)
    lines = []
    continued = False
    for line in block.split("\n"):
        stripped = line.lstrip(" \t")
        if stripped.startswith("/"):
            lines.append(line[: len(line) - len(stripped)] + _html_code(stripped))
            continued = False
            continue
        pieces, continued = _wrapped([_Piece(line, start=0, end=len(line))], _html_code, continued)
        lines.append("".join(piece.text for piece in pieces))
    return "\n".join(lines)


def _html_code(text: str) -> str:
    return f"<code>{text.translate(_HTML_ESCAPES)}</code>"


def _constructs(text: str) -> int:
    return text.count("<") + text.count("](") + text.count("]:")


def _comments(text: str) -> list[tuple[int, int]]:
    """Where the HTML comments of `text` are, first to last, as CommonMark reads them: `<!-->` and `<!--->` whole,
    else from `<!--` to the first `-->` (or HTML's `--!>`) after it. An unclosed one is not among them. (Found with
    one pass over the closers, never a scan to the end of the text for each opener.)"""
    ends = [match.end() for match in _COMMENT_END.finditer(text)]
    starts = [match.start() for match in _COMMENT_END.finditer(text)]
    found = []
    position = text.find("<!--")
    while position != -1:
        if text.startswith(">", position + 4):
            end = position + 5
        elif text.startswith("->", position + 4):
            end = position + 6
        else:
            at = bisect.bisect_left(starts, position + 4)
            if at == len(starts):
                break
            end = ends[at]
        found.append((position, end))
        position = text.find("<!--", end)
    return found


def _without_comments(text: str, *, unclosed: bool = False, outside_code: bool = False) -> str:
    """`text` without its HTML comments, again until none is left (a removal may make another: `<!-<!-- -->-`);
    `unclosed`: and from an unclosed `<!--` to the end; `outside_code`: but those starting in a code span."""
    for _ in range(PASSES):
        code = _code_ranges(text) if outside_code else []
        spans = [(a, b) for a, b in _comments(text) if not any(start <= a < end for start, end in code)]
        shorter = _cut(text, spans)
        if shorter == text:
            break
        text = shorter
    opener = text.find("<!--") if unclosed else -1
    return text if opener == -1 else text[:opener]


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    kept, position = [], 0
    for start, end in spans:
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return "".join(kept)


def _without_title_attributes(text: str) -> str:
    """Each raw HTML tag of `text` without its `title` attribute (a hover text that hides what it says)."""
    out, position = [], 0
    for start, end in _tags(text):
        out.append(text[position:start])
        out.append(_TITLE_ATTRIBUTE.sub("", text[start:end]))
        position = end
    out.append(text[position:])
    return "".join(out)


def _tags(text: str) -> list[tuple[int, int]]:
    found = []
    position = text.find("<")
    while position != -1:
        match = _tag_at(text, position)
        if match is not None:
            found.append(match.span())
        position = text.find("<", match.end() if match is not None else position + 1)
    return found


def _tag_at(text: str, index: int) -> re.Match[str] | None:
    """The raw HTML tag or autolink starting at `index` (comments aside), or None; never a scan to the end of the text
    for a processing instruction or CDATA that is not closed."""
    if text.startswith("<?", index) and text.find("?>", index) == -1:
        return None
    if text.startswith("<![CDATA[", index) and text.find("]]>", index) == -1:
        return None
    return _INLINE_HTML.match(text, index)


def _markdown(lines: list[str]) -> str:
    """Lines of markdown (no fenced block, no HTML block among them): comments and link titles removed outside code
    spans, then each line neutralized (a closing keyword at a line's end reaching into the next)."""
    segment = "\n".join(lines)
    if _constructs(segment) > CONSTRUCTS_MAX:
        return _as_text(segment)
    segment = _without_comments(segment, outside_code=True)
    for pattern, replacement in ((_INLINE_LINK_TITLE, r"\1)"), (_DEFINITION_TITLE, r"\1")):
        segment = _outside_code(segment, pattern, replacement)
    out = []
    continued = False
    for line in segment.split("\n"):
        stripped = line.lstrip(" \t")
        if stripped.startswith("/"):
            out.append(line[: len(line) - len(stripped)] + _code_span(stripped))
            continued = False
            continue
        pieces, continued = _wrapped(_pieces(line), _code_span, continued)
        out.append(_joined(pieces))
    return "\n".join(out)


def _as_text(segment: str) -> str:
    """Markdown too full of constructs to read at a bounded cost, made plain text: every backtick, `<` and `[`
    escaped (no code span, tag, comment or link is left to read), then neutralized line by line as above."""
    escaped = segment.replace("\\", "\\\\").replace("`", "\\`").replace("[", "\\[").replace("<", "&lt;")
    out = []
    continued = False
    for line in escaped.split("\n"):
        stripped = line.lstrip(" \t")
        if stripped.startswith("/"):
            out.append(line[: len(line) - len(stripped)] + _code_span(stripped))
            continued = False
            continue
        pieces, continued = _wrapped([_Piece(line, start=0, end=len(line))], _code_span, continued)
        out.append(_joined(pieces))
    return "\n".join(out)


def _outside_code(segment: str, pattern: re.Pattern[str], replacement: str) -> str:
    """Each match of `pattern` that starts outside every code span replaced, again until none is left."""
    for _ in range(PASSES):
        code = _code_ranges(segment)

        def replace(match: re.Match[str], code=code) -> str:
            if any(start <= match.start() < end for start, end in code):
                return match.group()
            return match.expand(replacement)

        changed = pattern.sub(replace, segment)
        if changed == segment:
            break
        segment = changed
    return segment


def _code_ranges(segment: str) -> list[tuple[int, int]]:
    """Where the code spans of `segment` are (read line by line, as `_pieces` reads them)."""
    ranges = []
    offset = 0
    for line in segment.split("\n"):
        ranges.extend((offset + piece.start, offset + piece.end) for piece in _pieces(line) if piece.code)
        offset += len(line) + 1
    return ranges


def _pieces(line: str) -> list[_Piece]:
    """The line read as CommonMark reads inline code: code spans (closed on this line, holding no `|`), raw HTML and
    autolinks (which bind before a code span that starts after them), and text. A backtick that closes nothing is
    escaped in the text it is left in; a raw HTML comment is dropped; a tag or an autolink holding a backtick has its
    `<` escaped, so that the backtick is read as every other one is; so has an unclosed comment."""
    pieces: list[_Piece] = []
    text: list[str] = []
    text_start = 0
    comments = dict(_comments(line))
    runs = _runs(line)
    index = 0

    def add_text(until: int) -> None:
        if text:
            pieces.append(_Piece("".join(text), start=text_start, end=until))
            text.clear()

    while index < len(line):
        if not text:
            text_start = index
        char = line[index]
        if char == "\\" and index + 1 < len(line) and line[index + 1] in _ASCII_PUNCTUATION:
            text.append(line[index : index + 2])
            index += 2
            continue
        if char == "`":
            run = _run(line, index)
            close = _closing_run(runs, index + run, run)
            if close is not None and "|" not in line[index + run : close].replace("\\|", ""):
                add_text(index)
                pieces.append(_Piece(line[index : close + run], code=True, start=index, end=close + run))
                index = close + run
            else:
                text.append("\\`" * run)
                index += run
            continue
        if char == "<":
            if index in comments:
                index = comments[index]  # a comment: removed
                continue
            found = None if line.startswith("<!--", index) else _tag_at(line, index)
            if found is not None and "`" not in found.group():
                text.append(_TITLE_ATTRIBUTE.sub("", found.group()))  # no backtick in it: text like any other
                index = found.end()
                continue
            if found is not None or line.startswith("<!--", index):
                # A tag holding a backtick would hide it from the code spans read here; an unclosed comment would
                # hide what follows it from a person. Escaped, each is shown as it is.
                text.append("&lt;")
                index += 1
                continue
        text.append(char)
        index += 1
    add_text(len(line))
    return pieces


def _run(line: str, index: int) -> int:
    end = index
    while end < len(line) and line[end] == "`":
        end += 1
    return end - index


def _runs(line: str) -> dict[int, list[int]]:
    """Where each run of backticks of the line starts, by its length (read once: a code span's end is the next run of
    its opening run's length)."""
    found: dict[int, list[int]] = {}
    for match in re.finditer(r"`+", line):
        found.setdefault(len(match.group()), []).append(match.start())
    return found


def _closing_run(runs: dict[int, list[int]], start: int, run: int) -> int | None:
    """Where the next run of exactly `run` backticks at or after `start` starts (a code span's end), or None."""
    starts = runs.get(run, [])
    at = bisect.bisect_left(starts, start)
    return starts[at] if at < len(starts) else None


def _wrapped(pieces: list[_Piece], wrap, continued: bool) -> tuple[list[_Piece], bool]:
    """Each text piece with its mentions, and its references after a closing keyword, wrapped (`wrap` writes the
    code); whether the line ends still after a keyword or a reference, so that the next line's first references are
    read as following it (`continued`)."""
    out: list[_Piece] = []
    for piece in pieces:
        if piece.code:
            out.append(piece)
            continued = False
            continue
        references, continued = _references(piece.text, continued)
        position = 0
        for start, end in sorted(_mentions(piece.text) + references):
            if start < position:
                continue  # within one wrapped already
            if start > position:
                out.append(_Piece(piece.text[position:start]))
            out.append(_Piece(wrap(piece.text[start:end]), code=True))
            position = end
        if position < len(piece.text) or not out:
            out.append(_Piece(piece.text[position:]))
    return out, continued


def _mentions(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _MENTION.finditer(text)]


def _references(text: str, continued: bool) -> tuple[list[tuple[int, int]], bool]:
    """The references that follow a closing keyword (each one of a list), and whether the text ends still after a
    keyword or a reference. `continued`: the text starts so (the line before ended so)."""
    found: list[tuple[int, int]] = []
    open_at_end = False
    starts = [0] if continued else []
    starts += [_AFTER_KEYWORD.match(text, keyword.end()).end() for keyword in _KEYWORD.finditer(text)]
    for position in starts:
        if continued and position == 0:
            position = _BETWEEN.match(text, 0).end()
        while True:
            open_at_end = position >= len(text)
            reference = _REFERENCE.match(text, position)
            if reference is None:
                break
            found.append(reference.span())
            position = _BETWEEN.match(text, reference.end()).end()
    return found, open_at_end


def _code_span(text: str) -> str:
    """`text` as one code span: fenced by one backtick more than its longest run, padded where it starts or ends with
    one; a `|` escaped, so that a table does not split it."""
    text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _joined(pieces: list[_Piece]) -> str:
    """The pieces as one line. A text piece ending in an odd run of backslashes before a code span gets one more, so
    that the backslash escapes nothing of the code (a backslash then "`@x`" would be an escaped backtick, then @x)."""
    out = []
    for index, piece in enumerate(pieces):
        text = piece.text
        following = pieces[index + 1] if index + 1 < len(pieces) else None
        if not piece.code and following is not None and following.code and following.text.startswith("`"):
            trailing = len(text) - len(text.rstrip("\\"))
            if trailing % 2:
                text += "\\"
        out.append(text)
    return "".join(out)
