from svc import chat


def test_short_content_is_kept():
    assert chat.fit("  hello  ") == "hello"


def test_long_content_is_cut_to_the_limit_and_marked():
    cut = chat.fit("x" * 5000)
    assert len(cut) <= chat.MAX_CONTENT and cut.endswith("…")


def test_empty_content_still_makes_a_valid_message():
    assert chat.fit("   ") == "(empty message)"
