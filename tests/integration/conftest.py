"""What the integration tests of the route table share: the users of a gateway with ACLs on."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.security.users import add_user

USERS = {"alice": "alice-pw", "admin": "admin-pw", "bob": "bob-pw"}


@pytest.fixture(scope="module")
def acl_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A credentials file of ``USERS`` (hashed once a module: argon2 is slow on purpose)."""
    path = tmp_path_factory.mktemp("users") / "users"
    for name, password in USERS.items():
        add_user(path, name, password)
    return path
