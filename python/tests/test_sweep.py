"""Sweeps into the result store: parallel, resumable, a failing run does not sink the rest."""

from leoguard.scenario import from_dict
from leoguard.store import ResultStore
from leoguard.sweep import SweepRun, run_sweep


def chain(seed: int, loss: float) -> dict:
    return {
        "name": f"sweep-{seed}-{loss}",
        "seed": seed,
        "duration_s": 1.0,
        "topology": {"kind": "chain", "hops": 2, "rate_mbps": 10, "delay_ms": 2,
                     "loss": {"model": "bernoulli", "p": loss}, "loss_on": "all"},
        "flows": [{"kind": "cbr", "src": "n0", "dst": "n2", "rate_mbps": 1, "size": 500}],
    }  # fmt: skip


def test_a_sweep_runs_in_parallel_and_a_second_time_skips_everything(tmp_path):
    runs = [
        SweepRun(from_dict(chain(seed, loss)), scheme="none", pair="n0-n2",
                 metrics=lambda r: {"loss": r.flows["endpoint_loss"][0]})
        for seed in (1, 2) for loss in (0.0, 0.05)
    ]  # fmt: skip
    seen = []
    with ResultStore(tmp_path) as st:
        rep = run_sweep(runs, st, workers=2, progress=lambda d, t, k: seen.append((d, t)))
        assert sorted(rep.ran) == sorted(r.key for r in runs) and not rep.skipped and not rep.failed
        assert sorted(seen) == [(1, 4), (2, 4), (3, 4), (4, 4)]
        assert len(st.runs()) == 4
        losses = st.query("SELECT CAST(json_extract(metrics, '$.loss') AS DOUBLE) AS l FROM runs")["l"].to_list()
        assert sum(1 for x in losses if x == 0.0) == 2 and sum(1 for x in losses if x > 0.01) == 2
        again = run_sweep(runs, st, workers=2)
        assert not again.ran and sorted(again.skipped) == sorted(r.key for r in runs)


def test_a_failing_run_is_reported_and_the_others_are_stored(tmp_path, monkeypatch):
    import leoguard.sweep as sweep
    from leoguard.errors import LeoguardError

    good, bad = SweepRun(from_dict(chain(1, 0.0))), SweepRun(from_dict(chain(2, 0.0)))
    real = sweep.simulate

    def flaky(sc):
        if sc.seed == 2:
            raise LeoguardError("trace file vanished")
        return real(sc)

    monkeypatch.setattr(sweep, "simulate", flaky)
    with ResultStore(tmp_path) as st:
        rep = run_sweep([good, bad], st, workers=1)
        assert rep.ran == [good.key]
        assert rep.failed == {bad.key: "trace file vanished"}
        assert st.has(good.key) and not st.has(bad.key)
