"""A run directory written by two processes (the second resumed from a checkpoint) reads as one
history with the restart marked: no double-counted skips, the final loss of the process that
finished."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch

from sentinel import Sentinel, load_run
from sentinel.analyze import analyze
from sentinel.store.history import latest_history, supersede_events

BATCH = 16


def _process(run_dir, tiny_task, batches, *, resume=None, stop_after=None, first_batch=0):
    """One process of a raw guarded loop over ``batches`` (a list), optionally resumed from
    ``resume`` (a checkpoint: model, optimizer and sentinel state). Returns its checkpoint at
    ``stop_after`` steps (or None) and the losses it recorded by step."""
    Data, Net, mse, _ = tiny_task
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    checkpoint = None
    with Sentinel(model, opt, log_dir=str(run_dir), loss_fn=mse, tensorboard=False) as sen:
        if resume is not None:
            model.load_state_dict(resume["model"])
            opt.load_state_dict(resume["opt"])
            sen.load_state_dict(resume["sentinel"])
        for batch_idx, batch in enumerate(batches[first_batch:], start=first_batch):
            if not sen.begin_batch(batch, batch_idx):
                continue
            opt.zero_grad()
            loss = mse(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            if sen.step == stop_after:
                checkpoint = {"model": copy.deepcopy(model.state_dict()),
                              "opt": copy.deepcopy(opt.state_dict()),
                              "sentinel": copy.deepcopy(sen.state_dict()), "batch_idx": batch_idx}
    return checkpoint


def test_a_resumed_run_reads_as_one_history(tmp_path, tiny_task):
    Data, _, _, batches_at = tiny_task
    data = Data(n=BATCH * 100, poison=batches_at((60, 61), BATCH))
    batches = list(torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False))
    run = tmp_path / "run"
    # Process 1 runs all 100 batches (withholding the poisoned updates at 60 and 61);
    # process 2 resumes from its checkpoint at step 40 and is stopped after 30 more batches.
    ckpt = _process(run, tiny_task, batches, stop_after=40)
    first = load_run(run)
    assert first.restarts == [] and first.steps.index[-1] == 99
    _process(run, tiny_task, batches[:70], resume=ckpt, first_batch=ckpt["batch_idx"] + 1)

    loaded = load_run(run)
    assert loaded.restarts == [40]
    assert list(loaded.steps.index) == list(range(0, 68))  # 2 poisoned batches dropped by the skip list
    kinds = list(loaded.events["kind"])
    assert kinds.count("skip_step") == 0  # process 1's withheld updates at 60-61 were replaced
    assert kinds.count("skip") == 2  # process 2 dropped each listed batch once

    (report,) = analyze(run).runs
    restarts = [i for i in report.incidents if i.kind == "restart"]
    assert [(i.step, i.severity.value) for i in restarts] == [(40, "info")]
    assert report.last_step == 67 and report.final_loss == loaded.steps["loss"].iloc[-1]
    skips = [i for i in report.incidents if i.kind in ("skip", "skipped_update")]
    assert len(skips) == 1, skips
    assert report.verdict.value == "healthy"


def test_latest_history_keeps_the_last_writers_steps():
    steps = np.array([0, 1, 2, 3, 4, 2, 3, 5, 6, 0, 1])
    keep, restarts = latest_history(steps)
    assert steps[keep].tolist() == [0, 1] and restarts == [0, 2]
    keep, restarts = latest_history(np.arange(5))
    assert keep.all() and restarts == []


def test_events_before_a_later_start_are_superseded_from_its_step():
    events = pd.DataFrame({"step": [0, 10, 50, 60, 40, 45, 60],
                           "kind": ["start", "spike", "skip_step", "rollback", "start", "skip", "skip"]})
    kept, restarts = supersede_events(events)
    assert restarts == [40]
    assert list(zip(kept["step"], kept["kind"])) == [(0, "start"), (10, "spike"), (40, "start"),
                                                      (45, "skip"), (60, "skip")]
