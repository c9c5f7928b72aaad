"""Apache Kafka's own command-line tools, run from the same jars as the broker.

The tests use them as an independent client: what the gateway wrote, Kafka's tools must read,
and the reverse. Each name is the script of Kafka's distribution (``bin/NAME.sh``) and runs the
class that script runs, with the jar set ``kafka`` (``deploy.jars``) on the class path::

    out = await run_tool("kafka-topics", "--bootstrap-server", broker.bootstrap, "--list")

Every call starts a JVM (a second or two): the JVM is kept small (client compiler only, a small
heap, one GC thread) and Kafka's log output goes to stderr at WARN, so stdout is the tool's own.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Final

from deploy.jars import class_path

from .kafka_broker import java

__all__ = ["TOOLS", "KafkaToolError", "run_tool", "run_tool_bytes", "tool_command"]

# The class each script of Kafka 4.x's bin/ runs (all in the kafka-tools artifact).
TOOLS: Final = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
}
# A client JVM that starts fast: these tools run for a second, not a day.
JVM_OPTIONS: Final = (
    "-Xmx192m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",  # header names and printed text, whatever the machine's locale
    "-Dstdout.encoding=UTF-8",
)
LOG4J2: Final = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="err"/></Root></Loggers>
</Configuration>
"""
DEFAULT_TIMEOUT_S: Final = 60.0


class KafkaToolError(RuntimeError):
    """A tool that exited with an error, or ran past its timeout; the message carries its output."""


def _log4j_config() -> Path:
    path = Path(tempfile.gettempdir()) / "brokergate-kafka-tools-log4j2.xml"
    if not path.exists() or path.read_text() != LOG4J2:
        path.write_text(LOG4J2)
    return path


def tool_command(name: str, *args: str) -> list[str]:
    """The command line that runs tool ``name`` (``kafka-topics``, ...) with ``args``."""
    try:
        main = TOOLS[name]
    except KeyError:
        raise ValueError(f"no Kafka tool {name!r}: the tools are {', '.join(TOOLS)}") from None
    log4j = f"-Dlog4j2.configurationFile={_log4j_config()}"
    return [java(), *JVM_OPTIONS, log4j, "-cp", class_path("kafka"), main, *args]


async def run_tool(
    name: str, *args: str, input: str | bytes | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> str:
    """Run tool ``name`` with ``args`` (``input`` on its stdin) and return its stdout.

    ``KafkaToolError`` with stdout and stderr if it exits non-zero or is still running after
    ``timeout`` seconds (then it is killed).
    """
    return _text(await run_tool_bytes(name, *args, input=input, timeout=timeout))


async def run_tool_bytes(
    name: str, *args: str, input: str | bytes | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> bytes:
    """``run_tool``, its stdout as the bytes the tool wrote (the console consumer writes records'
    keys, values and headers as they are stored)."""
    command = tool_command(name, *args)
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    data = input.encode() if isinstance(input, str) else input
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate(data)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        raise KafkaToolError(
            f"{name} {' '.join(args)} ran past {timeout:g} s:\n{_text(out)}{_text(err)}"
        ) from None
    if process.returncode != 0:
        raise KafkaToolError(
            f"{name} {' '.join(args)} exited with {process.returncode}:\n{_text(out)}{_text(err)}"
        )
    return out


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")
