"""Bay wipes run the configured command as an argument list, with a time limit, recording what happened."""

import sys

from integrations import bays


def script(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code, "{slot}")


def test_the_slot_name_is_passed_as_one_argument_never_through_a_shell(tmp_path):
    marker = tmp_path / "args"
    command = script(f"import sys, pathlib; pathlib.Path({str(marker)!r}).write_text(repr(sys.argv[1:]))")
    result = bays.wipe("bay-1;rm -rf $HOME", command=command, timeout=10)
    assert result.ok and result.ran and result.exit_code == 0
    assert marker.read_text() == repr(["bay-1;rm -rf $HOME"])
    assert result.argv[-1] == "bay-1;rm -rf $HOME"


def test_exit_code_and_output_are_recorded():
    result = bays.wipe("bay-2", command=script("import sys; print('wiping', sys.argv[1]); sys.exit(3)"), timeout=10)
    assert not result.ok and result.ran
    assert result.exit_code == 3
    assert result.output == "wiping bay-2"
    assert result.detail == "exited with 3"


def test_a_wipe_that_takes_too_long_is_killed_with_its_children():
    code = (
        "import subprocess, sys, time;"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        "time.sleep(60)"
    )
    result = bays.wipe("bay-3", command=script(code), timeout=0.5)
    assert not result.ok and result.timed_out
    assert result.detail == "timed out after 0.5 s and was killed"


def test_a_missing_program_is_a_failed_wipe(tmp_path):
    result = bays.wipe("bay-4", command=(str(tmp_path / "no-such-wiper"), "{slot}"), timeout=5)
    assert not result.ok and not result.ran
    assert "could not start" in result.detail


def test_unset_means_the_wipe_is_recorded_only():
    result = bays.wipe("bay-5", command=None, timeout=5)
    assert result.ok and not result.ran
    assert "recorded only" in result.detail


def test_long_output_keeps_its_tail():
    result = bays.wipe("bay-6", command=script("print('x' * 5000 + 'END')"), timeout=10)
    assert len(result.output) == bays.OUTPUT_LIMIT
    assert result.output.endswith("END")
