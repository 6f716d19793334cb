"""Energon's ``analyze-debug`` command: not available in stoker (see its help for what to use)."""

from __future__ import annotations

from stoker.cli.energon_tools import analyze_debug_command as command

__all__ = ["command"]
