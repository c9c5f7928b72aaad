"""The console tools' shared options: where credentials come from, what is refused, the TLS files."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from service.cli.common import Credentials, ToolError, connect, credentials
from service.cli.tools import add_commands
from service.client import GatewayClient, tls_context


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="brokergate")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["topics", "list", *argv])


def creds(
    *argv: str, env: dict[str, str] | None = None, stdin: str = "", ask: Callable[[str], str] | None = None
) -> Credentials:
    return credentials(parse(*argv), env or {}, stdin=io.StringIO(stdin), ask=ask)


def test_nothing_given_is_no_credentials():
    assert creds() == Credentials()
    assert str(creds()) == "no credentials"


def test_the_password_comes_from_the_flag_stdin_the_environment_or_the_terminal():
    assert creds("--user", "al", "--password", "p1") == Credentials("al", "p1")
    assert creds("--user", "al", "--password-stdin", stdin="p 2\r\nrest\n") == Credentials("al", "p 2")
    assert creds("--user", "al", env={"BROKERGATE_PASSWORD": "p3"}) == Credentials("al", "p3")
    assert creds(env={"BROKERGATE_USER": "al", "BROKERGATE_PASSWORD": "p3"}) == Credentials("al", "p3")
    asked: list[str] = []

    def at_terminal(prompt: str) -> str:
        asked.append(prompt)
        return "p4"

    assert creds("--user", "al", ask=at_terminal) == Credentials("al", "p4")
    assert asked == ["Password for al: "]
    assert creds("--user", "al", "--password", "p1", ask=at_terminal) == Credentials("al", "p1")
    assert creds("--token", "t", ask=at_terminal) == Credentials(token="t")
    assert asked == ["Password for al: "]  # asked only when nothing else gives the password
    # a flag wins over the environment
    assert creds(
        "--user", "bo", "--password", "p5", env={"BROKERGATE_USER": "al", "BROKERGATE_PASSWORD": "x"}
    ) == (Credentials("bo", "p5"))
    assert str(Credentials("al", "p")) == "user 'al'"


def test_a_token_comes_from_the_flag_a_file_or_the_environment(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("  abc.def.ghi\n")
    assert creds("--token", "t1") == Credentials(token="t1")
    assert creds("--token-file", str(token_file)) == Credentials(token="abc.def.ghi")
    assert creds(env={"BROKERGATE_TOKEN": "t2"}) == Credentials(token="t2")
    # one kind of flag sets aside the environment's other kind
    assert creds("--token", "t1", env={"BROKERGATE_USER": "al"}) == Credentials(token="t1")
    assert creds("--user", "al", "--password", "p", env={"BROKERGATE_TOKEN": "t2"}) == Credentials("al", "p")
    assert str(Credentials(token="t")) == "a Bearer token"


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (["--user", "al", "--password", "p", "--password-stdin"], {}, "give the password once"),
        (["--token", "t", "--token-file", "f"], {}, "give the token once"),
        (["--user", "al", "--token", "t"], {}, "give one"),
        (["--password", "p"], {}, "go with --user"),
        (["--password-stdin"], {}, "go with --user"),
        ([], {"BROKERGATE_USER": "al", "BROKERGATE_TOKEN": "t"}, "both set"),
        (["--user", "a:b", "--password", "p"], {}, "has no ':'"),
        (["--user", "", "--password", "p"], {}, "is not empty"),
        (["--user", "al"], {}, "no terminal to ask it at"),
        (["--user", "al", "--password-stdin"], {}, "stdin ended"),
        (["--token", ""], {}, "the token is empty"),
        (["--token", "a b"], {}, "no HTTP header carries it"),
        ([], {"BROKERGATE_TOKEN": "caf\u00e9"}, "no HTTP header carries it"),
        (["--token-file", "/nonexistent/token"], {}, "cannot read --token-file"),
    ],
)
def test_what_is_refused_as_bad_usage(argv, env, needle):
    with pytest.raises(ToolError) as refused:
        creds(*argv, env=env)
    assert refused.value.status == 2 and needle in str(refused.value)


def test_tls_files_are_checked_when_the_client_is_made(tmp_path: Path):
    ca = trustme.CA()
    leaf = ca.issue_cert("client.test")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "c.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "c.key"))
    trustme.CA().issue_cert("other.test").private_key_pem.write_to_path(str(tmp_path / "other.key"))

    assert tls_context() is True and tls_context(False) is False
    context = tls_context(str(tmp_path / "ca.pem"), (str(tmp_path / "c.crt"), str(tmp_path / "c.key")))
    assert not isinstance(context, bool) and context.cert_store_stats()["x509_ca"] == 1
    with pytest.raises(ValueError, match=r"CA certificates in '.*missing.pem': No such file"):
        tls_context(str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="cannot use the CA certificates"):
        tls_context(str(tmp_path / "c.key"))
    with pytest.raises(ValueError, match=r"client certificate '.*c.crt' with the key '.*other.key'"):
        tls_context(True, (str(tmp_path / "c.crt"), str(tmp_path / "other.key")))

    args = parse("--cacert", str(tmp_path / "missing.pem"))
    with pytest.raises(ToolError) as refused:
        connect(args, Credentials(), {})
    assert refused.value.status == 2 and "missing.pem" in str(refused.value)
    with pytest.raises(ToolError, match="--key goes with --cert"):
        connect(parse(), Credentials(), {"BROKERGATE_KEY": str(tmp_path / "c.key")})
    with connect(parse(), Credentials(), {"BROKERGATE_URL": "http://127.0.0.1:9/"}) as client:
        assert client.url == "http://127.0.0.1:9"


def test_a_client_takes_a_password_or_a_token_not_both():
    with pytest.raises(ValueError, match="give one"):
        GatewayClient("http://127.0.0.1:9", auth=("a", "p"), token="t")
