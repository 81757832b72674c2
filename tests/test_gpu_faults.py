"""A real illegal-address fault on the GPU, in the middle of a sweep (the CPU twin is test_faults)."""
import pytest

from tunesearch.db import Store
from tunesearch.sweep import SweepSettings, run_sweep
from tunesearch.variants import spread_variants
from tunesearch.worker import FAULTS_ENV


@pytest.mark.gpu
def test_illegal_address_is_a_failed_trial_and_the_sweep_goes_on(tmp_path, monkeypatch):
    K, N = 4096, 4096
    poison = spread_variants(1, N, K, 128, device=0)[1].id
    monkeypatch.setenv(FAULTS_ENV, f"{poison}:illegal")
    store = Store(f"sqlite:///{tmp_path}/g.db")
    # one key: on sm_90 a sweep times each key in both layouts by default, and the poisoned variant, of a
    # family that reads both, then faults once in each (two restarts)
    result = run_sweep(store, SweepSettings(shapes=[(K, N)], ms=[1], trials=6, layouts=("base",)), device=0)
    assert result.status == "done" and result.worker_restarts == 1
    trials = {t.variant_id: t for t in store.trials()}
    assert len(trials) == 6
    bad = trials[poison]
    print(f"poisoned trial: {bad.status}: {bad.error}")
    assert bad.status == "failed" and "illegal memory access" in bad.error and "worker restarted" in bad.error
    others = [t for vid, t in trials.items() if vid != poison]
    assert all(t.status == "ok" and t.us > 0 for t in others), [(t.variant_id, t.error) for t in others]
