"""The gateway's own secrets for its backends: given in a setting, or in a file the setting names.

A deployment either puts a password in the environment (``BROKERGATE_REDIS_PASSWORD``) or mounts
it as a file (a Kubernetes Secret volume) and names the file (``BROKERGATE_REDIS_PASSWORD_FILE``);
``secret`` accepts either, never both, and ``read_secret_file`` reads one the same way for every
backend. Files are read when the adapters are built, before anything connects, so an unreadable or
empty one stops the start with a one-line ``ValueError`` naming the setting, never the secret.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

__all__ = ["read_secret_file", "secret"]


def read_secret_file(path: Path, *, setting: str) -> str:
    """The secret held in ``path``, without the line ending an editor or ``echo`` leaves after it.

    Raises ``ValueError`` naming ``setting`` when the file cannot be read or holds nothing.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ValueError(f"{setting}: cannot read {str(path)!r} ({reason})") from None
    value = text.rstrip("\r\n")
    if not value:
        raise ValueError(f"{setting}: {str(path)!r} is empty")
    return value


def secret(value: SecretStr | None, file: Path | None, *, setting: str) -> str | None:
    """The secret of ``setting`` (e.g. ``redis_password``), from the setting or from ``<setting>_file``.

    None when neither is set; ``ValueError`` when both are, since which one was meant is unknowable.
    """
    if value is not None and file is not None:
        raise ValueError(f"set {setting} or {setting}_file, not both")
    if file is not None:
        return read_secret_file(file, setting=f"{setting}_file")
    if value is None:
        return None
    text = value.get_secret_value()
    if not text:
        raise ValueError(f"{setting} is empty")
    return text
