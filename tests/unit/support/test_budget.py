"""The time budget (tests/support/budget.py, tests/budget.toml): the check that fails a run, and the
committed file it holds the suite to."""

from tests.support import budget
from tests.support.budget import Budget

LONG, SHORT = "tests/e2e/test_long.py", "tests/unit/test_short.py"
BUDGET = Budget(total_seconds=1000, modules={LONG: 400.0, SHORT: 2.0})


def test_a_module_over_its_budget_by_more_than_the_margin_fails_naming_it_and_its_time():
    (problem,) = budget.overruns({LONG: 600.1, SHORT: 1.0}, BUDGET)  # 50 % of 400 s: at most 600 s
    assert problem.startswith(f"{LONG} took 600.1 s, over its budget of 400.0 s")
    assert "at most 600.0 s" in problem and "tests/budget.toml" in problem
    (problem,) = budget.overruns({SHORT: 62.1}, BUDGET)  # 60 s is the least margin: at most 62 s
    assert problem.startswith(f"{SHORT} took 62.1 s")


def test_a_module_without_an_entry_fails_with_the_line_to_add():
    problems = budget.overruns({"tests/e2e/test_new.py": 12.34, SHORT: 1.0}, BUDGET)
    assert problems == ['tests/e2e/test_new.py took 12.3 s and has no entry in tests/budget.toml '
                        '(add "tests/e2e/test_new.py" = 12.3, in the commit that adds the module)']


def test_within_the_margin_passes():
    assert budget.overruns({LONG: 600.0, SHORT: 62.0}, BUDGET) == []
    assert budget.overruns({}, BUDGET) == []


def test_the_entries_must_fit_the_total():
    assert budget.over_total(BUDGET) is None
    over = budget.over_total(Budget(total_seconds=401, modules=BUDGET.modules))
    assert over is not None and "add up to 402 s, over the total of 401 s" in over


def test_slowest_lists_a_run_longest_first_beside_the_entries():
    lines = budget.slowest({SHORT: 1.5, LONG: 420.0, "tests/e2e/test_new.py": 3.0}, BUDGET, n=2)
    assert lines == [f"   420.0 s  (budget  400.0 s)  {LONG}", "     3.0 s  (no entry)  tests/e2e/test_new.py"]
    assert budget.slowest({LONG: 1.0}, None) == [f"     1.0 s  {LONG}"]


def test_adopting_a_run_writes_its_times_keeping_the_header_and_the_other_entries():
    text = ('# why: [modules] holds\ntotal_seconds = 10\n\n[modules]\n"tests/b.py" = 1.0  # old\n'
            '"tests/c.py" = 5.0  # not measured yet\n"tests/gone.py" = 1.0\n')
    assert budget.with_times(text, {"tests/b.py": 2.0, "tests/a.py": 3.04}, {"tests/a.py", "tests/b.py", "tests/c.py"}) == (
        '# why: [modules] holds\ntotal_seconds = 10\n\n[modules]\n"tests/a.py" = 3.0\n"tests/b.py" = 2.0\n'
        '"tests/c.py" = 5.0  # not measured yet\n')


def test_the_committed_budget_has_every_test_module_and_fits_its_total():
    committed = budget.load()
    modules = budget.suite_modules()
    assert sorted(modules - committed.modules.keys()) == [], "test modules without an entry in tests/budget.toml"
    assert sorted(committed.modules.keys() - modules) == [], "entries in tests/budget.toml for no test module"
    assert budget.over_total(committed) is None
