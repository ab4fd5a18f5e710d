"""The corpus of bad inputs (leoguard.badinputs): every case issue 27 found gets one clear line (or,
for odd names, runs and writes only under out/), and the whole corpus is >= 98 % clear."""

from pathlib import Path

import pytest

from leoguard.badinputs import CASES, run_all, run_case

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return run_all(tmp_path_factory.mktemp("corpus"))


def test_the_corpus_holds_issue_27s_cases_and_a_fresh_round_of_at_least_100():
    assert sum(c.issue for c in CASES) >= 33
    assert sum(not c.issue for c in CASES) >= 100


def test_every_case_issue_27_found_is_clear(outcomes):
    bad = [(o.case.what, o.status, o.message) for o in outcomes if o.case.issue and not o.clear]
    assert bad == []


def test_the_corpus_is_at_least_98_percent_clear(outcomes):
    bad = [(o.case.what, o.status, o.message) for o in outcomes if not o.clear]
    assert len(bad) <= 0.02 * len(outcomes), bad


def test_docs_errors_md_lists_every_case():
    text = (ROOT / "docs" / "errors.md").read_text()
    assert all(f"| {c.what}" in text for c in CASES)


def test_the_judge_fails_a_traceback_and_a_silent_success(tmp_path):
    from leoguard.badinputs import Case

    # A scenario that is fine: the run succeeds, so as a bad input it is not "clear".
    ok = run_case(Case("valid", ["places", "find", "London"], "London"), tmp_path / "a")
    assert ok.status == 0 and not ok.clear
    # An error message that does not name what the case says must be named.
    wrong = run_case(Case("unnamed", ["run", "missing.toml"], "seed"), tmp_path / "b")
    assert wrong.status == 2 and not wrong.clear


def test_a_bad_sql_query_is_one_line(tmp_path):
    from leoguard.badinputs import Case
    from leoguard.store import ResultStore

    with ResultStore(tmp_path / "s" / "store"):
        pass
    o = run_case(Case("bad SQL", ["results", "query", "SELEC nonsense", "--store", "store"], "query"), tmp_path / "s")
    assert o.clear, o.message
