"""Which connector jars the pipeline adds to Spark's class path: only those PySpark lacks."""

import pytest

from pipeline.spark_env import _artifact


@pytest.mark.parametrize("jar, artifact", [
    ("kafka-clients-3.4.1.jar", "kafka-clients"),
    ("spark-sql-kafka-0-10_2.12-3.5.7.jar", "spark-sql-kafka-0-10_2.12"),
    ("spark-tags_2.12-3.5.7.jar", "spark-tags_2.12"),
    ("zstd-jni-1.5.5-4.jar", "zstd-jni"),
    ("commons-pool2-2.11.1.jar", "commons-pool2"),
    ("log4j-slf4j2-impl-2.20.0.jar", "log4j-slf4j2-impl"),
    ("slf4j-api-1.7.36.jar", "slf4j-api"),
])
def test_artifact_name_without_version(jar, artifact):
    assert _artifact(jar) == artifact
