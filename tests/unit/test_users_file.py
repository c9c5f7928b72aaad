"""The HTTP Basic credentials file: hashes only, atomic and private, read again when it changes."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import pytest

from service.security import users as users_mod
from service.security.users import (
    UsersFile,
    UsersFileError,
    Verifier,
    add_user,
    read_users,
    remove_user,
)


def test_the_file_holds_argon2_hashes_only_and_is_private(tmp_path):
    path = tmp_path / "users"
    assert add_user(path, "alice", "s3cret") is True
    assert add_user(path, "alice", "changed") is False  # a new password, not a new user
    text = path.read_text()
    assert "s3cret" not in text and "changed" not in text
    assert text.splitlines()[0] == "# brokergate users file, format 1"
    assert text.splitlines()[1].startswith("alice:$argon2id$")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert remove_user(path, "alice") is True and remove_user(path, "alice") is False
    assert read_users(path) == {}


@pytest.mark.parametrize("name", ["", "a:b", " padded", "tab\there", "x" * 256])
def test_bad_names_are_refused(tmp_path, name):
    with pytest.raises(UsersFileError):
        add_user(tmp_path / "users", name, "pw")


def test_a_malformed_file_names_its_line(tmp_path):
    path = tmp_path / "users"
    path.write_text("# comment\nalice:plaintext\n")
    with pytest.raises(UsersFileError, match=":2:"):
        read_users(path)


def test_verify_remembers_good_passwords_only_until_the_file_changes(tmp_path, monkeypatch):
    path = tmp_path / "users"
    add_user(path, "alice", "pw")
    users = UsersFile(path)
    assert users.remembered("alice", "pw") is False  # never checked: must be hashed
    assert users.remembered("nobody", "pw") is False  # no such user: hashed all the same
    assert users.verify("alice", "wrong") is False
    assert users.remembered("alice", "wrong") is False  # a wrong password is never remembered
    assert users.verify("alice", "pw") is True
    assert users.remembered("alice", "pw") is True
    monkeypatch.setattr(users_mod, "_RELOAD_EVERY_S", 0.0)
    add_user(path, "alice", "new")
    assert users.remembered("alice", "pw") is False  # the user's line changed: checked again
    assert users.verify("alice", "pw") is False and users.verify("alice", "new") is True
    remove_user(path, "alice")
    assert users.remembered("alice", "new") is False
    assert users.verify("alice", "new") is False


def test_a_file_edited_badly_keeps_the_last_good_users(tmp_path, monkeypatch):
    path = tmp_path / "users"
    add_user(path, "alice", "pw")
    users = UsersFile(path)
    assert users.verify("alice", "pw")
    monkeypatch.setattr(users_mod, "_RELOAD_EVERY_S", 0.0)
    path.write_text("garbage\n")
    assert users.remembered("alice", "pw") is True


async def test_the_verifier_hashes_in_threads_a_few_at_a_time(tmp_path):
    path = tmp_path / "users"
    add_user(path, "alice", "pw")
    verifier = Verifier(UsersFile(path), concurrency=2)
    start = time.perf_counter()
    results = await asyncio.gather(*(verifier.check("alice", f"guess{i}") for i in range(4)))
    assert results == [False] * 4
    ticks = 0

    async def beat():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(beat())
    assert await verifier.check("alice", "pw") is True  # hashed in a thread: the loop kept beating
    task.cancel()
    assert ticks >= 2, (ticks, time.perf_counter() - start)
    assert verifier.users.remembered("alice", "pw") is True
