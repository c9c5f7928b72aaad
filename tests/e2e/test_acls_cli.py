"""``brokergate acls``, and the credentials and TLS options of every console tool, as a user runs them.

One gateway process with HTTP Basic authentication and ACL authorization on: alice is a super
user, bob has only what the tests grant him. The tools run as separate processes without a
controlling terminal, unless a test gives them one (a pseudo-terminal) to answer a prompt at.
TLS is an HTTPS front on loopback (``TLSFront``) with certificates of a test CA.
"""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import trustme

from tests.e2e import tool_process
from tests.e2e.gateway_process import GatewayProcess, authorizing_gateway
from tests.e2e.tls_front import TLSFront
from tests.e2e.tool_process import bg, ok, rows, tool_env

ALICE, ALICE_PW = "alice", "alice's secret pw"
BOB, BOB_PW = "bob", "bob's secret pw"
AS_ALICE = ("--user", ALICE, "--password", ALICE_PW)
ALICE_ENV = {"BROKERGATE_USER": ALICE, "BROKERGATE_PASSWORD": ALICE_PW}
# A refusal's error is the last line on stderr, whatever a tool said before it.
refused = partial(tool_process.refused, alone=False)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    data = tmp_path_factory.mktemp("acls") / "data"
    gw = authorizing_gateway(data, {ALICE: ALICE_PW, BOB: BOB_PW}, ALICE)
    yield gw
    gw.stop()


def at_terminal(
    gw: GatewayProcess, args: Sequence[str], answers: Sequence[tuple[str, str]]
) -> tuple[int, str]:
    """``brokergate ARGS`` on a pseudo-terminal of its own: each answer is typed once its prompt
    shows; the exit status and everything the terminal showed (typed text it echoed included)."""
    env = tool_env(gw)
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout, stderr and controlling terminal are the pty
        os.execve(sys.executable, [sys.executable, "-m", "service", *args], env)
    shown = b""
    deadline = time.monotonic() + 60
    try:
        for prompt, answer in answers:
            while prompt.encode() not in shown:
                chunk = _read(fd, deadline)
                assert chunk, f"the prompt {prompt!r} never showed; the terminal showed {shown!r}"
                shown += chunk
            os.write(fd, answer.encode() + b"\n")
        while chunk := _read(fd, deadline):
            shown += chunk
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def _read(fd: int, deadline: float) -> bytes:
    """What the terminal shows next; b"" once the program has exited."""
    ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
    assert ready, "the program neither printed nor exited in time"
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the other side of the pty is closed, the program has exited
        return b""


# --- acls -----------------------------------------------------------------------------------


def test_added_bindings_are_listed_as_a_table_and_as_json(gateway, name):
    out = ok(
        bg(
            gateway,
            "acls",
            "add",
            *AS_ALICE,
            "--allow-principal",
            "User:bob",
            "--allow-principal",
            "User:carol",
            "--operation",
            "Read",
            "--operation",
            "DESCRIBE",
            "--topic",
            name,
            "--group",
            f"{name}-g",
        )
    )
    assert out.splitlines()[0].split() == [
        "RESOURCE-TYPE",
        "RESOURCE-NAME",
        "PATTERN-TYPE",
        "PRINCIPAL",
        "PERMISSION",
        "OPERATION",
        "HOST",
    ]
    # kafka-acls's one binding per principal x host x operation x resource
    expected = {
        (kind, resource, "LITERAL", who, "ALLOW", op, "*")
        for kind, resource in (("TOPIC", name), ("GROUP", f"{name}-g"))
        for who in ("User:bob", "User:carol")
        for op in ("READ", "DESCRIBE")
    }
    assert {tuple(row) for row in rows(out)} == expected and len(rows(out)) == 8

    listed = ok(bg(gateway, "acls", "list", *AS_ALICE, "--topic", name))
    assert {tuple(row) for row in rows(listed)} == {b for b in expected if b[0] == "TOPIC"}

    as_json = json.loads(
        ok(bg(gateway, "acls", "list", *AS_ALICE, "--principal", "User:carol", "--output", "json"))
    )
    mine = [b for b in as_json if b["resource_name"] in (name, f"{name}-g")]
    assert len(mine) == 4 and all(b["principal"] == "User:carol" for b in as_json)
    assert {tuple(b[k] for k in ("resource_type", "resource_name", "operation")) for b in mine} == {
        (kind, resource, op)
        for kind, resource in (("TOPIC", name), ("GROUP", f"{name}-g"))
        for op in ("READ", "DESCRIBE")
    }


def test_a_prefixed_binding_and_the_pattern_type_filters(gateway, name):
    prefix = f"{name}."
    out = ok(
        bg(
            gateway,
            "acls",
            "add",
            *AS_ALICE,
            "--deny-principal",
            "User:bob",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "write",
            "--topic",
            prefix,
            "--resource-pattern-type",
            "prefixed",
        )
    )
    binding = ["TOPIC", prefix, "PREFIXED", "User:bob", "DENY", "WRITE", "10.0.0.1"]
    assert rows(out) == [binding]

    def listed(*flags: str) -> list[list[str]]:
        return rows(ok(bg(gateway, "acls", "list", *AS_ALICE, *flags)))

    assert listed("--topic", prefix) == []  # kafka-acls's default: LITERAL bindings of that name
    assert listed("--topic", prefix, "--resource-pattern-type", "prefixed") == [binding]
    assert listed("--topic", prefix, "--resource-pattern-type", "any") == [binding]
    assert listed("--topic", f"{prefix}events", "--resource-pattern-type", "match") == [binding]
    assert listed("--topic", f"{name}-other", "--resource-pattern-type", "match") == []


def test_remove_force_deletes_what_the_filter_selects_and_prints_it(gateway, name):
    for who, op in (("User:bob", "READ"), ("User:bob", "WRITE"), ("User:carol", "READ")):
        ok(
            bg(
                gateway,
                "acls",
                "add",
                *AS_ALICE,
                "--allow-principal",
                who,
                "--operation",
                op,
                "--topic",
                name,
            )
        )
    removed = json.loads(
        ok(
            bg(
                gateway,
                "acls",
                "remove",
                *AS_ALICE,
                "--topic",
                name,
                "--principal",
                "User:bob",
                "--force",
                "--output",
                "json",
            )
        )
    )
    assert sorted((b["principal"], b["operation"]) for b in removed) == [
        ("User:bob", "READ"),
        ("User:bob", "WRITE"),
    ]
    assert rows(ok(bg(gateway, "acls", "list", *AS_ALICE, "--topic", name))) == [
        ["TOPIC", name, "LITERAL", "User:carol", "ALLOW", "READ", "*"]
    ]
    again = bg(gateway, "acls", "remove", *AS_ALICE, "--topic", name, "--principal", "User:bob", "--force")
    assert rows(ok(again)) == [] and "nothing removed" in again.stderr


def test_remove_without_force_refuses_when_stdin_is_not_a_terminal(gateway, name):
    ok(bg(gateway, "acls", "add", *AS_ALICE, "--allow-principal", "User:bob", "--topic", name))
    refused(
        bg(gateway, "acls", "remove", *AS_ALICE, "--topic", name, stdin="y\n"),
        2,
        "stdin is not a terminal: add --force",
    )
    assert len(rows(ok(bg(gateway, "acls", "list", *AS_ALICE, "--topic", name)))) == 1


def test_remove_shows_the_bindings_and_asks_at_a_terminal(gateway, name):
    ok(bg(gateway, "acls", "add", *AS_ALICE, "--allow-principal", "User:bob", "--topic", name))
    remove = ["acls", "remove", *AS_ALICE, "--topic", name]
    status, shown = at_terminal(gateway, remove, [("(y/n)", "n")])
    assert status == 1 and "User:bob" in shown and "nothing removed" in shown
    assert len(rows(ok(bg(gateway, "acls", "list", *AS_ALICE, "--topic", name)))) == 1
    status, shown = at_terminal(gateway, remove, [("Remove these 1 ACL binding(s)? (y/n)", "y")])
    assert status == 0, shown
    assert rows(ok(bg(gateway, "acls", "list", *AS_ALICE, "--topic", name))) == []


def test_a_user_the_bindings_do_not_allow_is_told_so_until_a_binding_does(gateway, name):
    as_bob = ("--user", BOB, "--password", BOB_PW)
    refused(bg(gateway, "acls", "list", *as_bob), 1, "not allowed (user 'bob')")
    refused(bg(gateway, "topics", "describe", "--topic", name, *as_bob), 1, "not allowed (user 'bob')")
    ok(bg(gateway, "topics", "create", "--topic", name, *AS_ALICE))
    ok(
        bg(
            gateway,
            "acls",
            "add",
            *AS_ALICE,
            "--allow-principal",
            "User:bob",
            "--operation",
            "DESCRIBE",
            "--topic",
            name,
        )
    )
    assert (
        json.loads(ok(bg(gateway, "topics", "describe", "--topic", name, "--output", "json", *as_bob)))[
            "topic_name"
        ]
        == name
    )


# --- credentials, every tool ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["flags", "environment"])
def test_every_tool_works_with_a_user_and_password(gateway, name, how):
    flags, env = (AS_ALICE, None) if how == "flags" else ((), ALICE_ENV)

    def run(*args: str, stdin: str = "") -> str:
        return ok(bg(gateway, *args, *flags, stdin=stdin, env=env))

    run("topics", "create", "--topic", name, "--partitions", "2")
    assert name in run("topics", "list").split()
    run("produce", "--topic", name, stdin="one\ntwo\nthree\n")
    out = run("consume", "--topic", name, "--group", f"{name}-g", "--from-beginning", "--max-messages", "3")
    assert sorted(out.split()) == ["one", "three", "two"]
    groups = json.loads(run("groups", "list", "--output", "json"))
    assert f"{name}-g" in {g["consumer_group_id"] for g in groups}
    lags = json.loads(run("groups", "lag", "--group", f"{name}-g", "--output", "json"))
    assert sum(r["current_offset"] for r in lags) == 3
    run("acls", "add", "--allow-principal", "User:bob", "--operation", "READ", "--topic", name)
    assert len(rows(run("acls", "list", "--topic", name))) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "list"],
        ["produce", "--topic", "orders"],
        ["consume", "--topic", "orders", "--max-messages", "1"],
        ["groups", "list"],
        ["acls", "list"],
    ],
)
def test_a_wrong_password_or_none_ends_in_status_1_and_says_so(gateway, args):
    line = refused(
        bg(gateway, *args, "--user", ALICE, "--password", "not it", stdin="x\n"), 1, "refused the credentials"
    )
    assert "user 'alice'" in line and "not it" not in line
    refused(bg(gateway, *args, stdin="x\n"), 1, "requires credentials and none were given")


def test_password_from_stdin_and_its_conflicts(gateway, name, tmp_path):
    assert ok(bg(gateway, "topics", "list", "--user", ALICE, "--password-stdin", stdin=f"{ALICE_PW}\n")) != ""
    records = tmp_path / "records"
    records.write_text("a\nb\n")
    produced = bg(
        gateway,
        "produce",
        "--topic",
        name,
        "--file",
        str(records),
        "--user",
        ALICE,
        "--password-stdin",
        stdin=f"{ALICE_PW}\n",
    )
    assert rows(ok(produced))[0][:3] == [name, "2", "0"]
    refused(
        bg(
            gateway,
            "produce",
            "--topic",
            name,
            "--user",
            ALICE,
            "--password-stdin",
            stdin=f"{ALICE_PW}\nrecord\n",
        ),
        2,
        "give them in --file",
    )
    refused(bg(gateway, "topics", "list", "--password-stdin", stdin="pw\n"), 2, "go with --user")
    refused(bg(gateway, "topics", "list", "--user", ALICE), 2, "no terminal to ask it at")
    refused(bg(gateway, "topics", "list", "--user", ALICE, "--token", "t"), 2, "give one")
    both = {**ALICE_ENV, "BROKERGATE_TOKEN": "t"}
    refused(bg(gateway, "topics", "list", env=both), 2, "both set")
    assert ok(bg(gateway, "topics", "list", "--user", ALICE, "--password", ALICE_PW, env=both)) != ""


def test_the_password_is_asked_at_the_terminal_without_echo(gateway, name):
    ok(bg(gateway, "topics", "create", "--topic", name, *AS_ALICE))
    status, shown = at_terminal(
        gateway, ["topics", "list", "--user", ALICE], [("Password for alice: ", ALICE_PW)]
    )
    assert status == 0, shown
    assert name in shown and ALICE_PW not in shown


def test_a_token_goes_as_a_bearer_token(gateway, pki, tmp_path):
    front = TLSFront(gateway.url, pki.server_ca).start()
    https = ("topics", "list", "--url", front.url, "--cacert", pki.path("server-ca.pem"))
    try:
        token_file = tmp_path / "token"
        token_file.write_text("eyJhbGciOi.payload.sig\n")
        # This gateway knows HTTP Basic only: it refuses the token, which the front saw go by.
        line = refused(
            bg(gateway, *https, "--token-file", str(token_file)), 1, "credentials (a Bearer token)"
        )
        assert "eyJ" not in line
        assert front.authorizations[-1] == "Bearer eyJhbGciOi.payload.sig"
        refused(bg(gateway, *https, env={"BROKERGATE_TOKEN": "env-token"}), 1, "(a Bearer token)")
        assert front.authorizations[-1] == "Bearer env-token"
    finally:
        front.stop()
    refused(bg(gateway, "topics", "list", "--token", "two words"), 2, "no HTTP header carries it")
    refused(
        bg(gateway, "topics", "list", "--token-file", str(tmp_path / "none")), 2, "cannot read --token-file"
    )


# --- TLS ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    """A CA for the front's certificate, another that issued alice's client certificate, and files."""

    server_ca: trustme.CA
    client_ca: trustme.CA
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = Pki(trustme.CA(), trustme.CA(), tmp_path_factory.mktemp("pki"))
    client = pki.client_ca.issue_cert("alice@example.test")
    pki.server_ca.cert_pem.write_to_path(pki.path("server-ca.pem"))
    pki.client_ca.cert_pem.write_to_path(pki.path("client-ca.pem"))
    client.cert_chain_pems[0].write_to_path(pki.path("alice.crt"))
    client.private_key_pem.write_to_path(pki.path("alice.key"))
    client.private_key_and_cert_chain_pem.write_to_path(pki.path("alice.pem"))
    return pki


def test_https_with_cacert(gateway, pki):
    front = TLSFront(gateway.url, pki.server_ca).start()
    try:
        https = ("topics", "list", "--url", front.url, *AS_ALICE)
        ok(bg(gateway, *https, "--cacert", pki.path("server-ca.pem")))
        ok(bg(gateway, *https, env={"BROKERGATE_CACERT": pki.path("server-ca.pem")}))
        refused(bg(gateway, *https), 3, "its TLS certificate is not trusted")
        refused(bg(gateway, *https, "--cacert", pki.path("client-ca.pem")), 3, "not trusted")
        refused(
            bg(gateway, *https, "--cacert", pki.path("alice.key")), 2, "cannot use the CA certificates in"
        )
        refused(bg(gateway, *https, "--cacert", pki.path("missing.pem")), 2, "No such file")
    finally:
        front.stop()


def test_mutual_tls_with_a_client_certificate(gateway, pki):
    front = TLSFront(gateway.url, pki.server_ca, client_ca=pki.client_ca).start()
    try:
        https = ("acls", "list", "--url", front.url, "--cacert", pki.path("server-ca.pem"), *AS_ALICE)
        ok(bg(gateway, *https, "--cert", pki.path("alice.crt"), "--key", pki.path("alice.key")))
        ok(bg(gateway, *https, "--cert", pki.path("alice.pem")))
        ok(
            bg(
                gateway,
                *https,
                env={"BROKERGATE_CERT": pki.path("alice.crt"), "BROKERGATE_KEY": pki.path("alice.key")},
            )
        )
        refused(bg(gateway, *https), 3, "requires a client certificate")
        refused(bg(gateway, *https, "--key", pki.path("alice.key")), 2, "--key goes with --cert")
        refused(
            bg(gateway, *https, "--cert", pki.path("alice.crt"), "--key", pki.path("server-ca.pem")),
            2,
            "cannot use the client certificate",
        )
    finally:
        front.stop()
