"""The neutralizer, case by case: what a worker's text may carry (mentions, closing keywords, quick actions, hidden
comments and link titles, tricks to slip them past) and what the forge gets instead. Each output is also rendered by
a CommonMark parser (markdown-it-py, with tables), and no text it shows outside code may ping, close or command."""

from __future__ import annotations

import re

import pytest

from domain.dispatch import neutralize

# (what the worker wrote, what the forge gets)
CASES = [
    ("Fixes #1", "Fixes `#1`"),
    ("closes acme/web#2", "closes `acme/web#2`"),
    ("RESOLVED: #3", "RESOLVED: `#3`"),
    ("fixed https://github.com/acme/web/issues/4.", "fixed `https://github.com/acme/web/issues/4`."),
    ("Fixes #1, #2 and #3", "Fixes `#1`, `#2` and `#3`"),
    ("Closes\n#5", "Closes\n`#5`"),
    ("fixes **#6**", "fixes **`#6`**"),
    ("Closes issue #7", "Closes issue `#7`"),
    ("Implements group/sub/project#8", "Implements `group/sub/project#8`"),
    ("Fixes PORT-9", "Fixes `PORT-9`"),
    ("Refs #10 and see #11", "Refs #10 and see #11"),  # no closing keyword: left as it is
    ("prefixes #12", "prefixes #12"),
    ("cc @bob", "cc `@bob`"),
    ("@acme/security-team please", "`@acme/security-team` please"),
    ("@all", "`@all`"),
    ("thanks @bob.", "thanks `@bob`."),
    ("mail ada@example.com", "mail ada@example.com"),
    ("&#64;bob and &#x40;eve and &commat;mallory", "`@bob` and `@eve` and `@mallory`"),
    ("@\u200bbob", "`@bob`"),
    ("\\@bob", "\\\\`@bob`"),
    ("a ` b @bob", "a \\` b `@bob`"),
    ("/merge", "`/merge`"),
    ("  /approve", "  `/approve`"),
    ("/label ~`bug`", "`` /label ~`bug` ``"),
    ("/assign @me | x", "`/assign @me \\| x`"),
    ("a /merge in the middle", "a /merge in the middle"),
    ("before <!-- hidden --> after", "before  after"),
    ("<!-- hidden -->\nshown", "\nshown"),
    ("<!--\nhidden to the end", ""),
    ("<!-<!-- -->- x -->y", "y"),
    ('[docs](https://x.test "hidden")', "[docs](https://x.test)"),
    ("[docs](<https://x.test> 'hidden')", "[docs](<https://x.test>)"),
    ("[docs]: https://x.test (hidden)", "[docs]: https://x.test"),
    ("`@bob Fixes #1 <!-- x -->`", "`@bob Fixes #1 <!-- x -->`"),
    ("```\n@bob\nFixes #1\n/merge\n```", "```\n@bob\nFixes #1\n/merge\n```"),
    ("~~~\n@bob\n/merge\n~~~", "~~~\n@bob\n`/merge`\n~~~"),  # GitLab runs quick actions in a ~~~ block
    ("```\nunclosed @bob", "\\`\\`\\`\nunclosed `@bob`"),
    (
        "<details>\n@bob\n/merge\nFixes #1\n</details>",
        "<details>\n<code>@bob</code>\n<code>/merge</code>\nFixes <code>#1</code>\n</details>",
    ),
    ('<a title="hover" href="x">@bob</a>', '<a href="x"><code>@bob</code></a>'),
    ('x <span title="`">@bob`</span>', 'x &lt;span title="`">@bob`</span>'),
    ("| a |\n|---|\n| `@bob | x` |", "| a |\n|---|\n| \\``@bob` | x\\` |"),
    ("\x1b[31mred\x1b[0m \u202e@bob", "[31mred[0m `@bob`"),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[repr(t)[:40] for t, _ in CASES])
def test_each_case(text, expected):
    assert neutralize.body(text) == expected


def _shown_outside_code(markdown: str) -> list[str]:
    """The text a CommonMark renderer (with GitHub's tables) shows outside code, and the raw HTML it passes on."""
    from markdown_it import MarkdownIt

    shown = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type in ("html_block",):
            shown.append(re.sub(r"<code>.*?</code>", "", token.content, flags=re.S))
        in_code = 0  # inside raw <code>...</code>, which GitHub and GitLab do not read for mentions either
        for child in token.children or []:
            if child.type == "html_inline":
                in_code += {"<code>": 1, "</code>": -1}.get(child.content, 0)
            elif child.type == "text" and not in_code:
                shown.append(child.content)
    return shown


PINGS = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9_]")
CLOSES = re.compile(r"(?i)\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)\W+(?:[\w./-]*#\d|https?://)")


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[repr(t)[:40] for t, _ in CASES])
def test_a_commonmark_renderer_shows_nothing_that_pings_or_closes(text, expected):
    for shown in _shown_outside_code(neutralize.body(text)):
        assert not PINGS.search(shown), shown
        assert not CLOSES.search(shown), shown
    # A quick action is a line of the raw text starting with `/`, outside a block fenced by exactly ``` (GitLab).
    outside = re.sub(r"(?ms)^```[^`\n]*\n.*?^```$", "", neutralize.body(text))
    assert not re.search(r"(?m)^[ \t]*/", outside), outside


def test_the_title_is_one_line_neutralized_and_fits_the_forge():
    assert neutralize.title("/merge this\n@bob") == "`/merge this @bob`"
    assert neutralize.title("Fix the login, fixes #12") == "Fix the login, fixes `#12`"
    long = neutralize.title("@bob " * 100, limit=neutralize.TITLE_MAX_GITLAB)
    assert len(long) <= 248 and long.endswith("…") and not re.search(r"(?<!`)@bob(?!`)", long)


def test_a_long_body_is_cut_before_it_is_neutralized_so_no_wrapped_span_is_cut_in_two():
    cut = neutralize.body("@bob " * 30_000)
    assert len(cut) <= neutralize.BODY_MAX and cut.endswith(neutralize.TRUNCATED)
    assert not PINGS.search(re.sub(r"`[^`]*`", "", cut))


def test_the_pull_request_body_ends_with_the_service_s_footer_after_the_worker_s_text():
    body = neutralize.pull_request_body("Done.\n```\nopen fence", ticket="NL-1", job_id=7, role="coder", rule="coder")
    assert body.endswith("\n\n---\nOpened by svc for NL-1, job 7 (coder, rule coder).\nRefs NL-1")
    assert body.startswith("Done.\n\\`\\`\\`")  # the unclosed fence cannot take the footer into a code block


def test_hostile_text_costs_at_most_a_bounded_time():
    # Each would cost a scan to the end of the text per construct if read naively: thousands of them.
    for text in ("<!--" * 16_000, '[a](x "' * 9_000, "".join("`" * k + "a" for k in range(1, 350)), "<?" * 30_000):
        assert len(neutralize.body(text)) <= neutralize.BODY_MAX
