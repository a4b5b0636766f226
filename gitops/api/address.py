"""Where the GitOps HTTP API listens: `DATA_DIR/api.json`, written by `trainops up`, read by
`trainops repo` (a file, so the CLI finds a server started with port 0 and its token)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["API_FILE", "ApiAddress", "base_url", "read_address", "remove_address", "write_address"]

API_FILE = "api.json"
"""`DATA_DIR/api.json`: `{"url": "http://127.0.0.1:PORT", "token": null | "…"}`, mode 0600."""


def base_url(host: str, port: int) -> str:
    """`http://host:port` for a bind address (IPv6 bracketed; every interface → loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


@dataclass(frozen=True)
class ApiAddress:
    url: str
    token: str | None = None


def write_address(data_dir: Path, url: str, token: str | None) -> Path:
    """Record where the API listens in `DATA_DIR/api.json` (atomically, mode 0600: it may
    hold the token). Returns the file's path."""
    path = Path(data_dir) / API_FILE
    body = json.dumps({"url": url, "token": token}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".api.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def read_address(data_dir: Path) -> ApiAddress | None:
    """The address `trainops up` recorded; None when there is none. ValueError for a file that
    is not `{"url": str, "token": str | null}`."""
    path = Path(data_dir) / API_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        raise ValueError(f"{path} is not valid JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("url"), str) or not doc["url"]:
        raise ValueError(f"{path} has no url")
    token = doc.get("token")
    if token is not None and not isinstance(token, str):
        raise ValueError(f"{path}: token is not a string")
    return ApiAddress(url=doc["url"], token=token or None)


def remove_address(data_dir: Path) -> None:
    """Forget the address (when the API stops), so clients do not try a dead one."""
    with contextlib.suppress(FileNotFoundError):
        (Path(data_dir) / API_FILE).unlink()
