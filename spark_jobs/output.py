"""Where the lag and stats jobs append their rows: one Parquet or CSV file per run."""

from __future__ import annotations

import argparse
from typing import Literal, get_args

from pyspark.sql import DataFrame

OutputFormat = Literal["parquet", "csv"]


def add_output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--output", help=f"append {what} to this directory")
    parser.add_argument("--format", choices=get_args(OutputFormat), default="parquet", help="of --output")


def append_table(frame: DataFrame, output: str, fmt: OutputFormat) -> None:
    """Append ``frame`` to ``output`` (any path Spark writes to) as one file, CSV with a header."""
    writer = frame.coalesce(1).write.mode("append")
    if fmt == "csv":
        writer.option("header", "true").csv(output)
    else:
        writer.parquet(output)
