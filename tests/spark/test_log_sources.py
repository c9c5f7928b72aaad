"""The log sources the Spark planner asks (``spark_jobs.logs.open_log``), without Spark: what a
source opened before a topic was created says of it."""

from __future__ import annotations

from spark_jobs.logs import open_log
from tests.spark.helpers import TestLog


def test_a_source_sees_topics_and_partitions_created_after_it_opened(log: TestLog) -> None:
    source = open_log(log.url)
    try:
        before = log.create_topic(1)
        assert source.partition_count(before) == 1  # opens the source (its first metadata)
        later = log.create_topic(3)  # created after: a stream's planner keeps its source open
        assert later in source.topics()
        assert source.partition_count(later) == 3
    finally:
        source.close()
