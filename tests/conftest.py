"""The whole suite runs with a TMPDIR of its own, removed at the end (support/tmpdir_guard.py)."""

from tmpdir_guard import pytest_configure, pytest_terminal_summary

__all__ = ["pytest_configure", "pytest_terminal_summary"]
