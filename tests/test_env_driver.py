"""The driver release is read from /proc/driver/nvidia/version, whose wording differs by module."""

from __future__ import annotations

import pytest

from fixbits.env import parse_driver_release


@pytest.mark.parametrize(
    ("line", "release"),
    [
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep  4 2025", "580.95.05"),
        # the H200 machines run the open modules: 'Module for x86_64' once recorded the driver as 'for'
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build", "580.159.04"),
        ("no version here", None),
    ],
)
def test_release_is_the_dotted_number(line: str, release: str | None) -> None:
    assert parse_driver_release(line) == release
