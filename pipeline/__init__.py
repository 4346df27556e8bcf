"""A PySpark Structured Streaming pipeline on Flotilla, through Spark's own Kafka connector.

    generator (events.py, generator.py)  ->  raw topic
    stream.py   raw -> transform.check (parse, validate, enrich) -> dead letters  -> dead-letter topic
                                                                 -> aggregates    -> output topic
    batch.py    raw -> the same transform -> the same aggregates, for checking the stream
    results.py  reads the output topics the way their readers must (latest row per key)

`python -m pipeline --help` lists the commands; docs/pipeline.md explains the design.
"""
