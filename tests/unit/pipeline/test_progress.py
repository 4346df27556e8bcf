"""Progress lines from Spark's StreamingQueryProgress JSON: lag per source, late rows, idle reports."""

from pipeline import progress


def report(**kw):
    base = {
        "name": "aggregates", "batchId": 4, "timestamp": "2026-01-01T00:00:01.500Z", "numInputRows": 300,
        "processedRowsPerSecond": 250.0, "durationMs": {"triggerExecution": 1200},
        "eventTime": {"watermark": "2026-01-01T00:00:05.000Z"},
        "stateOperators": [{"numRowsTotal": 12, "numRowsDroppedByWatermark": 0}],
        "sources": [{
            "startOffset": {"events": {"0": 0, "1": 0}},
            "endOffset": {"events": {"0": 150, "1": 150}},
            "latestOffset": {"events": {"0": 400, "1": 150}},
        }],
        "sink": {"numOutputRows": 8},
    }
    base.update(kw)
    return base


def test_lag_sums_latest_minus_end_over_partitions():
    s = progress.summarize(report())
    assert s["lag"] == 250
    assert s["input_rows"] == 300 and s["output_rows"] == 8 and s["state_rows"] == 12
    assert s["end_offsets"] == {"events": {"0": 150, "1": 150}}


def test_offsets_given_as_json_text_and_a_partition_not_read_yet():
    r = report(sources=[{"endOffset": '{"events": {"0": 10}}', "latestOffset": '{"events": {"0": 10, "1": 7}}'}])
    assert progress.summarize(r)["lag"] == 7


def test_no_latest_offsets_means_no_lag_known():
    assert progress.lag({"endOffset": {"events": {"0": 3}}}) is None
    assert progress.summarize(report(sources=[{}]))["lag"] == 0


def test_line_names_late_rows_and_watermark():
    r = report(stateOperators=[{"numRowsTotal": 3, "numRowsDroppedByWatermark": 2}])
    line = progress.line(progress.summarize(r))
    assert line.startswith("[aggregates] batch 4: 300 rows in")
    assert "lag 250" in line and "watermark 2026-01-01T00:00:05.000Z" in line and "LATE ROWS DROPPED 2" in line


def test_epoch_seconds():
    assert progress.epoch_seconds("1970-01-01T00:00:01.500Z") == 1.5
