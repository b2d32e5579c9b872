"""Typed state and records shared by the graph and the tools."""

from perfscout.state.records import RESULT_COLUMNS, CompressionResult, Evidence, Finding

__all__ = ["RESULT_COLUMNS", "CompressionResult", "Evidence", "Finding"]
