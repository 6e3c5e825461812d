"""The loss found by its name when no column is called loss, and W&B chart exports.

Logs name the training loss in many ways (``Loss/train`` in the PyTorch TensorBoard tutorial,
``train_loss_epoch`` from Lightning's epoch aggregate, ``total_loss`` beside its components,
``<run> - train/loss`` in a W&B chart export): each is read as the loss, the choice said once,
and a choice between equals left to ``--loss-col``.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
from click.testing import CliRunner

from sentinel import metrics
from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import LoadOptions, wandb_export
from sentinel.analyze.loaders.keys import infer_loss_column, is_regulariser, looks_like_loss, loss_column
from sentinel.cli.main import main


@pytest.mark.parametrize("columns, chosen", [
    (["Loss/train", "Loss/test"], "Loss/train"),
    (["train_loss_epoch", "val_loss"], "train_loss_epoch"),
    (["train/loss_step", "train/loss_epoch"], "train/loss_step"),  # a step's value before an epoch's
    (["losses", "validation/losses"], "losses"),
    (["total_loss", "loss_cls", "loss_bbox"], "total_loss"),
    (["trainingLoss", "validationLoss"], "trainingLoss"),
    (["nll_loss", "eval_nll_loss", "loss_scale"], "nll_loss"),
    (["smoothed_loss", "raw loss"], "raw loss"),
    (["run - train/loss", "run - train/loss__MIN", "run - train/loss__MAX"], "run - train/loss"),
    (["loss_ce", "loss_kl"], None),  # two components and no total: the user's choice
    # icefall's MetricsTracker: tot_ its running total over recent batches (a recipe that logs it summed
    # over 60 steps drew a sawtooth of x137 "spikes"), current_ the batch's own
    (["train/tot_loss", "train/current_loss", "train/tot_simple_loss", "train/current_simple_loss",
      "train/valid_loss"], "train/current_loss"),
    (["tot_loss", "lm_loss", "ds_loss"], "tot_loss"),  # MiniLLM's: the total over its terms
    # a text recogniser's "Totalloss:51.620 CTCloss: 51.392 L2loss: 0.228": the total glued to its loss word
    (["Totalloss", "CTCloss", "L2loss"], "Totalloss"),
    (["trainloss", "valloss"], "trainloss"),
    (["loss_scale", "loss_weight", "best_loss", "test_loss", "lr"], None),
    (["iteration", "loss_jump_iteration", "loss_time_ms"], None),  # where and when, not a loss
    (["accuracy", "lr"], None),
])
def test_infer_loss_column(columns, chosen):
    assert infer_loss_column(columns) == chosen


def test_an_alias_wins_and_a_named_column_is_taken_as_is():
    assert loss_column(["Loss/train", "train_loss"]) == ("train_loss", False)
    assert loss_column(["Loss/train", "Loss/test"], "Loss/test") == ("Loss/test", False)
    with pytest.raises(ValueError, match="column 'nope' not found"):
        loss_column(["Loss/train"], "nope")
    assert not looks_like_loss("amp/loss_scale") and looks_like_loss("train/lm_loss")


def _spiky(n: int = 120, at: int = 80) -> list[float]:
    return [3.0 - i / 100 + (0.01 if i % 2 else 0.0) + (6.0 if i == at else 0.0) for i in range(n)]


def _analyze(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    return result.exit_code, json.loads(result.output)


def test_csv_with_loss_slash_train_is_read_and_the_choice_said(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("step,Loss/train,Loss/test\n" + "".join(
        f"{i},{v},{2.5 if i % 10 == 0 else ''}\n" for i, v in enumerate(_spiky())), encoding="utf-8")
    (run,) = discover_runs(path)
    # pandas 2's parsers read some decimals 1 ulp off (2.74 -> 2.7399999999999998); pandas 3 exactly
    assert run.steps[metrics.LOSS].tolist() == pytest.approx(_spiky(), rel=1e-15, abs=0)
    assert run.steps["loss/test"].count() == 12
    assert run.warnings == ["metrics.csv: loss read from 'Loss/train' (no column is named loss; "
                            "--loss-col picks another)"]
    code, report = _analyze(str(path))
    assert code == 0
    assert [i["step"] for i in report["runs"][0]["incidents"]] == [80]
    code, report = _analyze(str(path), "--loss-col", "Loss/test")
    assert code == 0 and report["runs"][0]["final_loss"] == 2.5
    assert not any("loss read from" in w for w in report["runs"][0]["warnings"])


def test_jsonl_total_loss_beside_its_components(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"iteration": i, "total_loss": v, "loss_cls": v / 2, "loss_box": v / 2,
                                        "lr": 0.01}) + "\n" for i, v in enumerate(_spiky())), encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.steps[metrics.LOSS].tolist() == _spiky()
    assert "loss_cls" in run.steps.columns and run.steps[metrics.LR].eq(0.01).all()


def test_two_equal_candidates_name_the_option(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss_ce,loss_kl\n" + "".join(f"{i},2.0,0.1\n" for i in range(20)), encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.output == (f"Error: {path}: a table with a step column, 'step', but no single loss "
                             "column among: loss_ce, loss_kl; name it with --loss-col <column>\n")
    code, report = _analyze(str(path), "--loss-col", "loss_ce")
    assert code == 0 and report["runs"][0]["final_loss"] == 2.0


@pytest.mark.parametrize("name, header, row", [
    ("train_loss.csv", "step,value", "{i},{v}"),
    ("Loss_train.csv", "Step,Value,timestamp", "{i},{v},1733400000.5"),
    ("loss.tsv", "step\tvalue", "{i}\t{v}"),
    ("train_loss.csv", ",step,value,timestamp", "{i},{i}.0,{v},2024-05-01 10:40:00"),  # Neptune's values, to_csv
    ("loss.csv", "step,value,timestamp,epoch", "{i},{v},1714560000310,0"),  # Comet's download
    ("loss_metric.csv", ",idx,step,value,epoch,time", "{i},{i},{i},{v},0,2024-05-01 10:40:00"),  # Aim's dataframe
])
def test_a_metric_file_of_step_and_value_named_a_loss_is_read_as_the_loss(tmp_path, name, header, row):
    """One metric a file (a per-metric export): its name alone says the values are the loss."""
    path = tmp_path / name
    path.write_text(header + "\n" + "".join(row.format(i=i, v=v) + "\n" for i, v in enumerate(_spiky())),
                    encoding="utf-8")
    code, report = _analyze(str(path))
    assert code == 0
    (run,) = report["runs"]
    assert run["final_loss"] == _spiky()[-1] and run["steps"] == 120
    assert f"{name}: loss read from " in " ".join(run["warnings"])
    assert [i["step"] for i in run["incidents"] if i["kind"] in ("loss_spike", "outlier_batch")] == [80]


@pytest.mark.parametrize("name, header", [("lr.csv", "step,value"), ("val_loss.csv", "step,value"),
                                          ("train_loss.csv", "step,value,acc")])
def test_a_metric_file_that_is_no_training_loss_still_asks_for_the_column(tmp_path, name, header):
    path = tmp_path / name
    path.write_text(header + "\n" + "".join(f"{i},{v}" + (",0.5" if "acc" in header else "") + "\n"
                                            for i, v in enumerate(_spiky())), encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert "no single loss column among" in result.output and "--loss-col" in result.output


def test_lightning_run_logging_loss_slash_train(tmp_path):
    """A real Trainer with CSVLogger and ``self.log("Loss/train", ...)``: read as the loss."""
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("Loss/train", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    logger = CSVLogger(str(tmp_path), name="logs")
    trainer = L.Trainer(max_epochs=2, logger=logger, log_every_n_steps=1, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False, accelerator="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=4))
    (run,) = discover_runs(logger.log_dir)
    assert run.source == "lightning_csv"
    assert run.steps[metrics.LOSS].count() == 32
    assert run.warnings == ["metrics.csv: loss read from 'Loss/train' (no column is named loss; "
                            "--loss-col picks another)"]


def _chart_export(path, runs: dict[str, list[float]], x_axis: str = "Step") -> None:
    """A chart exported from the W&B web app: the x axis, then per run the value and its bucket
    range, an empty cell where that run has no step."""
    header = [x_axis] + [f"{run} - train/loss{stat}" for run in runs for stat in ("", "__MIN", "__MAX")]
    rows = [",".join(f'"{h}"' for h in header)]
    for step in range(max(len(v) for v in runs.values())):
        cells = [str(step)]
        for values in runs.values():
            cells += [str(values[step])] * 3 if step < len(values) else [""] * 3
        rows.append(",".join(cells))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_wandb_chart_export_with_two_runs(tmp_path):
    path = tmp_path / "wandb_export_2026-12-03T10_00_00.csv"
    healthy = [3.0 - i / 100 for i in range(120)]
    _chart_export(path, {"gpt2 - lr 3e-4": healthy, "gpt2 - lr 1e-3": _spiky(90, at=60)})
    assert wandb_export.sniff(path)
    runs = discover_runs(path)
    assert [(r.name, r.source) for r in runs] == [("gpt2 - lr 3e-4", "wandb_export"), ("gpt2 - lr 1e-3", "wandb_export")]
    assert runs[0].steps[metrics.LOSS].tolist() == pytest.approx(healthy, rel=1e-15, abs=0)  # pandas 2: 1 ulp
    assert runs[1].steps.index.tolist() == list(range(90))  # its empty cells are not steps
    assert list(runs[1].steps.columns) == [metrics.LOSS]  # the bucket range is not a series
    code, report = _analyze(str(path))
    assert code == 0
    assert [(r["name"], r["verdict"]) for r in report["runs"]] == [("gpt2 - lr 3e-4", "healthy"),
                                                                   ("gpt2 - lr 1e-3", "healthy")]
    assert [i["step"] for i in report["runs"][1]["incidents"]] == [60]
    code, report = _analyze(str(path), "--loss-col", "gpt2 - lr 1e-3 - train/loss")  # a column as written
    assert code == 0 and [r["name"] for r in report["runs"]] == ["gpt2 - lr 1e-3"]


def test_wandb_chart_export_against_wall_time_says_what_to_export(tmp_path):
    path = tmp_path / "export.csv"
    _chart_export(path, {"run-a": [2.0] * 10}, x_axis="Relative Time (Process)")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert "the chart is drawn against 'Relative Time (Process)', not a step" in result.output
    assert "Traceback" not in result.output
    with pytest.raises(ValueError, match="export it with Step as the x axis"):
        wandb_export.load(path, LoadOptions())


def test_a_table_with_a_loss_and_no_step_it_knows_names_the_step_option(tmp_path):
    """An RL logger's progress.csv: total_loss, and its step as "total timesteps". It got the
    generic list of every format."""
    path = tmp_path / "progress.csv"
    path.write_text("num_episodes,total_loss,total timesteps\n" + "".join(f"{i},{2.0 - i / 100},{i * 2048}\n"
                                                                          for i in range(20)), encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.output == (f"Error: {path}: a table with a loss column 'total_loss' but no step column among: "
                             "num_episodes, total_loss, total timesteps; name it with --step-col <column>\n")
    code, report = _analyze(str(path), "--step-col", "total timesteps")
    assert code == 0 and report["runs"][0]["steps"] == 20


def _refusal(path, rows: list[str]) -> str:
    """What ``sentinel analyze`` says of a table of ``rows`` it refuses (its exit code 1)."""
    path.write_text("\n".join(rows) + "\n")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    return result.output


def test_a_table_of_runs_is_no_history_and_says_so(tmp_path):
    """mlflow.search_runs() saved as CSV: one row per run, its last metrics.train_loss and
    metrics.val_loss. Read as a history of epochs, a run that failed before logging was 'loss
    non-finite at epoch 8', critical."""
    rows = ["run_id,experiment_id,status,start_time,metrics.train_loss,metrics.val_loss,params.lr,tags.mlflow.runName"]
    rows += [f"{i:032x},1723,FINISHED,2024-05-01 00:00:00+00:00,{0.9 + i / 100},{1.0 + i / 100},0.001,run-{i}"
             for i in range(7)] + [f"{7:032x},1723,FAILED,2024-05-01 00:00:00+00:00,,,0.001,run-7"]
    path = tmp_path / "runs_search.csv"
    assert _refusal(path, rows) == (
        f"Error: {path}: a table of one row per run (run_id, metrics.*: mlflow.search_runs()), not a training "
        "history: pass a run's metric history (its mlruns/<experiment>/<run> folder, or "
        "MlflowClient().get_metric_history() saved as CSV)\n")


def test_wandbs_runs_table_is_no_history_and_says_so(tmp_path):
    """W&B's runs table exported as CSV (Name, State, ..., each run's config and summary values): 63 runs read as
    one step 5000 "printed 64 times with different values (every rank printing?)", the last row's loss kept."""
    rows = ['"Name","State","Notes","User","Tags","Created","Runtime","Sweep","learning_rate","max_iters",'
            '"iter","train/loss","val/loss"']
    rows += [f'"run_{k}","finished","-","","full","2026-05-25T14:08:33.000Z","732","","0.001","5000","5000",'
             f'"{1.0 + k / 10}","{1.1 + k / 10}"' for k in range(6)]
    path = tmp_path / "wandb_export.csv"
    assert _refusal(path, rows) == (
        f"Error: {path}: W&B's runs table (one row per run: its config and last values), not a training history: "
        "pass a run's history (a chart's 'Download CSV', or wandb.Api().run(path).history() saved as CSV)\n")


def test_a_walk_that_finds_only_a_table_needing_an_option_says_which_option(tmp_path):
    """A folder of a tracker's export whose loss column the walk cannot tell ('step,value,
    timestamp,epoch' under a name that is no loss's): 'no training logs found', without the hint
    the file named on its own gets."""
    path = tmp_path / "metric_export.csv"
    path.write_text("step,value,timestamp,epoch\n" + "".join(f"{i},{v},1714560000310,0\n" for i, v in enumerate(_spiky())))
    result = CliRunner().invoke(main, ["analyze", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output == (f"Error: no training logs found in '{tmp_path}' (skipped 1 file: 1 not a training log); "
                             f"{path}: a table with a step column, 'step', but no single loss "
                             "column among: value, timestamp, epoch; name it with --loss-col <column>\n")
    code, report = _analyze(str(tmp_path), "--loss-col", "value")
    assert code == 0 and report["runs"][0]["final_loss"] == _spiky()[-1]
    path.write_text("nothing,here\nat,all\n")  # no table an option would read: the message as before
    result = CliRunner().invoke(main, ["analyze", str(tmp_path)])
    assert "pass a directory written by sentinel" in result.output


@pytest.mark.parametrize("form", ["bar", "metrics_csv", "table"])
def test_a_gan_pair_of_keys_reads_the_generators_loss(tmp_path, form):
    """taming-transformers' VQGAN (and the latent-diffusion autoencoders after it) logs the
    autoencoder's "aeloss" against the discriminator's "discloss": a Lightning bar's
    "aeloss_step=1.78e+5, discloss_step=0.000" was "2 losses and none is the total" (LightningDiT#73),
    its metrics.csv and a table of loss_G and loss_D "no loss column". The generator's is read, judged
    as a GAN's (no rises), its NaN told."""
    values = [0.9 - s / 100 for s in range(1, 41)]
    values[29] = math.nan
    path = tmp_path / ("train.log" if form == "bar" else "metrics.csv")
    if form == "bar":
        path.write_text("".join(f"Epoch 0:   1%|          | {s}/5005 [00:06<4:10:52,  0.33it/s, v_num=1, aeloss_step={v:.3g}, "
                                f"discloss_step={0.0 if s < 20 else 0.7}]\n" for s, v in enumerate(values, 1)))
    else:
        g, d = ("train/aeloss_step", "train/discloss_step") if form == "metrics_csv" else ("loss_G", "loss_D")
        path.write_text(f"{g},{d},epoch,step\n" + "".join(f"{v},{0.0 if s < 20 else 0.7},0,{s}\n"
                                                            for s, v in enumerate(values, 1)))
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[0] == pytest.approx(0.89, abs=1e-3)
    report = analyze_run(run)
    (said,) = [w for w in report.warnings if "a GAN's run" in w]
    assert said.endswith("non-finite values are reported")  # a whole sentence
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 30)]


def test_a_joint_loss_is_the_total_of_its_terms(tmp_path):
    """ICSRec prints {'epoch': 22, 'rec_avg_loss': '7.7207', 'icl_avg_loss': '2.6909', 'joint_avg_loss':
    '10.4116'} (ICSRec#3): "3 losses and none is the total"; the joint loss is their sum."""
    assert infer_loss_column(["rec_avg_loss", "icl_avg_loss", "joint_avg_loss"]) == "joint_avg_loss"
    path = tmp_path / "train.log"
    path.write_text("".join(f"{{'epoch': {e}, 'rec_avg_loss': '{7.7 - e / 100:.4f}', 'icl_avg_loss': '2.6909', "
                            f"'joint_avg_loss': '{10.4 - e / 100:.4f}'}}\n" for e in range(22, 30)))
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[0] == pytest.approx(10.18)


def test_a_tot_loss_is_the_total_of_its_terms():
    """MiniLLM prints "tot_loss: 6.2529 | rl_loss: 3.2390 | pt_loss: 3.0139 | pg_loss: ... | reg_loss: ..."
    (LMOps#118): "5 losses and none is the total"."""
    assert infer_loss_column(["pg_loss", "pt_loss", "reg_loss", "rl_loss", "tot_loss"]) == "tot_loss"


def test_a_cross_entropy_is_a_loss_and_no_regularisers_entropy(tmp_path):
    """"cross entropy" is one word: ``cross_entropy_loss`` beside ``kl_loss`` was read as an entropy
    regulariser and longer, so ``kl_loss`` was silently the loss; and GluonCV's SSD script prints its
    loss terms as ``mx.metric.Loss('CrossEntropy')`` and ``Loss('SmoothL1')``, no name holding "loss":
    its NaN run was "not a log format sentinel reads"."""
    assert looks_like_loss("Train-CrossEntropy") and looks_like_loss("RCNN_CrossEntropy")
    assert not is_regulariser("cross_entropy_loss") and is_regulariser("entropy_loss")
    assert infer_loss_column(["cross_entropy_loss", "kl_loss"]) is None
    path = tmp_path / "train.log"
    path.write_text("".join(f"step {s} | cross_entropy_loss {3 - s / 100:.4f} | kl_loss 0.1{s % 7}\n" for s in range(1, 60)))
    with pytest.raises(ValueError, match=r"2 losses \(cross_entropy_loss, kl_loss\) and none is the total"):
        discover_runs(path)
    path.write_text("".join(f"INFO:root:[Epoch 0][Batch {b}], Speed: 10.102 samples/sec, CrossEntropy="
                            f"{math.nan if b > 5 else 18.6 - b / 10:.3f}, SmoothL1={math.nan if b > 5 else 4.061:.3f}\n"
                            for b in range(12)))
    (run,) = discover_runs(path)
    assert "2 losses (CrossEntropy, SmoothL1) and none is the total: CrossEntropy is read" in run.warnings[0]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 6)]


def test_a_gans_generator_loss_that_runs_away_by_orders_of_magnitude_diverged(tmp_path):
    """DerainNet's G_loss beside its D_loss: 112, 244, 3335, ... 7.4e30 over seven epochs, then inf. A
    GAN's generator loss is not judged for rises, and only the inf was told; a climb of x1000 and more
    at every row is a divergence whatever plays against it. A generator's loss that climbs x10 over
    six epochs while its discriminator wins is the game, still not judged."""
    def write(g_losses):
        path = tmp_path / "train.log"
        path.write_text("".join(f"I0907 12:21:31.173571 22418 train_model.py:199] Epoch: {e} D_loss: {0.5 + e % 3:.5f} "
                                f"G_loss: {g:.5f} Ssim: 0.01 Cost_time: 0.55s\n" for e, g in enumerate(g_losses)))
        (run,) = discover_runs(path)
        return analyze_run(run)

    report = write([112.4, 244.5, 3334.7, 22600.3, 143877.5, 2506968.3, 1.1e13, 7.43e30, math.inf])
    assert [(i.kind, i.step) for i in report.incidents] == [("divergence", 0), ("nonfinite", 8)]
    assert any("a GAN's run" in w for w in report.warnings)
    report = write([0.5, 0.9, 1.4, 2.2, 3.1, 4.4, 5.2, 4.9, 5.0, 5.3])
    assert report.incidents == [] and report.verdict == "healthy"


def test_a_gans_players_by_letters_alone_or_studiogans_dis_loss(tmp_path):
    """lucidrains' stylegan2-pytorch (and GigaGAN) print "G: 1.51 | D: 0.21 | GP: 0.00 | PL: 0.00" under
    its bar: "not a log format sentinel reads"; StudioGAN's "Gen_loss: -0.0 Dis_loss: 13.82" was "2
    losses and none is the total". Each is a GAN's generator loss, judged as a GAN's (a NaN told, its
    rises not); a "D" alone makes no GAN."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"0% {i}/90000 [02:46<81:43:57,  3.27s/it]G: {'nan' if i >= 1200 else 1.5 + (i % 200) / 100} "
                            f"| D: 0.21 | GP: 0.00 | PL: 0.02\n" for i in range(0, 1500, 50)))
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert run.steps["loss"].iloc[:2].tolist() == [1.5, 2.0]
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 1200)]
    assert any("a GAN's run" in w for w in report.warnings)
    path.write_text("".join(f"[INFO] 2021-11-28 10:56:36 > Step: {s:6d} Progress: 0.1% Elapsed: 0:00:57 Gen_loss: "
                            f"{0.7 + (s % 700) / 100:.2f} Dis_loss: 1.38 Cls_loss: N/A Topk:  N/A ada_p: N/A\n"
                            for s in range(100, 3100, 100)))
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert run.steps["loss"].iloc[0] == pytest.approx(1.7) and report.incidents == []
    assert any("a GAN's run" in w for w in report.warnings)
    path.write_text("".join(f"step {s} | loss: {2 - s / 100:.3f} | D: 0.5\n" for s in range(1, 40)))
    (run,) = discover_runs(path)
    assert not any("a GAN's run" in w for w in analyze_run(run).warnings)


def test_a_vaes_elbo_loss_is_the_total_of_its_terms(tmp_path):
    """A Lightning CSV of a VAE: 'train_elbo_loss' beside 'train_recon_loss' and its KL terms: 'no single loss column'
    (a tie between two training losses); the negative ELBO is the sum its terms make."""
    assert infer_loss_column(["train_elbo_loss", "train_recon_loss", "train_kld_style", "val_elbo_loss"]) == \
        "train_elbo_loss"
    path = tmp_path / "history.csv"
    path.write_text("epoch,step,train_elbo_loss,train_recon_loss,train_kld_style\n"
                    + "".join(f"0,{49 + 50 * k},{326.5 - k},{318.6 - k},8.6\n" for k in range(10)), encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[0] == 326.5
