"""The order and grouping `make test` hands pytest-xdist (tests/support/parallel.py)."""

from dataclasses import dataclass, field

from tests.support import parallel


@dataclass
class Item:
    nodeid: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name):
        return name if name in self.markers else None


def test_longest_modules_start_first_and_keep_their_own_order():
    items = [Item("tests/a.py::t1"), Item("tests/b.py::t1"), Item("tests/a.py::t2"), Item("tests/c.py::t1")]
    seconds = {"tests/a.py": 10, "tests/b.py": 300}  # c.py unknown: assumed UNKNOWN_MODULE_SECONDS
    ordered = [i.nodeid for i in parallel.longest_first(items, seconds)]
    assert ordered == ["tests/b.py::t1", "tests/c.py::t1", "tests/a.py::t1", "tests/a.py::t2"]


def test_every_real_node_module_is_one_group_timed_as_their_sum():
    items = [Item("tests/pods.py::t", {"kube_node"}), Item("tests/long.py::t"),
             Item("tests/incluster.py::t", {"kube_node"})]
    seconds = {"tests/pods.py": 200, "tests/incluster.py": 200, "tests/long.py": 300}
    ordered = parallel.longest_first(items, seconds)
    assert [parallel.group_of(i) for i in ordered] == [parallel.REAL_NODE_GROUP] * 2 + ["tests/long.py"]
