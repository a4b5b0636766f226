"""Normalization of kubectl output: what legitimately differs between two servers (or two runs)
is replaced by a placeholder, everything else is compared as printed.

Replaced: the namespace name, uids, timestamps (managedFields times included), resourceVersions,
generateName suffixes (and the service-account token volume's suffix), server addresses and
ports, cluster IPs, PEM certificates (each server has its own CA), and the AGE-like columns of tables (whose width also moves the columns
after them, so table rows are re-joined with a fixed separator). Pure functions over strings.
"""

from __future__ import annotations

import re

__all__ = ["normalize", "sort_causes"]

_UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
_RV = re.compile(r"""(resourceVersion(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?)\d+""")
_SERVER = re.compile(r"https?://(?:127\.0\.0\.1|localhost|\[::1\]):\d+")
_ADDR = re.compile(r"\b127\.0\.0\.1:\d+")
_CLUSTER_IP = re.compile(r"\b10\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
_GENERATE_NAME = re.compile(r"""["']?generateName["']?\s*:\s*["']?([a-z0-9.\-]+)""")
# A PEM block as printed in YAML (lines indented) or JSON (`\n` escapes).
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)
_TOKEN_VOLUME = re.compile(r"\bkube-api-access-[a-z0-9]{5}\b")
_SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"
_HEADER = re.compile(r"^[A-Z][A-Z0-9_()\-]*(?: [A-Z][A-Z0-9_()\-]*)?(?: {2,}\S.*)?$")
_CELLS = re.compile(r" {2,}")
_AGE_HEADER = re.compile(r"(?<![A-Z])(?:AGE|LAST SEEN|CREATED AT)(?![A-Z])")


def normalize(text: str, namespace: str, generate_names: tuple[str, ...] = ()) -> str:
    """`text` with run-specific values replaced (see the module docstring).

    `generate_names` are extra generateName prefixes to look for besides those `text` shows.
    """
    if namespace:
        text = text.replace(namespace, "<ns>")
    text = _PEM.sub("<certificate>", text)
    prefixes = set(generate_names) | set(_GENERATE_NAME.findall(text))
    for prefix in sorted(prefixes, key=len, reverse=True):
        text = re.sub(re.escape(prefix) + _SUFFIX + r"\b", prefix + "<sfx>", text)
    text = _UID.sub("<uid>", text)
    text = _TIME.sub("<time>", text)
    text = _RV.sub(r"\g<1><rv>", text)
    text = _SERVER.sub("<server>", text)
    text = _ADDR.sub("<addr>", text)
    text = _CLUSTER_IP.sub("<cluster-ip>", text)
    text = _TOKEN_VOLUME.sub("kube-api-access-<sfx>", text)
    return _normalize_tables(text)


def _normalize_tables(text: str) -> str:
    """Table blocks (an upper-case header, rows up to a blank line): the cell under a date-like
    column's header (kubectl aligns cells under their header) becomes `<age>`, and runs of
    spaces are shortened to three, so a wider age does not move the columns after it."""
    out: list[str] = []
    ages: list[int] | None = None
    for line in text.split("\n"):
        if not line.strip():
            ages = None
            out.append(line)
            continue
        if ages is None and _HEADER.match(line):
            found = [m.start() for m in _AGE_HEADER.finditer(line)]
            if found or _CELLS.search(line.strip()):
                ages = found
                out.append(_CELLS.sub("   ", line.strip()))
                continue
        if ages is not None:
            for offset in sorted(ages, reverse=True):
                if offset < len(line) and not line[offset].isspace():
                    end = line.find(" ", offset)
                    end = len(line) if end < 0 else end
                    line = line[:offset] + "<age>" + line[end:]
            out.append(_CELLS.sub("   ", line.strip()))
            continue
        out.append(line)
    return "\n".join(out)


def sort_causes(text: str) -> str:
    """`text` with each run of kubectl's `* cause` lines (an Invalid error's causes) sorted,
    except a trailing `* <nil>: …` line (the "some validation rules were not checked" cause,
    which both servers put last)."""
    out: list[str] = []
    run: list[str] = []
    for line in [*text.split("\n"), None]:
        if line is not None and line.startswith("* ") and not line.startswith("* <nil>"):
            run.append(line)
            continue
        out.extend(sorted(run))
        run = []
        if line is not None:
            out.append(line)
    return "\n".join(out)
