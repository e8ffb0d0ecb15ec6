from domain import chat


def test_short_content_is_kept():
    assert chat.fit("  hello  ") == "hello"


def test_long_content_is_cut_to_the_limit_and_marked():
    cut = chat.fit("x" * 5000)
    assert len(cut) <= chat.MAX_CONTENT and cut.endswith("…")


def test_empty_content_still_makes_a_valid_message():
    assert chat.fit("   ") == "(empty message)"


def test_log_redaction_finds_secrets_however_json_escaped_them():
    import io
    import json
    import logging

    from svc.logs import JSONFormatter

    secret = 'pa"ss\\wörd-0123456789'
    handler = logging.StreamHandler(stream := io.StringIO())
    handler.setFormatter(JSONFormatter((secret,)))
    logger = logging.getLogger("test.redaction")
    logger.addHandler(handler)
    try:
        logger.warning("refused %s", secret)
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert json.dumps(secret)[1:-1] not in line and secret not in line
    assert "[redacted]" in line
