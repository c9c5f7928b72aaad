"""The commands of docs/cli.md run as written, one after the other, against one gateway.

A command that waits for records forever (``consume`` without ``--max-messages`` or
``--timeout-ms``) is stopped with Ctrl-C, as the page says a user stops it, once it has shown
what there is; it must then exit with 130 having said how many records it processed. The
commands run in an empty directory against a new gateway, as a reader's first run of them is:
the page makes every file and record it uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.e2e.docs_blocks import claim, shell_env
from tests.e2e.gateway_process import GatewayProcess


def commands(block: str) -> list[str]:
    """The block's commands, continuation lines joined; comment lines left out."""
    joined = block.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


# How long a consume that waits for records forever runs before its Ctrl-C: long enough to show
# what there is on a loaded machine. Any other command may take up to the minute it is given.
WAITING_S = 8.0
PATIENCE_S = 60.0


def waits_forever(command: str) -> bool:
    """A consume with nothing to end it but Ctrl-C (no ``--max-messages``, no ``--timeout-ms``)."""
    words = command.split("#")[0].split()
    return "consume" in words and not {"--max-messages", "--timeout-ms"} & set(words)


def run(command: str, cwd: Path, env: dict[str, str], patience: float) -> tuple[int, str, str]:
    """Run one command; one still running after ``patience`` seconds gets Ctrl-C (SIGINT)."""
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=patience)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def test_command_line_tools(tmp_path):
    """The block from a fresh gateway and an empty directory, as a reader runs it: every file and
    record a command needs, an earlier command made, and the group ``consume --group`` read in is
    there for ``groups describe`` although it printed nothing."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        env = shell_env(BROKERGATE_URL=gw.url)
        with claim("docs/cli.md", "Command-line tools") as section:
            lines = commands(section.block(0))
        out: dict[str, str] = {}
        for command in lines:
            started = time.monotonic()
            forever = waits_forever(command)
            status, printed, err = run(command, tmp_path, env, WAITING_S if forever else PATIENCE_S)
            if forever:  # stopped by Ctrl-C, having said what it did
                assert status == 130, (command, status, printed, err)
                assert "Processed a total of" in err, (command, err)
            else:
                assert status == 0, (command, status, printed, err)
                assert time.monotonic() - started < PATIENCE_S
            out[command.split("#")[0].strip()] = printed
        assert "test4" in out["brokergate topics list"]
        shown = out["brokergate consume --topic test4 --from-beginning --print-key --print-offset"]
        assert sorted(shown.splitlines()) == ["0:0\tk2\tworld", "2:0\tk1\thello"]
        assert out["brokergate consume --topic test4 --partition 2 --offset 0 --max-messages 1"] == "hello\n"
        # the member printed nothing (a new group starts at the end) and committed the end it stood at
        described = out["brokergate groups describe --group billing"].splitlines()
        assert [line.split()[1:6] for line in described[1:]] == [
            ["test4", str(p), str(end), str(end), "0"] for p, end in enumerate([1, 0, 1])
        ], described
        assert "job 1" in out["brokergate consume --share-group workers jobs --from-beginning --print-offset"]
        assert "compatible" in "\n".join(v for k, v in out.items() if "schemas compat" in k)
        decoded = out[
            "brokergate consume --topic invoices --format avro --from-beginning --print-key --max-messages 2"
        ]
        assert decoded.splitlines() == [
            'null\t{"id":"i-1","amount":12.5}',
            'null\t{"id":"i-2","amount":99.0}',
        ]
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
