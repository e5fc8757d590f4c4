"""Headless chromium (Debian's ``chromium``) for the tests that look at a page as a browser
renders it: the run report (tests/integration/test_report.py) and the docs site
(tests/docsite/). ``hack/test`` installs chromium when it is missing."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(*args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium")
    assert binary, "chromium is not installed: hack/test installs it (as root, or with sudo)"
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=90, check=False)


def screenshot(page: str, shot: Path, width: int, height: int) -> None:
    """A PNG of ``page`` in a window of that size, checked to be one and not blank."""
    taken = chromium(f"--screenshot={shot}", f"--window-size={width},{height}", "--hide-scrollbars", page)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (width, height)
    assert shot.stat().st_size > 50_000, "a blank page"


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list = []
        self.text: list = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)
