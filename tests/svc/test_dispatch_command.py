"""`svc dispatch show|pause|resume`: the switch over all live dispatch from the command line, in the database the
service uses; what it sets is what `GET /api/v1/router/dispatch` answers."""

from __future__ import annotations

import json

import pytest

from svc.cli import main


def svc(capsys, monkeypatch, config, *args):
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    monkeypatch.setenv("SVC_DATA_DIR", str(config.data_dir))
    code = main(["dispatch", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_pause_show_and_resume(api, config, capsys, monkeypatch):
    code, out, _ = svc(capsys, monkeypatch, config, "show")
    assert (code, out) == (0, "dispatch is running (never paused)\n")
    code, out, err = svc(capsys, monkeypatch, config, "pause", "--reason", "the forge is down")
    assert code == 0, err
    assert out.startswith("svc dispatch: dispatch is PAUSED: the forge is down (paused by ")
    seen = api.get("/api/v1/router/dispatch").json
    assert (seen["paused"], seen["reason"]) == (True, "the forge is down")
    assert seen["changed_by"].endswith("via svc dispatch")
    code, out, _ = svc(capsys, monkeypatch, config, "show", "--format", "json")
    assert code == 0 and json.loads(out) == seen
    code, out, _ = svc(capsys, monkeypatch, config, "show")
    assert out.startswith("dispatch is PAUSED: the forge is down (paused by ")
    code, out, _ = svc(capsys, monkeypatch, config, "resume")
    assert code == 0 and out.startswith("svc dispatch: dispatch is running (resumed by ")
    assert api.get("/api/v1/router/dispatch").json["paused"] is False
    code, out, _ = svc(capsys, monkeypatch, config, "resume", "--reason", "forge back")
    assert code == 0 and "running: forge back" in out


def test_a_pause_without_a_reason_is_refused_and_changes_nothing(api, config, capsys, monkeypatch):
    with pytest.raises(SystemExit) as missing:
        svc(capsys, monkeypatch, config, "pause")
    assert missing.value.code == 2 and "--reason" in capsys.readouterr().err
    code, _, err = svc(capsys, monkeypatch, config, "pause", "--reason", "  ")
    assert code == 2 and "--reason must say why" in err
    assert api.get("/api/v1/router/dispatch").json["paused"] is False
