"""Spark batch access to brokergate topics: the ``brokergate`` data source and the jobs built on it.

``datasource`` (the PySpark data source), ``export``, ``lag`` and ``stats`` (the
jobs, run with ``python -m spark_jobs <job>``). Nothing is imported here, so the
worker that schedules the jobs does not load Spark.
"""
