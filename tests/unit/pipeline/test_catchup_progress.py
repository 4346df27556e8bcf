"""The catch-up job's progress line and the human printer's start line for catch-up mode."""

from pipeline.catchup import line
from pipeline.stream import printer


def test_a_chunk_line_says_what_is_left():
    event = {"event": "catch-up", "query": "dead-letters", "offsets_done": 1800, "offsets_per_second": 71.4,
             "records_left": 842, "open_ranges": {"0": ["186-1291@786", "1479-2280@1479"], "2": ["166-1145@766"]},
             "done": False}
    assert line(event) == ("[dead-letters catch-up] 1800 offsets of the gap processed, 71 offsets/s;"
                           " 3 ranges open, 842 records left")
    done = dict(event, records_left=0, open_ranges={}, done=True, offsets_per_second=None)
    assert line(done) == "[dead-letters catch-up] 1800 offsets of the gap processed; done"


def test_the_start_line_names_the_new_gap(capsys):
    printer(False)({"event": "started", "queries": ["dead-letters", "aggregates"], "checkpoint": "/c",
                    "startup_seconds": 9.5, "catch_up": {"query": "dead-letters", "starting_offsets": {"0": 120},
                                                         "new_gap": {"0": [70, 120]}, "records_left": 50,
                                                         "open_ranges": {"0": ["70-120@70"]}}})
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "[dead-letters catch-up] new gap 0: 70-120; 50 records left in open ranges {'0': ['70-120@70']}"
