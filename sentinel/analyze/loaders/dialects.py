"""The text-log dialects: how each tool's lines are recognised and named.

Each entry is data for the engine in :mod:`sentinel.analyze.loaders.textscan`: a record
pattern whose first group (or groups) is the body of a step line, the separators that turn the
body into ``key value`` pairs, and the keys that differ from sentinel's names. The format
strings quoted are the tools' own. Adding a format is one entry here and a fixture under
``tests/fixtures/logs/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from sentinel import metrics
from sentinel.events import EventKind
from sentinel.analyze.loaders.amp_lines import AMP_LINES, NUM, SNIFF as AMP_SNIFF
from sentinel.analyze.loaders.dialect_types import Dialect, EventLine, LossTerms, RecordEvent, Shape
from sentinel.analyze.loaders.keys import GRAD_NORM_NAME
from sentinel.analyze.loaders.log_lines import Lines, without_lines
from sentinel.analyze.loaders.nonfinite_lines import WORDS as NONFINITE_WORDS
from sentinel.analyze.loaders.rounded_steps import spread_rounded, unrounded

_M = re.MULTILINE
# The most characters between two fields of one record ("step N ... loss = X"). A lazy scan
# without a bound is quadratic on a long line: each "step N" that no "loss = " follows reads to
# the line's end (a 1 MB log on one line took minutes). Bounded, a scan costs at most this much.
_GAP_CHARS = 1024
_GAP = rf"[^\n]{{0,{_GAP_CHARS}}}?"


def _gap_until(start: str) -> str:
    """:data:`_GAP` that stops where the next record starts (``start``): on a long line of many
    records (a log pasted without its line ends) each scan then reads its own record only, and
    a record's fields are never taken from the next one."""
    return rf"(?:(?!{start})[^\n]){{0,{_GAP_CHARS}}}?"


def _rest_until(start: str) -> str:
    """The rest of a line, up to where the next record starts (``start``, at a word's start):
    a record body that takes the rest of its line stops there, so a log pasted without its line
    ends is still one record per step (its one line was one record of hundreds of fields)."""
    return rf"(?:(?!\b{start})[^\n])*"


_NUM = NUM
_MS = {"ms": ("_ms", 1.0), "s": ("_ms", 1000.0)}

# llm.c: "s:120 trl:5.4321 lr:0.000600 norm:1.23"; modded-nanogpt: "step:120/3000 train_loss:5.4321
# train_time:41873ms step_avg:349.0ms" and "step:125/3000 val_loss:4.9876 ...".
_LLMC_KEYS = {"trl": metrics.LOSS, "train_loss": metrics.LOSS, "tel": metrics.VAL_LOSS,
              "val_loss": metrics.VAL_LOSS, "lr": metrics.LR, "norm": metrics.GRAD_NORM_TOTAL}
LLMC = Dialect(
    name="llmc",
    description='llm.c / modded-nanogpt logs ("s:N trl:X", "step:N/M train_loss:X")',
    shapes=(
        Shape(re.compile(r"^[ \t]*s:(\d[^\n]*)", _M), keys=_LLMC_KEYS, units=_MS, strict=True),
        # (a slash inside a key is none of its separators: speedrun forks print "tokens/sec:1.55e+05")
        Shape(re.compile(r"^[ \t]*step:(\d+/\d[^\n]*)", _M), head=(metrics.STEP, "total"),
              separators=(":", "/"), keys=_LLMC_KEYS, units=_MS, strict=True,
              scrub=(re.compile(r"(?<=[A-Za-z])/(?=[A-Za-z])"), "_")),
    ),
    # A bare "step:5/100 train_time:..." alone is not enough to claim a file: a loss must be there.
    sniff=re.compile(r"^[ \t]*(?:s:\d+|step:\d+/\d+)[ \t]+[^\n]*?\b(?:trl|tel|train_loss|val_loss):", _M),
    min_records=1,
    warn_bad_values=True,
)

# nanoGPT train.py: f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%"
# and f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}".
NANOGPT = Dialect(
    name="nanogpt",
    description='nanoGPT, llama2.c ("iter N: loss X, time Yms, mfu Z%", "N | loss X | lr L | Tms | mfu Z%")',
    shapes=(
        Shape(re.compile(rf"\biter (\d+: loss {_rest_until(r'iter [0-9]+: loss ')})"), separators=(":", ",", "%"),
              units={"ms": ("_ms", 1.0)}),
        Shape(re.compile(rf"\bstep (\d+): train loss ({_NUM}), val loss ({_NUM})"),
              head=(metrics.STEP, "eval_train_loss", metrics.VAL_LOSS)),
        # llama2.c's train.py (nanoGPT's loop): f"{iter_num} | loss {lossf:.4f} | lr {lr:e} |
        # {dt*1000:.2f}ms | mfu {running_mfu*100:.2f}%"
        Shape(re.compile(rf"(?m)^[^\S\n]*(\d+) \| loss ({_NUM}) \| lr ({_NUM}) \| ({_NUM})ms\b"),
              head=(metrics.STEP, metrics.LOSS, metrics.LR, "time_ms")),
    ),
    # nanoGPT's time after the loss: a script's own "epoch 2 iter 5: loss X" (its iter counting
    # inside the epoch) is the generic reader's.
    sniff=re.compile(r"\biter \d+: loss [-+\d.naif]+, time |^[^\S\n]*\d+ \| loss [-+\d.naif]+ \| lr ", re.MULTILINE),
)

# build-nanogpt (karpathy's train_gpt2.py) writes its log.txt as f"{step} train {loss_accum.item():.6f}",
# f"{step} val {val_loss_accum.item():.4f}" and f"{step} hella {acc_norm:.4f}", a line each.
BUILD_NANOGPT = Dialect(
    name="build_nanogpt",
    description='build-nanogpt\'s log.txt ("N train X", "N val Y", "N hella A")',
    shapes=(
        Shape(re.compile(rf"^(\d+) train ({_NUM})[^\S\n]*$", re.MULTILINE), head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"^(\d+) val ({_NUM})[^\S\n]*$", re.MULTILINE), head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(rf"^\d+ train {_NUM}[^\S\n]*$", re.MULTILINE),
    min_records=2,
)

# litgpt: f"Epoch {e} | iter {iter} step {step} | loss train: {loss:.3f}, val: {val} | iter time:
# {t * 1000:.2f} ms" (older: "iter {i} step {s}: loss {loss:.4f}, ... iter time: {t:.2f}ms").
# The iteration is the step, as litgpt's own loggers write it (fabric.log_dict(metrics,
# step=iter_num)): with gradient accumulation an older version printed each micro-batch's loss,
# and a spike in one of them is kept; the optimizer step is a column of its own.
# (Its counts perhaps padded, as forks print them: "Epoch 0 | iter  62 step  62 | loss train: 21.625".)
# (Since 2024: f"Ep {e} | iter {i} | step {s}: loss train (curr): {loss:.3f}, val (prev val iter): ... | iter
# time: ...")
_LITGPT_GAP = _gap_until(r"\biter[^\S\n]+\d+[^\S\n]*\|?[^\S\n]*(?i:step)[^\S\n]+\d")
LITGPT = Dialect(
    name="litgpt",
    description='litgpt ("iter N step M | loss train: X", "iter N | step M: loss train (curr): X")',
    shapes=(
        Shape(re.compile(rf"\biter[^\S\n]+(\d+)[^\S\n]*\|?[^\S\n]*(?i:step)[^\S\n]+(\d+)[^\S\n]*[:|][^\S\n]*"
                         rf"loss(?: train)?(?: \(curr\))?:? ({_NUM})"
                         rf"(?:{_LITGPT_GAP}iter time: ({_NUM}) ?ms)?"),
              head=(metrics.STEP, "optimizer_step", metrics.LOSS, "iter_time_ms")),
    ),
)

# A line about an evaluation ("| valid on 'valid' subset 1000 / 1311 loss=1.60", "Step 300 | eval
# loss: 2.1"): its loss is not the training loss of a step. Fewer words than keys.looks_like_loss
# rejects in a metric's name: a free-text line says "val" and "dev" for other things ("val: n/a",
# "dev=cuda:0"); "dev" only before its loss (nn4nlp's "iter 0: dev loss/word=7.9544" after the training's
# "iter 0: train loss/word=7.6407"). WeTTS marks its evaluation's lines "Epoch 0 [CV] progress 290/341
# loss X" (its training lines "[TRAIN]"): the bracketed mark only.
_EVAL_WORDS = ("val", "valid", "validation", "eval", "evaluation", "test", "testing", "dev loss", "[cv]")

# torchtitan: f"{color.red}step: {step:2}  {color.green}loss: {loss:7.4f}  {color.orange}grad_norm:
# {grad_norm:7.4f}  {color.turquoise}memory: {gib:5.2f}GiB({pct:.2f}%)  {color.blue}tps: {tps:,} ..."
TORCHTITAN = Dialect(
    name="torchtitan",
    description='torchtitan ("step: N  loss: X  grad_norm: G  memory: ...")',
    # [^\S\n]: spaces that stay on the line, so the pattern reads one line skeleton at a time
    # (not PaddleVideo's "epoch:[  1/196] train step:0    loss: 0.00000 lr: ..." nor PaddleSlim's "epoch:394
    # train step:190  loss:  1.2416 lr: ...": its step counts inside the epoch the line names, which the
    # generic reader makes a global step)
    shapes=(Shape(re.compile(r"^(?![^\n]*?\bepoch:)[^\n]*?\bstep:[^\S\n]*(\d+[^\S\n]+loss:[^\n]*)", re.MULTILINE),
                  units={"%": ("", 1.0)}),),
    # An evaluation's "valid step:10   loss: 1.4104" is none of the training's steps, nor torchtitan's
    # validator's "validate step: 100  loss: 2.31".
    drop_words=(*_EVAL_WORDS, "validate"),
    min_records=2,
)

# mmengine / MMDetection 3: "Epoch(train)  [1][  50/1000]  base_lr: 1.0e-04 lr: 1.0e-04  eta: 0:53:02
# time: 0.32  data_time: 0.01  memory: 5432  grad_norm: 3.12  loss: 1.23  loss_cls: 0.34";
# mmcv 1.x: "Epoch [1][50/7330]\tlr: 1.000e-02, eta: 1 day, 8:31:30, time: 0.5, ..., loss: 1.2".
# Iterations count inside an epoch: the step is (epoch - 1) * N + i. ([^\S\n]: spaces on the line.)
_ETA = (re.compile(r"\beta: (?:\d+ days?, )?[\d:]+,?"), "")
# YOLOX (and MMDetection's YOLOX) add an L1 term to the total loss for the last epochs, and say so:
# the loss steps up to a new level there (rule_announced).
# ("L\d": a pattern that takes every digit or none is asked of the distinct lines first; a literal
# "1" made it a search of the whole text.)
YOLOX_L1 = EventLine(re.compile(r"Add additional L\d loss now!"), EventKind.NEW_LEVEL, source="yolox",
                     detail={"announced": "YOLOX's 'Add additional L1 loss now!': an L1 term added to the loss"})

MMENGINE = Dialect(
    name="mmengine",
    description='mmengine / MMDetection ("Epoch(train) [e][i/N] ... loss: X")',
    shapes=(
        Shape(re.compile(r"\bEpoch(?:\(train\))?[^\S\n]*\[(\d+)\][^\S\n]*\[[^\S\n]*(\d+)[^\S\n]*/[^\S\n]*(\d+)\]"
                         r"[^\S\n]+([^\n]*)"),
              head=("epoch", "iter", "total"), separators=(": ", ", ", "\t"), scrub=_ETA),
        Shape(re.compile(r"\bIter\(train\)[^\S\n]*\[[^\S\n]*(\d+)[^\S\n]*/[^\S\n]*(\d+)\][^\S\n]+([^\n]*)"),
              head=("iter", "total"), separators=(": ", ", ", "\t"), scrub=_ETA),
    ),
    events=(YOLOX_L1,),  # MMDetection's YOLOXModeSwitchHook prints YOLOX's line
    min_records=2,
)

# fairseq: "train_inner | epoch 001:    100 / 1000 loss=9.1, nll_loss=..., num_updates=100, lr=...,
# gnorm=1.2, loss_scale=64, ..." per log interval; "| epoch 001 | loss 9.1 | ... | num_updates 700"
# at the end of an epoch (an average: it only fills steps the interval lines did not log);
# "| epoch 001 | valid on 'valid' subset | loss 8.5 | ... | num_updates 700".
_FAIRSEQ_KEYS = {"loss": metrics.LOSS, "gnorm": metrics.GRAD_NORM_TOTAL, "lr": metrics.LR,
                 "loss_scale": metrics.LOSS_SCALE}
FAIRSEQ = Dialect(
    name="fairseq",
    description='fairseq, metaseq ("epoch 001: 100 / 1000 loss=X, ..., num_updates=N", or JSON: "| train_inner | {...}")',
    shapes=(
        Shape(re.compile(r"\bepoch (\d+):[^\S\n]+(\d+) / (\d+) ([^\n]*)"), head=("epoch", "iter", "total"),
              separators=("=", ","), keys=_FAIRSEQ_KEYS),
        # (--log-format tqdm, fairseq's default on a terminal: "| epoch 014:  94%|▉| 33/35 [00:38<00:02,
        # 1.14s/it, loss=11.793, ppl=3549.22, ..., num_updates=488, lr=0.00025, gnorm=0.432, ...]", its
        # redraws perhaps run into one line)
        Shape(re.compile(r"\bepoch (\d+):[^\S\n]+\d+%\|[^|\n]*\|[^\S\n]*(\d+)/(\d+) \[[^,\]\n]*,[^,\]\n]*?"
                         r"(?:s/it|it/s), ([^\]|\n]*)"), head=("epoch", "iter", "total"),
              separators=("=", ","), keys=_FAIRSEQ_KEYS),
        Shape(re.compile(r"\bepoch (\d+) \|(?! valid on)([^\n]*)"), head=("epoch",), separators=("|",),
              keys=_FAIRSEQ_KEYS, fills=True),
        Shape(re.compile(r"\bepoch (\d+) \| valid on '[^'\n]*' subset \|([^\n]*)"), head=("epoch",),
              separators=("|",), keys={"loss": "loss"}, prefix="val_"),
        # --log-format json (fairseq, metaseq): the logger named after the tag ("[train_inner][INFO] -"
        # under fairseq-hydra-train), then the stats as
        # JSON with every value a string: "| INFO | train_inner | {"epoch": 1, "loss": "15.878",
        # ..., "num_updates": "85", ...}"; the end-of-epoch "train" and the "valid" dicts name
        # their keys with the tag ("train_loss", "valid_num_updates").
        Shape(re.compile(r"(?:\| train_inner \||\[train_inner\]\[[A-Z]+\] -) \{([^\n]*)\}"), head=(), separators=('"', ":", ","),
              keys=_FAIRSEQ_KEYS),
        Shape(re.compile(r"(?:\| train \||\[train\]\[[A-Z]+\] -) \{([^\n]*)\}"), head=(), separators=('"', ":", ","),
              keys=_FAIRSEQ_KEYS, fills=True, scrub=(re.compile(r'"train_'), '"')),
        Shape(re.compile(r"(?:\| valid \||\[valid\]\[[A-Z]+\] -) \{([^\n]*)\}"), head=(), separators=('"', ":", ","),
              keys={"loss": "loss"}, prefix="val_", scrub=(re.compile(r'"valid_'), '"')),
    ),
    events=(
        # trainer.py: logger.info("NOTE: overflow detected, " + str(e)), e = "setting loss scale to: X"
        EventLine(re.compile(rf"overflow detected, setting (?:loss )?scale to:? (?:to )?(?P<new>{_NUM})"),
                  source="fairseq"),
        EventLine(re.compile(rf"Minimum loss scale reached \((?P<new>{_NUM})\)"), source="fairseq",
                  detail={"min_scale_reached": True}),
    ),
    loss_scale_min=1e-4,  # fairseq's --min-loss-scale: it stops there ("Minimum loss scale reached")
    step_key="num_updates",
    sniff=re.compile(r"\bepoch \d+(?::[^\S\n]+\d+ / \d+ | \| )[^\n]*\bnum_updates[ =]\d|"
                     r"(?:\| train_inner \||\[train_inner\]\[[A-Z]+\] -) \{[^\n]*\"num_updates\": "),
    min_records=1,
)

# DeepSpeed alone: engine.py "step=N, skipped=K, lr=[...], mom=[...]" every steps_per_print;
# fused_optimizer / loss_scaler "Grad overflow on iteration N" then "[deepspeed] OVERFLOW! Rank 0
# Skipping step. Attempted loss scale: A, reducing to B" (older: "fp16 dynamic loss scale
# overflow! Skipping step. ..."). An overflow line without its iteration belongs to the next step line.
_SCALES = rf"Attempted loss scale: (?P<attempted>{_NUM}), reducing to (?P<new>{_NUM})"
DEEPSPEED = Dialect(
    name="deepspeed",
    description='DeepSpeed ("steps: N loss: X iter time (s): ...", "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: A, reducing to B")',
    shapes=(
        Shape(re.compile(rf"\bstep=(\d+), skipped=(\d+), lr=\[({_NUM})"),
              head=(metrics.STEP, "skipped_steps_total", metrics.LR)),
        # The pipeline engine's own line: f"steps: {global_steps} loss: {agg_train_loss:0.4f}
        # iter time (s): ... samples/sec: ..."
        Shape(re.compile(rf"\bsteps: (\d+) loss: ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
    events=(
        EventLine(re.compile(rf"Grad overflow on iteration:? (?P<step>\d+)(?:[^\n]{{0,{_GAP_CHARS}}}\n){{1,3}}?{_GAP}"
                             rf"(?:Rank (?P<rank>\d+) )?Skipping step\.? {_SCALES}"), source="deepspeed"),
        EventLine(re.compile(rf"overflow[!.]? (?:Rank (?P<rank>\d+) )?Skipping step\.? {_SCALES}", re.IGNORECASE),
                  source="deepspeed"),
        EventLine(re.compile(r"Grad overflow on iteration:? (?P<step>\d+)"), source="deepspeed"),
    ),
    sniff=re.compile(r"Attempted loss scale: |Grad overflow on iteration|\bstep=\d+, skipped=\d+, lr=|"
                     r"\bsteps: \d+ loss: "),
    min_records=1,
)

# transformers Trainer (and LLaMA-Factory, unsloth, TRL, axolotl): ProgressCallback.on_log prints
# the logs dict, {'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}, with no
# step (the tqdm bar drawn beside it has it); {'eval_loss': ...} dicts join the training step
# before them.
# A value wrapped in np.float32(...) or tensor(..., device=...) is its number; a quoted text value
# with spaces in it (ms-swift's 'remaining_time': '3h 35m 58s') is one word: split at its spaces it
# made a column of each word ('35m', '58s': thousands of empty columns over a run).
_HF_SCRUB = (re.compile(r"(?:np\.float\d+|tensor)\(([^,()]*)(?:, device='[^']*')?\)|(: )'[^'\n]*\s[^'\n]*'"),
             lambda m: m.group(1) if m.group(2) is None else ": 'text'")  # one token: the pairs stay in step
# A dict printed over several lines (a paste hard-wrapped at a terminal's width, a narrow console)
# is one record again: its line ends become spaces, moved after its closing brace so that the
# lines after it keep their numbers.
_HF_DICT_OPEN = re.compile(r"\{'(?:loss|eval_[a-z_]+)'[^{}\n]*$", re.MULTILINE)  # line-local: asked of distinct lines
_HF_WRAPPED_DICT = re.compile(r"\{'(?:loss|eval_[a-z_]+)'[^{}\n]*(?:\n[^{}\n]*){1,16}?\}")


# ms-swift writes its step into each dict, 'global_step/max_steps': '615/940' (without a progress bar
# beside them, with --disable_tqdm or in a file log, it is the only step the dicts have).
_SWIFT_STEP_WORDS = "'global_step/max_steps': '"
_SWIFT_STEP = re.compile(r"'global_step/max_steps': '(\d+)/\d+'")


# PaddleNLP's Trainer writes the global step into each dict, 'global_step': 150.
_PADDLENLP_STEP_WORDS = "'global_step': "
_PADDLENLP_STEP = re.compile(r"'global_step': (\d+)(?=[,}])")
# text-generation-webui's LoRA trainer prints the step before each dict, "Step:      3 {'loss': 2.4395, ...}".
_STEP_BEFORE_DICT_WORDS = "Step: "
_STEP_BEFORE_DICT = re.compile(r"^Step:[^\S\n]+(\d+)[^\S\n]+(\{'[^{}\n]*)\}", re.MULTILINE)
# A dict holding one of these holds its own step: the progress bar beside it gives it none.
HF_OWN_STEPS = (_SWIFT_STEP_WORDS, _PADDLENLP_STEP_WORDS)


def _hf_dicts_unwrapped(text: str) -> str:
    if _SWIFT_STEP_WORDS in text:
        text = _SWIFT_STEP.sub(r"'step': \1", text)
    if _PADDLENLP_STEP_WORDS in text and "'step': " not in text:
        text = _PADDLENLP_STEP.sub(r"'step': \1", text)
    if _STEP_BEFORE_DICT_WORDS in text and "'step': " not in text:
        text = _STEP_BEFORE_DICT.sub(r"\2, 'step': \1}", text)
    if _HF_DICT_OPEN.search(text) is None:  # every dict on one line: the usual log
        return text
    text = _HF_WRAPPED_DICT.sub(lambda m: m.group(0).replace("\n", " ") + "\n" * m.group(0).count("\n"), text)
    cut = hf_cut_dict(text)
    return text if cut is None else text[:cut.start()] + cut.group(1) + "}" + text[cut.end():]


# A dict cut off before its closing brace with nothing after it (a paste's last line, cut by the
# window it was copied from): read up to its last whole field (the field after the last comma may
# be cut inside its number). A DPO paste's last dict, "{'loss': 631.0259, 'learning_rate':
# 0.000496922085148784", was the loss that exploded, dropped unsaid.
_HF_CUT_DICT = re.compile(r"(\{'(?:loss|eval_[a-z_]+)': [^{}\n]*?), [^,{}\n]*(?=\s*\Z)")


def hf_cut_dict(text: str) -> re.Match | None:
    """The text's last line where it is a log dict cut off before its closing brace, else None.

    Example:
        >>> hf_cut_dict("{'loss': 0.69, 'epoch': 0.1}\\n{'loss': 631.0259, 'learning_rate': 0.00049\\n").group(1)
        "{'loss': 631.0259"
    """
    end = len(text)
    while end and text[end - 1].isspace():  # (the trailing line ends alone: no copy of the text)
        end -= 1
    return _HF_CUT_DICT.match(text, text.rfind("\n", 0, end) + 1)


# A dict that opens on another key and holds the loss further on, ending on the Trainer's 'epoch'
# (TRL's PPO and RLOO trainers: {'eps': 3, 'objective/kl': ..., 'loss/policy_avg': ..., 'episode':
# 64, 'epoch': 0.03}, read once --loss-col names one of their losses).
_HF_LOSS_LATER = r"'[\w/.-]+': [^{}\n]*?, 'loss': [^{}\n]*, 'epoch': [-+\d.e]+"
HF_TRAINER = Dialect(
    name="hf_trainer",
    description="Hugging Face Trainer printed log dicts ({'loss': X, 'learning_rate': ..., 'epoch': ...})",
    shapes=(
        Shape(re.compile(rf"\{{('(?:loss|eval_[a-z_]+)': [^{{}}\n]*|{_HF_LOSS_LATER})\}}"), head=(),
              separators=("'", '"', ":", ","), keys={"loss": metrics.LOSS, "learning_rate": metrics.LR},
              require="loss", scrub=_HF_SCRUB, scrub_needs=("np.float", "tensor(", ": '")),
    ),
    step_key="step",  # added from the progress bar beside each dict (loaders/progress_bar.py)
    step_from_order=True,
    rewrite=_hf_dicts_unwrapped,
    rewrite_needs=(_HF_DICT_OPEN, _SWIFT_STEP_WORDS, _PADDLENLP_STEP_WORDS, _STEP_BEFORE_DICT_WORDS),
    # (newer versions quote the values: '3.895')
    sniff=re.compile(rf"\{{'loss': '?(?:[-\d.]|nan\b|inf\b)|\{{(?={_HF_LOSS_LATER}\}})"),
    min_records=2,
)

# TensorFlow Estimator / Keras-style: "loss = 0.69, step = 1" and "step 100 ... loss = 0.12" (Pyro's
# forecaster pads the step: "step   50 loss = 3.6e+09"; not an
# evaluation's "Evaluation result for step 5000: loss = 2.28"); the Estimator's evaluation, "Saving
# dict for global step 2036: accuracy = 1.0, ..., loss = 4.5e-10", is that step's val_loss.
_TF_GAP = _gap_until(r"\bstep[^\S\n]+\d")
TF = Dialect(
    name="tf",
    description='TensorFlow / Keras-style ("loss = X, step = N", "step N ... loss = X")',
    shapes=(
        Shape(re.compile(rf"\bloss = ({_NUM}), step = (\d+)"), head=(metrics.LOSS, metrics.STEP)),
        Shape(re.compile(rf"(?<!result for )(?<!dict for global )\bstep[^\S\n]+(\d+)\b{_TF_GAP}\bloss = ({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\bSaving dict for global step (\d+): [^\n]*?\bloss = ({_NUM})"),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
)

# OpenNMT-tf (opennmt/training.py TrainingStats.log): "Step = N ; steps/s = S, ... ; Learning rate = L ;
# Loss = X"; its evaluator (opennmt/evaluation.py): "Evaluation result for step N: loss = X ;
# perplexity = P".
_ONMT_TF_GAP = _gap_until(r"\bStep = \d")
OPENNMT_TF = Dialect(
    name="opennmt_tf",
    description='OpenNMT-tf ("Step = N ; steps/s = S, ... ; Learning rate = L ; Loss = X")',
    shapes=(
        Shape(re.compile(rf"\bStep = (\d+) ;{_ONMT_TF_GAP}(?:; Learning rate = ({_NUM}) )?; Loss = ({_NUM})"),
              head=(metrics.STEP, metrics.LR, metrics.LOSS)),
        Shape(re.compile(rf"\bEvaluation result for step (\d+): loss = ({_NUM})"), head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(rf"\bStep = \d+ ;[^\n]*; Loss = [-+\dn]"),
    min_records=2,
)

# log4j-style (BigDL): "[Epoch 1 100/60000][Iteration 1][Wall Clock 0.52s] Trained 100 records in
# 0.52 seconds. Throughput is 192.3 records/second. Loss is 2.30."
_LOG4J_GAP = _gap_until(r"\[Iteration \d")
LOG4J = Dialect(
    name="log4j",
    description='log4j-style ("[Iteration N] ... Loss is X")',
    shapes=(
        Shape(re.compile(rf"\[Iteration (\d+)\]{_LOG4J_GAP}\bLoss is ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
)

# NeMo 1.x (Megatron GPT) through Lightning's progress bar: "Epoch 0:   3%|▎ | 565/20101 [2:12:19<...,
# loss=nan, v_num=, reduced_train_loss=3.910, gradient_norm=1.010, ..., global_step=564.0, ...]". The
# bar's own "loss" is Lightning's running mean, NaN in NeMo's training loop; reduced_train_loss is
# the step's loss. Redraws whose "\r" was lost run on in one line: each draw is a record.
_NEMO1_GAP = _gap_until("reduced_train_loss=")
NEMO1 = Dialect(
    name="nemo",
    description='NeMo 1.x progress bar ("reduced_train_loss=X, ..., global_step=N.0")',
    shapes=(
        Shape(re.compile(rf"\breduced_train_loss=({_NUM}){_NEMO1_GAP}\bglobal_step=(\d+)(?:\.\d+)?\b"),
              head=(metrics.LOSS, metrics.STEP)),
    ),
    min_records=2,
)

# MaxText (train.py): f"completed step: {step}, seconds: {t:.3f}, TFLOP/s/device: {x:.3f}, ..., loss:
# {loss:.3f}"; a pasted excerpt is often two or three lines.
_MAXTEXT_GAP = _gap_until("completed step: ")
MAXTEXT = Dialect(
    name="maxtext",
    description='MaxText ("completed step: N, seconds: S, ..., loss: X")',
    shapes=(
        Shape(re.compile(rf"\bcompleted step: (\d+),{_MAXTEXT_GAP}\bloss: ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
    min_records=2,
)

# PaddleNLP's examples and older trainers: "global step 200/2000, epoch: 0, batch: 199, rank_id: 0, loss:
# 2.345678, lr: 0.0000100000, speed: 3.2100 step/s, ..." (or without "/2000"). The global step is the
# step; the batch counts inside the epoch from 0, one behind it (read as the step by the generic
# reader, every spike was placed a step early).
_PADDLE_GAP = _gap_until(r"\bglobal step \d")
PADDLENLP = Dialect(
    name="paddlenlp",
    description='PaddleNLP ("global step N/M, epoch: E, batch: B, ..., loss: X, lr: L")',
    shapes=(
        Shape(re.compile(rf"\bglobal step (\d+)(?:/\d+)?,{_PADDLE_GAP}\bloss: ({_NUM})(?:{_PADDLE_GAP}\blr: ({_NUM}))?"),
              head=(metrics.STEP, metrics.LOSS, metrics.LR)),
    ),
    min_records=2,
)

# timm train.py: f"Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} ({pct:>3.0f}%)]  Loss:
# {losses_m.val:#.3g} ({losses_m.avg:#.3g})  Time: ...  LR: {lr:.3e}  Data: ..."; epochs from 0, the
# update index inside the epoch: the step is epoch * updates_per_epoch + update_idx.
_TIMM_GAP = _gap_until(r"\bTrain: \d")
TIMM = Dialect(
    name="timm",
    description='timm ("Train: E [I/N (P%)]  Loss: X (avg)  ...  LR: L")',
    shapes=(
        # (older timm: "Loss: {losses_m.val:>9.6f}", padded: "Loss:  5.354290 (5.3299)")
        Shape(re.compile(rf"\bTrain: (\d+) \[[^\S\n]*(\d+)/(\d+) \([^\S\n]*\d+%\)\]"
                         rf"[^\S\n]+Loss:[ \t]+({_NUM}) \([^)\n]*\)"
                         rf"(?:{_TIMM_GAP}\bLR: ({_NUM}))?"),
              head=("epoch0", "iter", "total", metrics.LOSS, metrics.LR)),
    ),
    min_records=2,
    amp_lines=True,
)

# Swin Transformer's main.py (SimMIM, VMamba and many vision models after it): f"Train: [{epoch}/{EPOCHS}]
# [{idx}/{num_steps}]\teta {eta} lr {lr:.6f}\t wd {wd:.4f}\ttime {val:.4f} ({avg:.4f})\tloss {val:.4f}
# ({avg:.4f})\tgrad_norm {val:.4f} ({avg:.4f})\tloss_scale {val:.4f} ({avg:.4f})\tmem {mem:.0f}MB" (the
# first versions without wd and loss_scale; tabs pasted as spaces); epochs and the index from 0. A
# running average of inf ("grad_norm 2.0382 (inf)") is its fp16 scaler's overflow steps, not read.
_SWIN_GAP = _gap_until(r"\bTrain: \[")
SWIN = Dialect(
    name="swin",
    description='Swin Transformer ("Train: [E/EPOCHS][I/N]  eta ... lr L ... loss X (avg)  grad_norm G (avg)")',
    shapes=(
        Shape(re.compile(rf"\bTrain: \[(\d+)/\d+\]\[(\d+)/(\d+)\]{_SWIN_GAP}[\t ]lr ({_NUM}){_SWIN_GAP}[\t ]loss ({_NUM})"
                         rf" \([^)\n]*\)(?:[\t ]+grad_norm ({_NUM}) \([^)\n]*\))?(?:[\t ]+loss_scale ({_NUM}) \([^)\n]*\))?"),
              head=("epoch0", "iter", "total", metrics.LR, metrics.LOSS, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE)),
    ),
    min_records=2,
    amp_lines=True,
)

# Yet-Another-EfficientDet-Pytorch (zylo117): its bar's description, f"Step: {step}. Epoch: {e}/{E}.
# Iteration: {i}/{n}. Cls loss: {c:.5f}. Reg loss: {r:.5f}. Total loss: {loss:.5f}" (the global step;
# the total is the loss). A paste often loses the bar's line ends: the records then follow each other
# on one line ("Total loss: 0.0218Step: 16252. ...").
EFFICIENTDET = Dialect(
    name="efficientdet",
    description='Yet-Another-EfficientDet-Pytorch ("Step: N. Epoch: E/T. Iteration: I/M. Cls loss: C. Reg loss: R. '
                'Total loss: X")',
    shapes=(
        Shape(re.compile(rf"(?<![A-Za-z])Step: (\d+)\. Epoch: \d+/\d+\. Iteration: \d+/\d+\. Cls loss: {_NUM}\. "
                         rf"Reg loss: {_NUM}\. Total loss: ({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    min_records=2,
)

# Tianshou's trainers: a bar over each epoch's environment steps whose postfix (tqdm sorts its keys)
# holds the collector's "env_step", the losses and the mean return of the episodes just finished:
# "Epoch #3: 50001it [00:40, 1248.02it/s, env_step=150000, len=200, loss=0.001, loss/clip=0.001, ...,
# n/ep=7, n/st=2000, rew=200.00]". The step is env_step; the return marks the run as an environment's.
TIANSHOU = Dialect(
    name="tianshou",
    description='Tianshou ("Epoch #E: Nit [..., env_step=S, ..., loss=X, ..., rew=R]")',
    shapes=(
        Shape(re.compile(rf"\bEpoch #\d+: \d+it \[[^\]\n]*?\benv_step=(\d+)[^\]\n]*?(?<![\w/])loss=({_NUM})"
                         rf"[^\]\n]*?\brew=({_NUM})"),
              head=(metrics.STEP, metrics.LOSS, "episode_return")),
    ),
    min_records=2,
)

# keras-rl's TrainEpisodeLogger, a line an episode: f"{step:>{width}}/{nb_steps}: episode: {episode}, duration: ...,
# episode reward: {reward:.3f}, ..., loss: {loss}, mean_absolute_error: ..., mean_q: ..." (its metrics the episode's
# means; "loss: --" before the agent's warm-up ends). The step is the environment's, not the episode's count.
# (Its loss a Q-network's regression, judged: a DQN's at 1e+23, then 1e+25, diverged.)
KERAS_RL = Dialect(
    name="keras_rl",
    description='keras-rl ("43587/50000: episode: 588, ..., episode reward: 180.000, ..., loss: 4.918")',
    shapes=(
        Shape(re.compile(rf"^[^\S\n]*(\d+)/\d+: episode: \d+, duration: [^\n]*?(?<![\w/])loss: ({_NUM})",
                         re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    min_records=2,
)

# Composer ConsoleLogger: f"[epoch={e}][batch={b}/{n}]:" (or "[batch=b/n]:", "[token=t/n]:")
# then one f"\n\t Train {name}: {value}" line per metric; "time/batch" is the global batch.
COMPOSER = Dialect(
    name="composer",
    description='Composer ("[batch=N/M]:" then "\\t Train loss/train/total: X" lines)',
    shapes=(
        Shape(re.compile(r"^\[(?:epoch=\d+\]\[)?[a-z]+=(\d+)(?:/\d+)?\]:( Train [^\n]*)", re.MULTILINE),
              keys={"loss/train/total": metrics.LOSS},
              # "Train " off every key; "lr-<Optimizer>/group0" (the first group's LR) is the lr.
              scrub=(re.compile(r"(?:^| )Train (lr)?(?:-\w+/group0(?=:))?"), r" \1")),
        # Its FileLogger: f"[metric][batch={step}]: " f"{metric_name}: {metric_str} \n", a line per metric.
        Shape(re.compile(r"^\[metric\]\[batch=(\d+)\]: ([^\n]*)", re.MULTILINE),
              keys={"loss/train/total": metrics.LOSS},
              scrub=(re.compile(r"(?:^| )lr-\w+/group0(?=:)"), " lr")),
    ),
    # (a tab, or the spaces a web page shows for it: llm-foundry's README prints the log so)
    joins=re.compile(r"\n(?:\t |[^\S\n]{2,}(?=Train ))"),
    step_key="time/batch",
    sniff=re.compile(r"^(?:\[(?:epoch=\d+\]\[)?(?:batch|ba|epoch|ep|token|tok|sample|sp)=\d+(?:/\d+)?\]:$"
                     r"|\[metric\]\[batch=\d+\]: )", re.MULTILINE),
    min_records=2,
)

# OLMo (olmo/train.py): f"[step={step}/{max_steps},epoch={epoch}]" then one f"    {name}={value}"
# line per metric (train/CrossEntropyLoss, optim/total_grad_norm, optim/learning_rate_group0, ...);
# OLMo-core's console logger adds ",eta=1h42m27s" in the brackets and names "train/CE loss".
OLMO = Dialect(
    name="olmo",
    description='OLMo ("[step=N/M,epoch=E]" then "    train/CrossEntropyLoss=X" lines)',
    shapes=(
        Shape(re.compile(r"\[step=(\d+)(?:/\d+)?(?:,epoch=\d+)?(?:,\w+=[^\],\n]*)*\]([^\n]*)"), fields="|",
              keys={"train/crossentropyloss": metrics.LOSS, "train/ce loss": metrics.LOSS,
                    "optim/total_grad_norm": metrics.GRAD_NORM_TOTAL, "optim/total grad norm": metrics.GRAD_NORM_TOTAL,
                    "optim/learning_rate_group0": metrics.LR, "optim/lr_group0": metrics.LR,
                    "optim/lr (group 0)": metrics.LR}),
    ),
    joins=re.compile(r"\n {4}(?=[^\s=][^\n=]*=)"),
    join_with=" | ",
    sniff=re.compile(r"\[step=\d+(?:/\d+)?(?:,epoch=\d+)?(?:,\w+=[^\],\n]*)*\]$", re.MULTILINE),
    min_records=1,
)

# Coqui's Trainer (Coqui TTS): f"   --> TIME: {t} -- STEP: {s}/{n} -- GLOBAL_STEP: {g}" (older versions
# without the time) then one f"     | > {key}: {value}  ({average})" line per loss (the average in
# brackets; a grad norm printed as a tensor); "--> EVAL PERFORMANCE" then its f"     | > avg_loss: X"
# after each epoch's evaluation.
_COQUI_VALUE = re.compile(r"[^\S\n]*\((?:tensor\([^()\n]*\)|[^()|\n]*)\)|tensor\(([^,()\n]*)(?:, device='[^'\n]*')?\)")


def _coqui_values(text: str) -> str:
    """Each value alone: its average in brackets dropped, a tensor written as its number."""
    return _COQUI_VALUE.sub(lambda m: m.group(1) or "", text)


COQUI = Dialect(
    name="coqui",
    description='Coqui TTS Trainer ("--> STEP: S/N -- GLOBAL_STEP: G", then "| > loss: X  (avg)" lines)',
    shapes=(
        Shape(re.compile(r"--> (?:TIME: [^\n]*? -- )?STEP: \d+/\d+ -- GLOBAL_STEP: (\d+)([^\n]*)"), fields="|",
              keys={"loss": metrics.LOSS, "current_lr": metrics.LR, "grad_norm": metrics.GRAD_NORM_TOTAL}),
    ),
    # (its indent of 5 before "| >", 6 in a paste's)
    joins=re.compile(r"\n[^\S\n]*\| > "),
    join_with=" | ",
    rewrite=_coqui_values,
    rewrite_needs=("(",),
    drop_words=("eval",),
    unstepped_evaluation=re.compile(rf"--> EVAL PERFORMANCE[^\n]*?\| avg_loss:[^\S\n]*({_NUM})"),
    sniff=re.compile(r"--> (?:TIME: [^\n]*? -- )?STEP: \d+/\d+ -- GLOBAL_STEP: \d+"),
    min_records=1,  # (a paste of the last step before a crash)
)

# rsl_rl's OnPolicyRunner (legged_gym, Isaac Lab, MuJoCo Playground's locomotion): a block each learning
# iteration, "#"*80, then f"Learning iteration {it}/{tot_iter}" centred, then one f"{'Value function loss:':>{pad}}
# {v:.4f}" line per value ("Mean value_function loss:", "Mean value loss:" in later versions; "Mean reward:",
# "Mean total reward:" the episodes' return). The value loss is the loss (an RL run's: judged for NaN and inf).
_RSL_RL_BLOCK = re.compile(r"\n(?![^\S\n]*(?:#{20}|(?:\x1b\[1m)?[^\S\n]*Learning iteration ))")
RSL_RL = Dialect(
    name="rsl_rl",
    description='rsl_rl (legged_gym, Isaac Lab: "Learning iteration N/M", then "Value function loss: X" lines)',
    shapes=(
        Shape(re.compile(r"Learning iteration (\d+)/\d+([^\n]*)"), fields="|",
              keys={"value function loss": metrics.LOSS, "mean value_function loss": metrics.LOSS,
                    "mean value loss": metrics.LOSS, "surrogate loss": "surrogate_loss",
                    "mean surrogate loss": "surrogate_loss", "mean reward": "episode_reward_mean",
                    "mean total reward": "episode_reward_mean"}),
    ),
    joins=_RSL_RL_BLOCK,
    join_with=" | ",
    sniff=re.compile(r"Learning iteration \d+/\d+"),
    min_records=1,
)

# lightweight-human-pose-estimation's train.py: print('Iter: {}'.format(num_iter)), then for each refinement stage
# 'stage{}_pafs_loss:     {}' and 'stage{}_heatmaps_loss: {}' on lines of their own (each the mean since the
# last print): the stages' terms add up to the loss it optimises.
POSE_STAGES = Dialect(
    name="pose_stages",
    description='lightweight-human-pose-estimation ("Iter: N", then "stageK_pafs_loss: X" / '
                '"stageK_heatmaps_loss: Y" lines)',
    shapes=(
        # (after a tqdm bar drawn with no line end: "  1%|   | 4/516 [00:13<27:49,  3.26s/it]Iter: 3100")
        Shape(re.compile(r"(?:^|(?<=/it\])|(?<=it/s\]))Iter: (\d+)([^\n]*)", re.MULTILINE), fields="|"),
    ),
    joins=re.compile(r"\n(?=[^\S\n]*stage\d+_\w+_loss:)"),
    join_with=" | ",
    sniff=re.compile(r"stage\d+_(?:pafs|heatmaps)_loss:"),  # (one line: the sniff counts lines)
    min_records=1,
    loss_terms=LossTerms(term="stage", alone=True),
)

# zjy-ucas/ChineseNER's main.py (and its forks): logger.info("iteration:{} step:{}/{}, NER loss:{:>9.6f}".format(
# iteration, step % steps_per_epoch, steps_per_epoch, np.mean(loss))): the iteration is the epoch (from 1), the
# step a count inside it.
CHINESE_NER = Dialect(
    name="chinese_ner",
    description='ChineseNER ("iteration:1 step:100/1044, NER loss:31.880068")',
    shapes=(
        Shape(re.compile(rf"\biteration:(\d+) step:?(\d+)/(\d+),[^\S\n]*NER loss:[^\S\n]*({_NUM})"),
              head=("epoch", "iter", "total", metrics.LOSS)),
    ),
    sniff=re.compile(r"iteration:\d+ step:?\d+/\d+,[^\S\n]*NER loss:"),
    min_records=1,
)

# WeNet (wenet/utils/train_utils.py log_per_step, executor.py before it): logging.debug of
# f"TRAIN Batch {epoch}/{batch} loss {loss:.6f} loss_att ... lr {lr:.8f} rank 0" (newer versions:
# "TRAIN | steps/sec 2.381| Batch {epoch}/{step} loss ...", the step going on across epochs); its
# "CV Batch" lines are the evaluation's own batches; "Epoch {e} [Step {s}] CV info ... cv_loss X"
# closes each epoch. Its executor before September 2021 printed "TRAIN Batch {batch_idx}/{num_total_batch}
# loss ...": the batch of the epoch's count (_wenet_batch_of_total).
_WENET_BATCH = re.compile(r"(\bTRAIN\b[^\n]*?\bBatch )(\d+)/(\d+)( loss )")


def _wenet_batch_of_total(text: str) -> str:
    """WeNet's older lines, "Batch {batch}/{batches in the epoch}", as "Batch {batch} of {batches}",
    where every line's second number is the same and below it the first moves by a logging
    interval (or, at one batch only, stands above 1,000: no epoch's): read as a count within the
    epoch, not as epoch/batch (a NaN at batch 20,100 of 282,164 was "at step 282164"). A newer log
    that prints one line an epoch has its epochs move by 1 over one step: "Batch 0/100", "Batch
    1/100" (CosyVoice's).

    Example:
        >>> _wenet_batch_of_total("TRAIN Batch 100/282164 loss 9.1\\nTRAIN Batch 200/282164 loss 8.9\\n")
        'TRAIN Batch 100 of 282164 loss 9.1\\nTRAIN Batch 200 of 282164 loss 8.9\\n'
    """
    found = _WENET_BATCH.findall(text)
    if not found:  # (a part of a log, its TRAIN word elsewhere)
        return text
    firsts, seconds = sorted({int(m[1]) for m in found}), {int(m[2]) for m in found}
    moves = [b - a for a, b in zip(firsts, firsts[1:])]
    if len(seconds) != 1 or not firsts[-1] < min(seconds) or not (moves and min(moves) > 1 or firsts[0] > 1000):
        return text
    return _WENET_BATCH.sub(r"\1\2 of \3\4", text)


# WeNet's every rank prints its own batches' losses, each line ending in its "rank N": the lowest rank's are read.
_WENET_RANK = re.compile(r"^[^\n]*\bTRAIN\b[^\n]*\brank (\d+)[^\S\n]*$", re.MULTILINE)


def _wenet_one_rank(text: str) -> str:
    """``text`` without the training lines of all ranks but the lowest, where several print.

    Example:
        >>> _wenet_one_rank("TRAIN Batch 4/100 loss 12.6 rank 0\\nTRAIN Batch 4/100 loss 16.8 rank 1\\n")
        'TRAIN Batch 4/100 loss 12.6 rank 0\\n'
    """
    ranks = {int(m.group(1)) for m in _WENET_RANK.finditer(text)}
    if len(ranks) < 2:
        return text
    first = min(ranks)
    return without_lines(text, _WENET_RANK, lambda match: int(match.group(1)) != first)


WENET = Dialect(
    name="wenet",
    description='WeNet ("TRAIN Batch E/N loss X loss_att ... lr L rank 0", "Epoch E CV info cv_loss X")',
    shapes=(
        Shape(re.compile(r"\bTRAIN\b[^\n]*?\bBatch (\d+)/(\d+) (loss [^\n]*)"), head=("epoch0", "iter"),
              separators=(), keys={"loss": metrics.LOSS, "lr": metrics.LR, "grad_norm": metrics.GRAD_NORM_TOTAL}),
        Shape(re.compile(r"\bTRAIN\b[^\n]*?\bBatch (\d+) of (\d+) (loss [^\n]*)"), head=("iter", "total"),
              separators=(), keys={"loss": metrics.LOSS, "lr": metrics.LR, "grad_norm": metrics.GRAD_NORM_TOTAL}),
        # (read among the evaluation lines, as val_loss at its step)
        Shape(re.compile(rf"\bEpoch \d+ Step (\d+) CV info [^\n]*?\bcv_loss ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
    drop_words=("cv",),
    epoch_evaluation=Shape(re.compile(rf"\bEpoch (\d+) CV info [^\n]*?\bcv_loss ({_NUM})"), head=("epoch0", metrics.LOSS)),
    sniff=re.compile(r"\bTRAIN\b[^\n]*?\bBatch \d+/\d+ loss (?:[-+\d.]|nan|inf)"),  # (a paste of NaN lines alone too)
    min_records=2,
    rewrite=lambda text: _wenet_batch_of_total(_wenet_one_rank(text)),
    rewrite_needs=("TRAIN",),
)

# nnU-Net (v2) training_log_*.txt: every line "<date> <time>.<us>: <message>"; an epoch is
# "Epoch N" (from 0), then "Current learning rate: L", "train_loss X", "val_loss X", "Pseudo dice
# [...]", "Epoch time: S s" lines. Its loss includes a Dice term: below zero when training well.
# nnU-Net v1 printed "epoch:  N" without a time, then "train loss : X", "validation loss: X", "lr: L".
# A line may end in a space (its print joins its arguments with one); a line without a time inside
# an epoch (a data loader's "using pin_memory on device 0") is part of it.
_NNUNET_TIME = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?: "
# nnU-Net v1's trainer gives up on a training whose foreground Dice is 0 at epoch 100: it lowers the momentum
# and starts again from new weights, saying so ("At epoch 100, the mean foreground Dice was 0. ... Momentum
# has now been reduced to 0.95 and network weights have been reinitialized").
_NNUNET_REINIT = re.compile(r"At epoch (\d+), the mean foreground Dice was 0\.")


def _nnunet_note(text: str) -> str | None:
    """The warning for a log in which nnU-Net started its network over from new weights, else None.

    Example:
        >>> _nnunet_note("2020-06-19 00:32:05.059271: At epoch 100, the mean foreground Dice was 0. This can be")[:46]
        'at epoch 100 nnU-Net reinitialized the network'
    """
    found = _NNUNET_REINIT.search(text)
    if found is None:
        return None
    return (f"at epoch {found.group(1)} nnU-Net reinitialized the network's weights (and lowered its momentum to "
            "0.95): its mean foreground Dice had stayed 0, the model had learned to segment nothing; the epochs "
            "before are lost, and a Dice of 0 again after it is a dataset's problem (labels, spacing), not the "
            "optimizer's")


NNUNET = Dialect(
    name="nnunet",
    description='nnU-Net training logs ("Epoch N", then "train_loss X", "val_loss X" lines; v1\'s "epoch:  N", '
                '"train loss : X")',
    shapes=tuple(
        Shape(re.compile(rf"{_NNUNET_TIME}(?:[^\S\n]*\| )?(?:Epoch|epoch:)[^\S\n]+(\d+)[^\S\n]*\|(?:[^\n]*?\|)? {name}"
                         rf"[^\S\n]*:?[^\S\n]*({_NUM})(?![^\s|])"), head=(metrics.STEP, key))
        for name, key in (("train[_ ]loss", metrics.LOSS), ("(?:val|validation)[_ ]loss", metrics.VAL_LOSS),
                          ("(?:Current learning rate|lr)", metrics.LR))),
    # Each epoch's lines after its "Epoch N" line join it (an empty message ends the epoch), an indented
    # one too (the second line of a Python warning: numpy's "RuntimeWarning: invalid value encountered in
    # scalar divide" before a NaN epoch's "train_loss nan" had cut the epoch there).
    joins=re.compile(rf"\n(?:{_NNUNET_TIME}(?!Epoch \d+[^\S\n]*$)|(?!{_NNUNET_TIME}))(?=[^\S\n]*\S)", re.MULTILINE),
    join_with=" | ",
    sniff=re.compile(rf"^{_NNUNET_TIME}train(?:_loss| loss :) [-+]?(?:\d|nan)", re.MULTILINE),
    min_records=1,
    step_unit="epoch",
    note=_nnunet_note,
)

# GluonTS's MXNet Trainer (and PyTorchTS after it): a tqdm bar over each epoch's batches whose postfix
# holds the epoch's running mean loss and the epoch: "50/50 [00:05<00:00, 9.6it/s, epoch=1/100,
# avg_epoch_loss=5.51]" (from 1, of the epochs), older "99it [00:22, 4.39it/s, avg_epoch_loss=0.945,
# epoch=0]" (from 0, no total); each epoch then logs "Epoch[0] Evaluation metric 'epoch_loss'=0.347671"
# (from 0; read where no bar is).
_GLUONTS_COUNT = r"(?<![\d/])(\d+)/(\d+) \[[^\]\n]*?"  # a bar with its total ...
_GLUONTS_ITS = r"(?<![\d/])(\d+)it \[[^\]\n]*?"  # ... and without
GLUONTS = Dialect(
    name="gluonts",
    description="GluonTS / PyTorchTS bars (\"50/50 [..., epoch=1/100, avg_epoch_loss=X]\", \"99it [..., "
                "avg_epoch_loss=X, epoch=0]\")",
    shapes=(
        Shape(re.compile(rf"{_GLUONTS_COUNT}\bavg_epoch_loss=({_NUM}), epoch=(\d+)\]"),
              head=("iter", "total", metrics.LOSS, "epoch0")),
        Shape(re.compile(rf"{_GLUONTS_ITS}\bavg_epoch_loss=({_NUM}), epoch=(\d+)\]"), head=("iter", metrics.LOSS, "epoch0")),
        Shape(re.compile(rf"{_GLUONTS_COUNT}\bepoch=(\d+)/\d+, avg_epoch_loss=({_NUM})\]"),
              head=("iter", "total", "epoch", metrics.LOSS)),
    ),
    min_records=2,
)
GLUONTS_EPOCHS = Dialect(
    name="gluonts",
    description="GluonTS's epoch lines (\"Epoch[N] Evaluation metric 'epoch_loss'=X\")",
    shapes=(
        Shape(re.compile(rf"\bEpoch\[(\d+)\] Evaluation metric '(?:train_)?epoch_loss'=({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\bEpoch\[(\d+)\] Evaluation metric 'validation_epoch_loss'=({_NUM})"),
              head=(metrics.STEP, metrics.VAL_LOSS)),
        Shape(re.compile(rf"\bEpoch\[(\d+)\] Learning rate is ({_NUM})"), head=(metrics.STEP, metrics.LR)),
    ),
    min_records=2,
    step_unit="epoch",
)

# ESPnet2's trainer at each epoch's end: "7epoch results: [train] iter_time=..., loss_ctc=17.181, ..., loss=15.307,
# ..., [valid] loss_ctc=9.870, cer_ctc=nan, ..., loss=8.1, ... [att_plot] time=..." (its logger's prefix before it):
# the epoch's mean training loss, and the validation's. A log of its batch lines is the progress lines' reader's.
ESPNET2_EPOCHS = Dialect(
    name="espnet2",
    description='ESPnet2\'s epoch results ("7epoch results: [train] ..., loss=X, ... [valid] ..., loss=Y")',
    shapes=(
        Shape(re.compile(rf"\b(\d+)epoch results: \[train\][^\[\n]*?(?<![\w/])loss=({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\b(\d+)epoch results: \[train\][^\n]*?\[valid\][^\[\n]*?(?<![\w/])loss=({_NUM})"),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    min_records=2,
    step_unit="epoch",
)

# The Hugging Face Flax example scripts (transformers' run_clm_flax / run_mlm_flax / run_t5_mlm_flax, diffusers'
# train_text_to_image_flax): tqdm.write(f"Step... ({cur_step} | Loss: {loss}, Learning Rate: {lr})"), evaluations
# "Step... (N | Eval Loss: X | ...)" (run_mlm_flax's "Step... (N | Loss: X, Acc: A)"); epoch scripts
# f"Epoch... ({epoch + 1}/{num_epochs} | Loss: {loss}[, Learning Rate: {lr}])", their "| Eval Loss: X" after.
HF_FLAX = Dialect(
    name="hf_flax",
    description='Hugging Face Flax example scripts ("Step... (500 | Loss: 3.2, Learning Rate: 0.0001)")',
    shapes=(
        Shape(re.compile(rf"\bStep\.\.\. \((\d+) \| Loss: ({_NUM})(?:, Learning Rate: ({_NUM}))?\)"),
              head=(metrics.STEP, metrics.LOSS, metrics.LR)),
        Shape(re.compile(rf"\bStep\.\.\. \((\d+) \| (?:Eval )?Loss: ({_NUM})(?:, Acc: {_NUM}\)| \|)"),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"Step\.\.\. \(\d+ \| (?:Eval )?Loss: "),
    min_records=1,
)
HF_FLAX_EPOCHS = Dialect(
    name="hf_flax",
    description='Hugging Face Flax example scripts\' epoch lines ("Epoch... (39/116 | Loss: 0.1878)")',
    shapes=(
        Shape(re.compile(rf"\bEpoch\.\.\. \((\d+)/\d+ \| Loss: ({_NUM})(?:, Learning Rate: ({_NUM}))?\)"),
              head=(metrics.STEP, metrics.LOSS, metrics.LR)),
        Shape(re.compile(rf"\bEpoch\.\.\. \((\d+)/\d+ \| Eval Loss: ({_NUM})"), head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"Epoch\.\.\. \(\d+/\d+ \| (?:Eval )?Loss: "),
    min_records=1,
    step_unit="epoch",
)

# Mozilla DeepSpeech and Coqui STT (training/deepspeech_training/train.py, run_set): a progress bar a set
# and epoch, "Epoch 3 |   Training | Elapsed Time: 0:28:35 | Steps: 2267 | Loss: 38.781706", its loss the
# mean over the epoch so far, its count the batches of this epoch (the same at each epoch's end: read as
# the step, every epoch was one); then "Epoch 3 | Validation | ... | Loss: 12.9 | Dataset: dev.csv" a
# dev set (several dev sets: the last printed is the epoch's val_loss).
_DEEPSPEECH_BAR = r"\bEpoch (\d+) \|[^\S\n]*{set} \| Elapsed Time: [^|\n]*\| Steps: \d+ \| Loss: "
DEEPSPEECH = Dialect(
    name="deepspeech",
    description='Mozilla DeepSpeech / Coqui STT epochs ("Epoch 3 |   Training | Elapsed Time: ... | Steps: 2267 | '
                'Loss: 38.78", and its Validation lines)',
    shapes=(
        Shape(re.compile(_DEEPSPEECH_BAR.format(set="Training") + f"({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(_DEEPSPEECH_BAR.format(set="Validation") + f"({_NUM})"),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(_DEEPSPEECH_BAR.format(set="(?:Training|Validation)")),
    min_records=1,
    step_unit="epoch",
)

# FuxiCTR (the BARS benchmark's CTR models): logging lines "Train loss: X" (the mean since the last
# evaluation), then "Evaluation @epoch E - batch B: " and "[Metrics] AUC: A - logloss: L", and
# "************ Epoch=E end ************"; its first versions printed "--- B/N batches finished ---",
# "Train loss: X", then the epoch's end. Each such line joins the one before it.
FUXICTR = Dialect(
    name="fuxictr",
    description='FuxiCTR ("Train loss: X", then "Evaluation @epoch E - batch B:" or "Epoch=E end")',
    shapes=(
        Shape(re.compile(rf"\bTrain loss: ({_NUM}) \|[^\n]*?\bEvaluation @epoch (\d+) - batch (\d+):"),
              head=(metrics.LOSS, "epoch", "iter")),
        Shape(re.compile(rf"--- (\d+)/(\d+) batches finished ---[^\n]*?\| [^\n]*?\bTrain loss: ({_NUM}) \|"
                         rf"[^\n]*?\bEpoch=(\d+) end \*"),
              head=("iter", "total", metrics.LOSS, "epoch")),
    ),
    joins=re.compile(r"\n(?=[^\n]*(?:\bTrain loss: |\bEvaluation @epoch \d+ - batch \d+:|\*{12} Epoch=\d+ end \*{12}))"),
    join_with=" | ",
    sniff=re.compile(r"\*{12} Epoch=\d+ end \*{12}"),
    min_records=2,
)

# Darknet (pjreddie's and AlexeyAB's YOLO, examples/detector.c, classifier.c, rnn.c): printf of
# "%d: %f, %f avg, %f rate, %lf seconds, %d images" (AlexeyAB: "... avg loss, ..., %f hours left";
# the classifier "%ld, %.3f: ..." with the epoch after the batch): the batch, its loss, the loss's
# running average (0.9 / 0.1) and the LR. "-nan" among the Region lines between is no loss.
DARKNET = Dialect(
    name="darknet",
    description='Darknet / YOLO ("N: X, Y avg loss, L rate, S seconds, I images")',
    shapes=(
        Shape(re.compile(rf"^[^\S\n]*(\d+)(?:, {_NUM})?: ({_NUM}), {_NUM} avg(?: loss)?, ({_NUM}) rate, ",
                         re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS, metrics.LR)),
    ),
    sniff=re.compile(rf"^[^\S\n]*\d+(?:, {_NUM})?: {_NUM}, {_NUM} avg(?: loss)?, {_NUM} rate, ", re.MULTILINE),
    min_records=2,
)

# tinygrad's trainers (examples/hlb_cifar10.py, examples/mlperf/model_train.py, ...): f"{i:5} {ms:7.2f} ms run,
# {ms:7.2f} ms python, ... {loss:5.2f} loss, {lr:.6f} LR, {gb:.2f} GB used, {gflops:9.2f} GFLOPS": the value
# before its name; the llama trainer times its step in seconds ("93.44 s run").
TINYGRAD = Dialect(
    name="tinygrad",
    description='tinygrad ("  3  7.34 s run, ..., 11.8750 loss, 0.000002 LR, 1454.57 GB used, ...")',
    shapes=(
        Shape(re.compile(rf"^[^\S\n]*(\d+)[^\S\n]+{_NUM}[^\S\n]+m?s run,[^\n]*?[^\S\n]({_NUM}) loss, ({_NUM}) LR\b",
                         re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS, metrics.LR)),
    ),
    sniff=re.compile(rf" loss, {_NUM} LR, "),
    min_records=2,
)

# gpt-2-simple and nshepperd's gpt-2 train.py: '[{counter} | {time:2.2f}] loss={loss:2.2f} avg={avg:2.2f}' (the
# counter goes on from a checkpoint's; avg is the running mean since the process started).
GPT2_SIMPLE = Dialect(
    name="gpt2_simple",
    description='gpt-2-simple ("[2010 | 60.42] loss=2.29 avg=2.29")',
    shapes=(
        Shape(re.compile(rf"^[^\S\n]*\[(\d+) \| {_NUM}\] loss=({_NUM}) avg={_NUM}", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(rf"\] loss={_NUM} avg="),
    min_records=2,
)

# VideoPose3D's run.py and its forks for 3D human pose (PoseFormer, MixSTE, MHFormer, P-STMO, ...): each epoch
# '[%d] time %.2f lr %f 3d_train %f 3d_eval %f 3d_valid %f' (epochs from 1; the MPJPE in mm, the training
# set's as trained, evaluated, then the validation set's), '[%d] time %.2f lr %f 3d_train %f' where it does not
# evaluate. 3d_train is what the training minimises; 3d_valid its val_loss.
# (the "3" of its keys a digit: patterns are matched on line skeletons, every digit a 0)
_VIDEOPOSE3D = rf"^\[(\d+)\] time {_NUM} lr ({_NUM}) \dd_train ({_NUM})"
_VIDEOPOSE3D_LINE = re.compile(_VIDEOPOSE3D, re.MULTILINE)
VIDEOPOSE3D = Dialect(
    name="videopose3d",
    description='VideoPose3D and its forks (PoseFormer, MixSTE, MHFormer: "[E] time T lr L 3d_train X 3d_eval Y '
                '3d_valid Z", the MPJPE in mm)',
    shapes=(
        Shape(_VIDEOPOSE3D_LINE, head=(metrics.STEP, metrics.LR, metrics.LOSS)),
        Shape(re.compile(rf"{_VIDEOPOSE3D} \dd_eval {_NUM} \dd_valid ({_NUM})", re.MULTILINE),
              head=(metrics.STEP, "_", "_", metrics.VAL_LOSS), beside=_VIDEOPOSE3D_LINE),
    ),
    min_records=2,
    step_unit="epoch",
)

# lucidrains' audiolm-pytorch SoundStreamTrainer: f"{steps}: soundstream total loss: {x:.3f}, soundstream recon loss:
# {r:.3f} | discr (scale 1) loss: {d:.3f} | ..." (a discriminator's loss per scale): the codec's total the loss, the
# first scale's discriminator loss_d.
SOUNDSTREAM = Dialect(
    name="soundstream",
    description='audiolm-pytorch SoundStream ("25001: soundstream total loss: 4.872, ... | discr (scale 1) '
                'loss: 2.284")',
    shapes=(
        Shape(re.compile(rf"^(\d+): soundstream total loss: ({_NUM}), soundstream recon loss: ({_NUM})"
                         rf"(?:[^\S\n]*\|[^\S\n]*discr \(scale [\d.]+\) loss: ({_NUM}))?", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS, "recon_loss", "loss_d")),
    ),
    sniff=re.compile(r"soundstream total loss: "),  # (a sniff opens with a literal)
    min_records=1,
)

# argusswift's YOLOv4-pytorch (train.py's logger): "=== Epoch:[  1/120],step:[ 70/197],img_size:[416],total_loss:6.4946|
# loss_ciou:2.0242|loss_conf:3.7922|loss_cls:0.6782|lr:0.0001": epochs from 0, the step a count inside each.
YOLOV4_PYTORCH = Dialect(
    name="yolov4_pytorch",
    description='YOLOv4-pytorch ("=== Epoch:[  1/120],step:[ 70/197],img_size:[416],total_loss:6.4946|...|lr:0.0001")',
    shapes=(
        Shape(re.compile(rf"\bEpoch:\[[^\S\n]*(\d+)/\d+\],step:\[[^\S\n]*(\d+)/(\d+)\],[^\n]*?\btotal_loss:({_NUM})"
                         rf"(?:[^\n]*?\|lr:({_NUM}))?"),
              head=("epoch0", "iter", "total", metrics.LOSS, metrics.LR)),
    ),
    sniff=re.compile(r"Epoch:\[[^\S\n]*\d+/\d+\],step:\[[^\S\n]*\d+/\d+\],"),
    min_records=1,
)

# HiFi-GAN's train.py (and the vocoders built on it: BigVGAN, ...): print("Steps : {:d}, Gen Loss Total :
# {:4.3f}, Mel-Spec. Error : {:4.3f}, s/b : {:4.3f}"): the generator's total (its mel L1 x45, feature
# matching and adversarial terms) is the loss; the mel error beside it is read as mel_error.
HIFIGAN = Dialect(
    name="hifigan",
    description='HiFi-GAN ("Steps : N, Gen Loss Total : X, Mel-Spec. Error : Y, s/b : T")',
    shapes=(
        # ("{:4.3f}" pads a nan to " nan")
        Shape(re.compile(rf"\bSteps : (\d+), Gen Loss Total :[^\S\n]+({_NUM}), Mel-Spec\. Error :[^\S\n]+({_NUM})"),
              head=(metrics.STEP, metrics.LOSS, "mel_error")),
    ),
    sniff=re.compile(r"\bSteps : \d+, Gen Loss Total : "),
    min_records=2,
)

# Marian NMT (src/training/scheduler.h): "Ep. E : Up. N : Sen. S : Cost X[ * labels @ ... after
# ...] : Time T : W words/s[ : gNorm G][ : L.r. L]", the cost a mean since the line before (per
# label with --cost-type ce-mean-words); "[valid] Ep. E : Up. N : <metric> : X : ..." lines, the
# cross-entropy ones the validation loss.
_MARIAN_CE = r"(?:ce-mean-words|ce-mean|ce-sum|cross-entropy)"
MARIAN = Dialect(
    name="marian",
    description='Marian NMT ("Ep. E : Up. N : Sen. S : Cost X ... : gNorm G : L.r. L")',
    shapes=(
        Shape(re.compile(rf"\bEp\. [\d.]+ : Up\. (\d+) : Sen\. [\d,]+ : Cost ({_NUM})"
                         rf"(?:[^\n]*? : gNorm ({_NUM}))?(?:[^\n]*? : L\.r\. ({_NUM}))?"),
              head=(metrics.STEP, metrics.LOSS, metrics.GRAD_NORM_TOTAL, metrics.LR)),
        Shape(re.compile(rf"\[valid\] Ep\. [\d.]+ : Up\. (\d+) : {_MARIAN_CE} : ({_NUM})"),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"\bEp\. [\d.]+ : Up\. \d+ : Sen\. [\d,]+ : Cost "),
    min_records=2,
)

# nanoT5 (nanoT5/utils/logging_utils.py): f"[train] Step {step} out of {total} | Loss --> X | Grad_l2
# --> G | Weights_l2 --> W | Lr --> L | Seconds_per_step --> S | "; "[eval] Step ..." for the
# evaluation.
_NANOT5_PAIR = re.compile(r" --> ")
NANOT5 = Dialect(
    name="nanot5",
    description='nanoT5 ("[train] Step N out of M | Loss --> X | Grad_l2 --> G | Lr --> L")',
    shapes=(
        Shape(re.compile(r"\[train\] Step (\d+) out of \d+ \|([^\n]*)"), fields="|",
              keys={"loss": metrics.LOSS, "grad_l2": metrics.GRAD_NORM_TOTAL, "lr": metrics.LR}),
        Shape(re.compile(r"\[eval\] Step (\d+) out of \d+ \|([^\n]*)"), fields="|", prefix="val_"),
    ),
    rewrite=lambda text: _NANOT5_PAIR.sub(": ", text),
    rewrite_needs=(" --> ",),
    sniff=re.compile(r"\[train\] Step \d+ out of \d+ \| Loss --> "),
    min_records=2,
)

# MLX's LoRA and fine-tune trainers (mlx-lm's tuner/trainer.py, mlx-vlm, mlx-examples' lora.py):
# f"Iter {it}: Train loss {loss:.3f}, Learning Rate {lr:.3e}, It/sec ..., Tokens/sec ..., Trained
# Tokens ..., Peak mem ... GB" (the first versions without the lr) and f"Iter {it}: Val loss
# {val_loss:.3f}, Val took {t:.3f}s".
MLX = Dialect(
    name="mlx",
    description='MLX LoRA / fine-tune trainers ("Iter N: Train loss X, Learning Rate L, ...", "Iter N: Val loss X")',
    shapes=(
        Shape(re.compile(rf"\bIter (\d+): Train loss ({_NUM})\b"), head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\bIter (\d+): Val loss ({_NUM})\b"), head=(metrics.STEP, "val_loss")),
    ),
    sniff=re.compile(r"\bIter \d+: Train loss "),
    min_records=2,
)

# Avalanche's TextLogger / InteractiveLogger (avalanche/logging/text_logging.py): after each training
# epoch f"Epoch {e} ended." then one f"\t{name} = {value}" line per metric, sorted by name: the
# epoch's mean loss "Loss_Epoch/train_phase/train_stream/Task000", the last minibatch's "Loss_MB/...".
# Its epochs start from 0 again with each experience ("Start training on experience 1"): the records
# are numbered in order. Its evaluation blocks ("> Eval on experience 4 ...") are no records.
_AVALANCHE_EPOCH_LOSS = re.compile(r"\bLoss_Epoch/train_phase/train_stream/Task\d+ = ")
AVALANCHE = Dialect(
    name="avalanche",
    description='Avalanche ("Epoch N ended." then "\\tLoss_Epoch/train_phase/train_stream/Task000 = X" lines)',
    shapes=(
        # (the epoch as printed where it never starts again: one experience's "Epoch 9 ended." .. "Epoch 15 ended.")
        Shape(re.compile(r"^Epoch (\d+) ended\.((?: \| [^\n]*)?)$", re.MULTILINE), head=(metrics.STEP,), fields="|",
              keys={"loss": metrics.LOSS}, require="loss"),
    ),
    joins=re.compile(r"\n[^\S\n]+(?=[\w/]+ = )"),
    join_with=" | ",
    rewrite=lambda text: _AVALANCHE_EPOCH_LOSS.sub("loss = ", text),
    rewrite_needs=("Loss_Epoch/train_phase",),
    step_from_order=True,
    step_unit="epoch",
    sniff=re.compile(r"^Epoch \d+ ended\.$", re.MULTILINE),
    min_records=2,
)

# Flower's run summary (flwr/server/app.py, server.py): its evaluation loss per round, the clients'
# aggregate ("distributed") and the server's own ("centralized"), as lists of (round, loss) pairs,
# "app_fit: losses_distributed [(1, 2.29), (2, 2.27)]" (from 1.5 on a "History (loss, distributed):"
# block of "round 1: 2.2907" lines). Written one a line, the clients' aggregate the loss where there
# is one, the server's beside it (or the loss where the clients report none).
_FLOWER_PAIRS = re.compile(r"\blosses_(distributed|centralized) \[((?:\(\d+, [^()\n]*\)(?:, )?)*)\]")
_FLOWER_PAIR = re.compile(r"\((\d+), ([^()\n]*)\)")
_FLOWER_HISTORY = re.compile(r"History \(loss, (distributed|centralized)\):")
# (later releases log the block as pprint writes a string: "INFO :      ('\\tround 1: 7.4586\\n'", then
# "INFO :       '\\tround 2: 1.9498\\n'" ... "'\\tround 5: 0.8425\\n')", the tab and line end escaped)
_FLOWER_ROUND = re.compile(rf"^[^\n]*?(?:\b|(?<=\\t))round (\d+): ({_NUM})(?:\\n'\)?)?[^\S\n]*$")


def _flower_rounds(text: str) -> str:
    """Flower's summaries of its losses by round, one "flower round R <which>_loss: X" line each."""
    found: dict[str, list[tuple[str, str]]] = {}
    for m in _FLOWER_PAIRS.finditer(text):
        found.setdefault(m.group(1), []).extend(_FLOWER_PAIR.findall(m.group(2)))
    which = None
    for line in text.split("\n") if "History (loss" in text else ():
        heading = _FLOWER_HISTORY.search(line)
        if heading:
            which = heading.group(1)
            continue
        pair = _FLOWER_ROUND.match(line) if which else None
        if pair is None:
            which = None
            continue
        found.setdefault(which, []).append(pair.groups())
    names = {"distributed": "loss", "centralized": "centralized_loss" if found.get("distributed") else "loss"}
    rows = [f"flower round {r} {names[which]}: {v.strip()}" for which in ("distributed", "centralized")
            for r, v in found.get(which, [])]
    return text + "\n" + "\n".join(rows) + "\n" if rows else text


FLOWER = Dialect(
    name="flower",
    description='Flower\'s run summary ("losses_distributed [(1, X), ...]", "History (loss, distributed): round 1: X")',
    shapes=(
        Shape(re.compile(rf"^flower round (\d+) ((?:centralized_)?loss: {_NUM})$", re.MULTILINE),
              keys={"loss": metrics.LOSS}),
    ),
    rewrite=_flower_rounds,
    rewrite_needs=("losses_distributed", "losses_centralized", "History (loss"),
    sniff=re.compile(r"\blosses_(?:distributed|centralized) \[\(\d+, |\bHistory \(loss, (?:distributed|centralized)\):"),
    min_records=1,
    note=lambda text: ("the steps are Flower's rounds and the loss its evaluation loss in each (the clients' "
                       "aggregate where they report one, the server's own as centralized_loss beside it)"),
)

# Trax (trax/supervised/training.py, trainer_lib.py): "Step % 6d: %s" of "train <loss layer name> |
# % .8f" (the mean since the last report) and "eval <metric> | % .8f" lines.
_TRAX_LOSS = r"\w*(?:Loss|loss|CrossEntropy)\w*"
TRAX = Dialect(
    name="trax",
    description='Trax ("Step N: train CrossEntropyLoss |  X", "Step N: eval CrossEntropyLoss |  X")',
    shapes=(
        Shape(re.compile(rf"^Step +(\d+): train +{_TRAX_LOSS} \| +({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"^Step +(\d+): eval +{_TRAX_LOSS} \| +({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(rf"^Step +\d+: train +{_TRAX_LOSS} \| +[-+\dn]", re.MULTILINE),
    min_records=2,
)

# DARTS and the searches built on its code (PC-DARTS, P-DARTS, GDAS, ...): logging.info('train %03d %e %f
# %f', step, objs.avg, top1.avg, top5.avg) after its logger's time, the step counted inside the epoch
# and the loss the epoch's running mean; P-DARTS': "Train Step: 050 Objs: 1.03e-01 Acc: 97.76". Its
# "valid 050 ..." lines are the evaluation's, no records; nor is each epoch's step 000, a mean of one
# batch among means of hundreds (P-DARTS' 0.0385, then 0.103: "a spike of x2.7").
DARTS = Dialect(
    name="darts",
    description='DARTS, PC-DARTS, P-DARTS ("train 050 6.91e+00 0.089 0.604", "Train Step: 050 Objs: X Acc: A")',
    shapes=(
        Shape(re.compile(rf"^(?:[^\n]*?[^\S\n])?train (?!0+ )(\d+) ({_NUM}) [\d.]+ [\d.]+[^\S\n]*$", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\bTrain Step: (?!0+ )(\d+) Objs: ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(rf"(?:^|[^\S\n])train \d+ {_NUM} [\d.]+ [\d.]+[^\S\n]*$|\bTrain Step: \d+ Objs: ", re.MULTILINE),
    min_records=3,
    step_wraps=True,
)

# SpeechBrain's separation recipes (SepFormer, DPRNN, Conv-TasNet): train_log.txt's "epoch: 3, lr: 1.50e-04 -
# train si-snr: -4.05e-01 - valid si-snr: -5.13e+00", its loss the negative SI-SNR under the name
# "si-snr" (lower is better, below zero once it separates): one line an epoch.
SPEECHBRAIN_SEPARATION = Dialect(
    name="speechbrain_separation",
    description='SpeechBrain separation train_log ("epoch: N, lr: L - train si-snr: X - valid si-snr: Y")',
    shapes=(
        Shape(re.compile(rf"^epoch: (\d+), lr: ({_NUM}) - train si-snr: ({_NUM})(?: - valid si-snr: ({_NUM}))?",
                         re.MULTILINE), head=(metrics.STEP, metrics.LR, metrics.LOSS, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"^epoch: \d+, lr: [^\n]* - train si-snr: ", re.MULTILINE),
    min_records=2,
    step_unit="epoch",
)

# NGCF, KGAT and LightGCN (xiangwang1223's TensorFlow code and its PyTorch ports): "Epoch %d [%.1fs]:
# train==[%.5f=%.5f + %.5f]" (the loss, then its terms), "Epoch %d [%.1fs + %.1fs]: train==[...],
# recall=[...], ..." where the epoch was tested; the epoch is the step.
NGCF = Dialect(
    name="ngcf",
    description='NGCF / KGAT / LightGCN ("Epoch N [T s]: train==[X=A + B]")',
    shapes=(
        Shape(re.compile(rf"\bEpoch (\d+) \[[\d.]+s(?: \+ [\d.]+s)?\]: train==\[({_NUM})="),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    # its check before it exits: "if np.isnan(loss) == True: print('ERROR: loss is nan.')"
    events=(EventLine(re.compile(r"^ERROR: loss is nan\.", re.MULTILINE), EventKind.NONFINITE, source="loss_check",
                      detail={"metric": metrics.LOSS}),),
    sniff=re.compile(r"\bEpoch \d+ \[[\d.]+s(?: \+ [\d.]+s)?\]: train==\["),
    min_records=2,
    step_unit="epoch",
)

# MXNet's Speedometer (python/mxnet/callback.py): "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec"
# (before 1.2: "Batch [%d]") then "\t%s=%f" per metric, the batch counted inside the epoch; the
# loss is the metric named as one (CrossEntropy's "cross-entropy", NegativeLogLikelihood's
# "nll-loss", Loss' "loss"; insightface's LossValueMetric "lossvalue"). "Epoch[%d] Validation-%s=%f"
# closes an epoch. (Its tabs perhaps spaces, as pasted; a metric named "Loss" by a script's own EvalMetric,
# CornerNet's; a comma after each value, Deformable ConvNets' "RCNNLogLoss=0.680453,\t".)
_MXNET_LOSS = r"(?:cross-entropy|ce|nll-loss|[Ll]oss|lossvalue)"
MXNET = Dialect(
    name="mxnet",
    description='MXNet ("Epoch[E] Batch [A-B]\\tSpeed: S samples/sec\\tcross-entropy=X")',
    shapes=(
        Shape(re.compile(r"\bEpoch\[(\d+)\] Batch \[(?:\d+-)?(\d+)\][^\S\n]+Speed: [\d.]+ samples/sec([^\n]*)"),
              head=("epoch0", "iter"), separators=("=", ","),
              keys={"cross-entropy": metrics.LOSS, "ce": metrics.LOSS, "nll-loss": metrics.LOSS, "loss": metrics.LOSS,
                    "Loss": metrics.LOSS, "lossvalue": metrics.LOSS}),
    ),
    drop_words=("validation",),
    epoch_evaluation=Shape(re.compile(rf"\bEpoch\[(\d+)\] Validation-{_MXNET_LOSS}=({_NUM})"),
                           head=("epoch0", metrics.LOSS)),
    sniff=re.compile(rf"\bEpoch\[\d+\] Batch \[(?:\d+-)?\d+\][^\S\n]+Speed: [\d.]+ samples/sec[^\n]*[\t ]{_MXNET_LOSS}="),
    min_records=2,
)

# detectron2 stops with FloatingPointError("Loss became infinite or NaN at iteration=N!"): its last
# step line is finite, the NaN step is in the traceback alone.
_DETECTRON2_NAN = EventLine(re.compile(r"Loss became infinite or NaN at iteration=(?P<step>\d+)"), EventKind.NONFINITE,
                            source="detectron2", detail={"metric": metrics.LOSS})

# fast-reid's CommonMetricPrinter (detectron2's, the epoch put before the iteration): " eta: 0:46:32
# epoch/iter: 14/3199  total_loss: 42.13  loss_cls: 42.13  loss_triplet: 0  time: 0.2903  data_time:
# 0.0060  lr: 9.98e-03  max_mem: 6056M". The iteration is the global step (the generic reader took
# "iter: 14/3199" for step 14 of 3199).
FASTREID = Dialect(
    name="fastreid",
    description='fast-reid ("epoch/iter: E/N  total_loss: X  ...  lr: L")',
    shapes=(
        Shape(re.compile(r"\bepoch/iter:[^\S\n]*\d+/(\d+)[^\S\n]+([^\n]*)"), head=(metrics.STEP,),
              keys={"total_loss": metrics.LOSS, "lr": metrics.LR}),
    ),
    events=(_DETECTRON2_NAN,),
    sniff=re.compile(r"epoch/iter:[^\S\n]*\d+/\d+[^\S\n]+total_loss:"),  # (a literal first: searched fast)
    min_records=1,
)

# BTS and the monocular depth models trained with its loop (AdaBins, NeWCRFs, PixelFormer, iDisc,
# VA-DepthNet, ...): "[epoch][s/s_per_e/gs]: [{epoch}][{step}/{steps_per_epoch}/{global_step}], lr: {lr:.12f},
# loss: {loss:.12f}" (the uncertainty head's "unc_loss", some forks' "loss1"); the global step is the
# step. Its NaN check prints "NaN in loss occurred. Aborting training." (nonfinite_lines).
BTS = Dialect(
    name="bts",
    description='BTS and the depth models after it ("[epoch][s/s_per_e/gs]: [E][S/N/G], lr: L, loss: X")',
    shapes=(
        Shape(re.compile(r"\[epoch\]\[s/s_per_e/gs\]:[^\S\n]*\[\d+\]\[\d+/\d+/(\d+)\],?([^\n]*)"),
              head=(metrics.STEP,), separators=(":", ","),
              keys={"loss": metrics.LOSS, "unc_loss": metrics.LOSS, "loss1": metrics.LOSS, "lr": metrics.LR}),
    ),
    sniff=re.compile(r"\[epoch\]\[s/s_per_e/gs\]:[^\S\n]*\[\d+\]\[\d+/\d+/\d+\]"),
    min_records=1,
)

# YOLACT (and YOLACT++, its forks): train.py's "[%3d] %7d ||" of the epoch and the global iteration, then
# " %s: %.3f |" per loss term (B box, C confidence, M mask, S semantic segmentation, ...) and " T: %.3f ||
# ETA: %s || timer: %.3f": T, the terms' total, is the loss.
YOLACT = Dialect(
    name="yolact",
    description='YOLACT ("[  2]    1430 || B: 1.040 | C: 1.251 | M: 1.208 | S: 0.016 | T: 3.516 || ETA: ...")',
    shapes=(
        Shape(re.compile(r"^[^\S\n]*\[[^\S\n]*\d+\][^\S\n]+(\d+) \|\|([^\n|]*(?:\|[^\n|]+)*\|)\| ETA:", re.MULTILINE),
              head=(metrics.STEP,), fields="|", keys={"t": metrics.LOSS}),
    ),
    sniff=re.compile(r"^[^\S\n]*\[[^\S\n]*\d+\][^\S\n]+\d+ \|\|[^\n]*\bT: [^\n]*\|\| ETA:", re.MULTILINE),
    min_records=1,
    amp_lines=True,  # apex's "Gradient overflow.  Skipping step" lines between its own, where a fork trains in fp16
)

# KPConv (its PyTorch and TensorFlow trainers, and the point cloud models built on them:
# AdaptConv, ...): "e{:03d}-i{:04d} => L={:.3f} acc={:3.0f}% / t(ms): ..." (some with its loss
# terms, "L_C=", "L_I=", after it) at most once a second; the iteration counts inside the epoch.
KPCONV = Dialect(
    name="kpconv",
    description='KPConv ("e001-i0405 => L=0.507 acc= 77% / t(ms): ...")',
    shapes=(
        Shape(re.compile(rf"\be(\d+)-i(\d+) => L=({_NUM})"), head=("epoch", "iter", metrics.LOSS)),
    ),
    sniff=re.compile(r" => L=[-+.\d]"),  # (a literal first: searched fast; the shape asks the rest)
    min_records=1,
)

# PFLlib (federated learning): each round's "-------------Round number: N-------------", then
# "Evaluate global model" and the clients' "Averaged Train Loss: X" (the global model on their training
# data), test accuracy and AUC: the round is the step.
PFLLIB = Dialect(
    name="pfllib",
    description='PFLlib ("-------------Round number: N-------------", then "Averaged Train Loss: X")',
    shapes=(
        Shape(re.compile(rf"\bRound number: (\d+)-+[^\S\n]+(?:Evaluate global model[^\S\n]+)?Averaged Train Loss: ({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    joins=re.compile(r"\n+(?=Evaluate global model|Averaged Train Loss: )"),
    sniff=re.compile(r"^-+Round number: \d+-+[^\S\n]*$", re.MULTILINE),
    min_records=1,
)

# DCGAN-tensorflow (carpedm20's, and the TensorFlow GANs after it): "Epoch: [%2d] [%4d/%4d] time: %4.4f,
# d_loss: %.8f, g_loss: %.8f" (later "Epoch: [%2d/%2d] ..."), epochs from 0 (xrange(config.epoch)); its
# "[Sample] d_loss: ..., g_loss: ..." lines are a sample batch's, no step. The generator's is the loss.
DCGAN_TF = Dialect(
    name="dcgan_tf",
    description='DCGAN-tensorflow ("Epoch: [14] [ 398/1093] time: T, d_loss: X, g_loss: Y")',
    shapes=(
        Shape(re.compile(rf"\bEpoch: \[[^\S\n]*(\d+)(?:/[^\S\n]*\d+)?\] \[[^\S\n]*(\d+)/[^\S\n]*(\d+)\] time: [\d.]+, "
                         rf"d_loss: ({_NUM}), g_loss: ({_NUM})"),
              head=("epoch0", "iter", "total", "loss_d", metrics.LOSS)),
    ),
    sniff=re.compile(r"Epoch: \[[^\S\n]*\d+(?:/[^\S\n]*\d+)?\] \[[^\S\n]*\d+/[^\S\n]*\d+\] time: [\d.]+, d_loss: "),
    min_records=1,
)

# YOLOv3's and YOLOv5's results.txt before results.csv (ultralytics, 2019-2021): a row an epoch with
# no header, '%10s' * 2 + '%10.4g' * 11: "75/299  9.8G  box  obj  cls  total  targets  img_size  P  R
# mAP@.5  mAP@.5:.95  val_box  val_obj  val_cls"; the epoch as printed (from 0) the step, the total the loss.
_YOLO_RESULTS = (rf"^[^\S\n]*(\d+)/\d+[^\S\n]+[\d.]+[GM]?[^\S\n]+{_NUM}[^\S\n]+{_NUM}[^\S\n]+{_NUM}[^\S\n]+({_NUM})"
                 rf"[^\S\n]+\d+[^\S\n]+\d+(?:[^\S\n]+{_NUM}){{4}}[^\S\n]+({_NUM})[^\S\n]+({_NUM})[^\S\n]+({_NUM})[^\S\n]*$")
YOLO_RESULTS = Dialect(
    name="yolo_results",
    description="YOLOv3's and YOLOv5's results.txt ('75/299  9.8G  box  obj  cls  total  targets  img_size  P  R  "
                "mAP  mAP  val_box  val_obj  val_cls', no header)",
    shapes=(
        Shape(re.compile(_YOLO_RESULTS, re.MULTILINE), head=(metrics.STEP, metrics.LOSS, "val_box", "val_obj", "val_cls")),
    ),
    # (its cells by count, not by their numbers' syntax: the same lines, asked of every log's line
    # skeletons at a seventh of the cost)
    sniff=re.compile(r"^[^\S\n]*\d+/\d+[^\S\n]+[\d.]+[GM](?:[^\S\n]+\S+){4}[^\S\n]+\d+[^\S\n]+\d+(?:[^\S\n]+\S+){7}[^\S\n]*$",
                     re.MULTILINE),
    step_unit="epoch",
    min_records=2,
)

# MT-DNN (namisan/mt-dnn, and the multi-task models built on it): "Task [%2d] updates[%6d] train
# loss[%.5f] remaining[%s]", the updates the step.
MT_DNN = Dialect(
    name="mt_dnn",
    description='MT-DNN ("Task [ 0] updates[   500] train loss[0.60000] remaining[0:11:02]")',
    shapes=(
        Shape(re.compile(rf"updates\[[^\S\n]*(\d+)\][^\S\n]+train loss\[({_NUM})\]"), head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(r"updates\[[^\S\n]*\d+\][^\S\n]+train loss\["),
    min_records=1,
)

# NVIDIA's Tacotron 2 (train.py, and its many forks: Mellotron, Flowtron's ancestors, TTS
# courses): "Train loss {} {:.6f} Grad Norm {:.6f} {:.2f}s/it" (iteration, loss, grad norm, time),
# and "Validation loss {}: {:9f}  " at each checkpoint: the iteration is the step.
TACOTRON2 = Dialect(
    name="tacotron2",
    description='NVIDIA Tacotron 2 ("Train loss 500 0.512301 Grad Norm 0.932140 1.02s/it")',
    shapes=(
        Shape(re.compile(rf"\bTrain loss[^\S\n]+(\d+)[^\S\n]+({_NUM})[^\S\n]+Grad Norm[^\S\n]+({_NUM})"),
              head=(metrics.STEP, metrics.LOSS, metrics.GRAD_NORM_TOTAL)),
        Shape(re.compile(rf"\bValidation loss[^\S\n]+(\d+):[^\S\n]*({_NUM})"), head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(rf"Train loss[^\S\n]+\d+[^\S\n]+{_NUM}[^\S\n]+Grad Norm"),
    min_records=1,
)

# Unsloth's unsloth_train (unsloth_zoo's training loop for gradient accumulation): print(f"{step}, {loss}")
# after each logging step, glued to the tqdm bar drawn before it: " 4%|...| 11/312 [02:27<1:00:48,
# 12.12s/it]10, 2.2398".
UNSLOTH_TRAIN = Dialect(
    name="unsloth",
    description='Unsloth\'s unsloth_train ("...| 11/312 [02:27<1:00:48, 12.12s/it]10, 2.2398")',
    shapes=(
        Shape(re.compile(rf"(?:/it|it/s)\](\d+), ({_NUM})[^\S\n]*$", re.MULTILINE), head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(r"(?:/it|it/s)\]\d+, [-+\d.naifNI]"),
    min_records=1,
)

# A loss printed with its step in brackets after its name: GitYCC's crnn-pytorch, print('train_batch_loss[',
# i, ']: ', loss), "train_batch_loss[ 6510 ]:  1.5743603706359863".
STEP_AFTER_LOSS_KEY = Dialect(
    name="text",
    description='a loss with its step in brackets after its name ("train_batch_loss[ 6510 ]:  1.574")',
    shapes=(
        Shape(re.compile(rf"(?<![\w/])(?i:(?:train_)?(?:batch_)?loss)\[[^\S\n]*(\d+)[^\S\n]*\]:[^\S\n]*({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(r"loss\[[^\S\n]*\d+[^\S\n]*\]:"),
    min_records=1,
)

# triplet-reid (VisualComputingInstitute's person re-identification trainer): log.info('iter:{:6d}, loss
# min|avg|max: {:.3f}|{:.3f}|{:6.3f}, batch-p@{}: {:.2%}, ...'): the batch's triplet losses' least, mean and
# largest; the mean is the step's loss.
TRIPLET_REID = Dialect(
    name="triplet_reid",
    description='triplet-reid ("iter:    30, loss min|avg|max: 0.736|0.973| 3.527, batch-p@3: 16.15%")',
    shapes=(
        Shape(re.compile(rf"\biter:[^\S\n]*(\d+), loss min\|avg\|max:[^\S\n]*{_NUM}\|[^\S\n]*({_NUM})\|"),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(r"\bloss min\|avg\|max: "),
    min_records=1,
)

# charlesq34's PointNet, PointNet++, Frustum PointNets and VoteNet (and the point-cloud trainers built
# on them) log blocks: log_string('**** EPOCH %03d ****'), then 'mean loss: %f' under ' ---- batch:
# %03d ----' every few batches (VoteNet, PointNet++: one 'mean <key>: %f' line per statistic) or once
# an epoch (PointNet: after a '----' line, then its evaluation's 'eval mean loss: %f'); an evaluation
# block under '---- EPOCH %03d EVALUATION ----'. (A block ends at the next header: no record reads
# across one.)
_POINTNET_BLOCK_LINE = r"(?:(?![^\S\n]*(?:>[^\S\n]*)?(?:\*{3,}|-{2,}[^\S\n]*(?:batch|EPOCH)))[^\n]*\n){0,40}?"
_POINTNET_EPOCH = rf"^[^\S\n]*(?:>[^\S\n]*)?\*{{3,}}[^\S\n]*EPOCH[^\S\n]+(\d+)[^\S\n]*\*{{3,}}[^\S\n]*\n{_POINTNET_BLOCK_LINE}"
_POINTNET_EVALUATION = (rf"^[^\S\n]*(?:>[^\S\n]*)?-{{2,}}[^\S\n]*EPOCH[^\S\n]+(\d+)[^\S\n]+EVALUATION[^\S\n]*-{{2,}}[^\S\n]*\n"
                        rf"{_POINTNET_BLOCK_LINE}")
POINTNET_BATCHES = Dialect(
    name="pointnet",
    description="charlesq34's PointNet++ / VoteNet blocks (\" ---- batch: 010 ----\", then \"mean loss: X\")",
    shapes=(
        Shape(re.compile(rf"^[^\S\n]*(?:>[^\S\n]*)?-{{2,}}[^\S\n]*batch:[^\S\n]*(\d+)[^\S\n]*-{{2,}}[^\S\n]*\n"
                         rf"{_POINTNET_BLOCK_LINE}[^\S\n]*(?:>[^\S\n]*)?mean loss:[^\S\n]*({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"{_POINTNET_EVALUATION}[^\S\n]*(?:>[^\S\n]*)?(?:eval )?mean loss:[^\S\n]*({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"-- batch: \d+ --"),
    step_wraps=True,
    min_records=1,
)
POINTNET_EPOCHS = Dialect(
    name="pointnet",
    description="charlesq34's PointNet blocks (\"**** EPOCH 010 ****\", then \"mean loss: X\", \"eval mean loss: Y\")",
    shapes=(
        Shape(re.compile(rf"{_POINTNET_EPOCH}[^\S\n]*(?:>[^\S\n]*)?mean loss:[^\S\n]*({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"{_POINTNET_EPOCH}[^\S\n]*(?:>[^\S\n]*)?eval mean loss:[^\S\n]*({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS)),
        Shape(re.compile(rf"{_POINTNET_EVALUATION}[^\S\n]*(?:>[^\S\n]*)?(?:eval )?mean loss:[^\S\n]*({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"\*\*\* EPOCH \d+ \*\*\*"),
    step_unit="epoch",
    min_records=1,
)

# DGCNN (WangYueFt/dgcnn's PyTorch trainer, AnTao97/dgcnn.pytorch): "Train %d, loss: %.6f, train acc:
# %.6f, ..." and "Test %d, loss: %.6f, test acc: ..." once an epoch: the epoch is the step.
DGCNN = Dialect(
    name="dgcnn",
    description='DGCNN ("Train 31, loss: 1.429904, train acc: 0.940089", "Test 31, loss: ...")',
    shapes=(
        Shape(re.compile(rf"^[ \t]*Train (\d+), loss: ({_NUM}), train acc\b", re.MULTILINE), head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"^[ \t]*Test (\d+), loss: ({_NUM}), test acc\b", re.MULTILINE), head=(metrics.STEP, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(rf"Train \d+, loss: {_NUM}, train acc\b"),
    step_unit="epoch",
    min_records=1,
)

# DGL-KE (awslabs/dgl-ke, train_pytorch.py): "[proc {}][Train]({}/{}) average {}: {}" for each of its
# logs (pos_loss, neg_loss, loss, regularization) every log_interval steps, from each process: process
# 0's loss, the step before the slash.
DGL_KE = Dialect(
    name="dgl_ke",
    description='DGL-KE ("[proc 0][Train](15000/40000) average loss: 0.2598")',
    shapes=(
        Shape(re.compile(rf"\[proc 0\]\[Train\]\((\d+)/\d+\) average loss: ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
    sniff=re.compile(r"\[proc \d+\]\[Train\]\(\d+/\d+\) average loss: "),
    min_records=1,
)

# Catalyst's ConsoleLogger (catalyst/loggers/console.py): after each loader's epoch f"{loader_key}
# ({epoch}/{epochs}) " then its metrics sorted, f"{k}: {float(v)}" joined by " | " ("loss", "loss/mean",
# "loss/std", "lr", ...); "* Epoch (E/N) ..." for the epoch's own. The epoch is the step; the tqdm bar
# before each such line shows the same values rounded.
CATALYST = Dialect(
    name="catalyst",
    description='Catalyst ("train (E/N) accuracy01: A | loss: X | lr: L", "valid (E/N) ... | loss: X")',
    shapes=(
        Shape(re.compile(r"^train \((\d+)/\d+\) ([^\n]*)", re.MULTILINE), fields="|",
              keys={"loss": metrics.LOSS, "lr": metrics.LR}),
        Shape(re.compile(r"^valid \((\d+)/\d+\) ([^\n]*)", re.MULTILINE), fields="|", prefix="val_"),
    ),
    sniff=re.compile(r"^train \(\d+/\d+\) [^\n]*?\bloss: [-+\dn]", re.MULTILINE),
    min_records=2,
    step_unit="epoch",
)

# big_vision (big_vision/utils.py BigVisionMetricWriter.measure): one metric a line,
# f"\u001b[35m[{step}]\u001b[0m {name} = {value}" through absl's logging; training_loss and
# l2_grads among them.
BIG_VISION = Dialect(
    name="big_vision",
    description='big_vision ("[STEP] training_loss = X", "[STEP] l2_grads = G")',
    shapes=tuple(
        Shape(re.compile(rf"(?:^|\] )\[(\d+)\] {name} = ({_NUM})$", re.MULTILINE), head=(metrics.STEP, key))
        for name, key in (("training_loss", metrics.LOSS), ("l2_grads", metrics.GRAD_NORM_TOTAL))),
    sniff=re.compile(rf"(?:^|\] )\[\d+\] training_loss = [-+\dn]", re.MULTILINE),
    min_records=2,
)

# MindSpore's model zoo (BERT, GPT, PanGu, ...: LossCallBack.step_end): "epoch: {}, [current epoch
# percent: {}, ]step: {}, outputs are {}" of str(cb_params.net_outputs), the network's outputs as
# MindSpore prints a Tensor: the loss, or the loss, the overflow flag and the loss scale of a
# TrainOneStepWithLossScaleCell. The step is the global step.
_MS_TENSOR = r"Tensor\(shape=\[[\d, ]*\], dtype={dtype}, value=[^\S\n]*\[?[^\S\n]*{value}[^\S\n]*\]?\)"
MINDSPORE_OUTPUTS = Dialect(
    name="mindspore",
    description='MindSpore model zoo ("epoch: E, step: N, outputs are (Tensor(..., value= [X]), ...)")',
    shapes=(
        Shape(re.compile(r"\bstep: (\d+), outputs are \(?" + _MS_TENSOR.format(dtype=r"Float\d+", value=f"({_NUM})")
                         + r"(?:, " + _MS_TENSOR.format(dtype="Bool", value="(?:True|False)") + r", "
                         + _MS_TENSOR.format(dtype=r"Float\d+", value=f"({_NUM})") + r")?"),
              head=(metrics.STEP, metrics.LOSS, metrics.LOSS_SCALE)),
    ),
    sniff=re.compile(r"\bstep: \d+, outputs are \(?Tensor\(shape="),
    min_records=2,
)

# PixArt-alpha / PixArt-sigma (train_scripts/train.py): f"Step/Epoch [{global_step}/{epoch}][{step + 1}/
# {len(loader)}]:total_eta: ..., epoch_eta:..., time_all:T, time_data:T, lr:L, s:(H, W), " then the
# log buffer's f"{k}:{v:.4f}" (loss, grad_norm) joined by ", ". The first bracket is the global step
# and the epoch, not a count of a total.
_PIXART_GAP = _gap_until(r"Step/Epoch \[")
PIXART = Dialect(
    name="pixart",
    description='PixArt ("Step/Epoch [G/E][I/N]:total_eta: ..., lr:L, s:(H, W), loss:X, grad_norm:G")',
    shapes=(
        Shape(re.compile(rf"\bStep/Epoch \[(\d+)/\d+\]\[\d+/\d+\]:{_PIXART_GAP}\blr:({_NUM}),{_PIXART_GAP}"
                         rf"\bloss:({_NUM})(?:, grad_norm:({_NUM}))?"),
              head=(metrics.STEP, metrics.LR, metrics.LOSS, metrics.GRAD_NORM_TOTAL)),
    ),
    sniff=re.compile(r"\bStep/Epoch \[\d+/\d+\]\[\d+/\d+\]:"),
    min_records=2,
)

# luz, R's torch trainer (and its docs knitted by R Markdown, each output line after "#> "): "Epoch 1/20", then
# "Train metrics: Loss: 0.6782 - AUC: 0.61" and "Valid metrics: Loss: 0.4433": each epoch's means, joined to its
# epoch line.
_LUZ_PREFIX = r"(?:#> )?"
LUZ = Dialect(
    name="luz",
    description='luz, R torch ("Epoch 1/20", then "Train metrics: Loss: X", "Valid metrics: Loss: Y")',
    shapes=(
        Shape(re.compile(rf"^{_LUZ_PREFIX}Epoch (\d+)/\d+[^\S\n]*\| {_LUZ_PREFIX}Train metrics: Loss: ({_NUM})"
                         rf"(?:[^\n|]*\| {_LUZ_PREFIX}Valid metrics: Loss: ({_NUM}))?", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS, metrics.VAL_LOSS)),
    ),
    joins=re.compile(rf"[^\S\n]*\n(?={_LUZ_PREFIX}(?:Train|Valid) metrics: )"),
    join_with=" | ",
    sniff=re.compile(rf"^{_LUZ_PREFIX}Train metrics: Loss: ", re.MULTILINE),
    min_records=2,
    step_unit="epoch",
)

# fastText's supervised and unsupervised training: a status line redrawn in place ("\rProgress: 12.3%
# words/sec/thread: 1802641 lr: 0.099661 loss: 1.386032 ETA: 0h11m"; "avg.loss" in older releases), kept as lines
# where it was not a terminal; no step of its own: the lines in order (the progress a share of the words).
FASTTEXT = Dialect(
    name="fasttext",
    description='fastText ("Progress: 12.3%  words/sec/thread: N  lr: L  loss: X  ETA: ..."), numbered in order',
    shapes=(
        Shape(re.compile(rf"\bProgress:[^\S\n]*[\d.]+%[^\S\n]+words/sec/thread:[^\S\n]*\d+[^\S\n]+lr:[^\S\n]*({_NUM})"
                         rf"[^\S\n]+(?:avg\.)?loss:[^\S\n]*({_NUM})"),
              head=(metrics.LR, metrics.LOSS)),
    ),
    step_from_order=True,
    sniff=re.compile(r"\bProgress:[^\S\n]*[\d.]+%[^\S\n]+words/sec/thread:"),
    min_records=2,
)

# VAR (FoundationVision/VAR, utils/misc.py's MetricLogger): f"[Ep]: [{ep:4d}/{E}]  [{it:4d}/{N}]  eta: ...  tlr:
# L  tnm: G  Lm: X (A)  Lt: Y (B)  Accm: ..." : epochs from 0, the iteration inside the epoch; Lm, the mean
# cross-entropy over every scale's tokens, is the loss (Lt, the last scale's, a term of it); tnm the grad norm.
_VAR_GAP = _gap_until(r"\[Ep\]: ")
VAR = Dialect(
    name="var",
    description='VAR ("[Ep]: [   e/E]  [   i/N]  eta: ...  tlr: L  tnm: G  Lm: X (A)  Lt: Y (B)")',
    shapes=(
        Shape(re.compile(rf"\[Ep\]: \[[^\S\n]*(\d+)/\d+\][^\S\n]+\[[^\S\n]*(\d+)/(\d+)\]{_VAR_GAP}\btlr: ({_NUM})"
                         rf"[^\S\n]+tnm: ({_NUM})[^\S\n]+Lm: ({_NUM})"),
              head=("epoch0", "iter", "total", metrics.LR, metrics.GRAD_NORM_TOTAL, metrics.LOSS)),
    ),
    sniff=re.compile(r"\[Ep\]: \[[^\S\n]*\d+/\d+\][^\S\n]+\[[^\S\n]*\d+/\d+\]"),
    min_records=2,
)

# TensorFlow Object Detection API (model_main_tf2.py): "Step 100 per-step time 0.432s", then the
# losses as a dict printed over several lines ("{'Loss/classification_loss': 0.5,\n 'Loss/...': ...,\n
# 'Loss/total_loss': 0.8,\n 'learning_rate': 0.0133}"), through absl's logger, TensorFlow's or both.
# The dict's lines join the step line before them; Loss/total_loss is the loss.
_TFOD_PREFIX = r"(?:I\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] |INFO:tensorflow:)?"
TF_OBJECT_DETECTION = Dialect(
    name="tf_object_detection",
    description='TensorFlow Object Detection API ("Step N per-step time ..." then its {\'Loss/total_loss\': ...} dict, '
                'or "... loss=X")',
    shapes=(
        Shape(re.compile(rf"\bStep (\d+) per-step time [^\n]*?'Loss/total_loss': ({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\bStep (\d+) per-step time [^\n]*?'learning_rate': ({_NUM})"),
              head=(metrics.STEP, metrics.LR)),
        # (its releases of 2020: "Step 200 per-step time 0.831s loss=1.192" on the step's line)
        Shape(re.compile(rf"\bStep (\d+) per-step time [\d.]+s loss=({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
    ),
    joins=re.compile(rf"\n(?:{_TFOD_PREFIX}(?=\{{'Loss/)| (?='[\w/]+': ))"),
    join_with=" ",
    sniff=re.compile(r"\bStep \d+ per-step time \d"),
    min_records=2,
)

# GAN training prints: the PyTorch DCGAN tutorial's "[0/5][50/1583]\tLoss_D: 1.2345\tLoss_G: 5.6789\t
# D(x): ..." and PyTorch-GAN's "[Epoch 0/200] [Batch 50/938] [D loss: 0.6931] [G loss: 0.7123]" (epochs
# and batches from 0). The generator's loss is read as the loss, the discriminator's as loss_d
# (see sentinel.analyze.rule_stuck.is_adversarial: the two are not judged for rises or spikes).
GAN = Dialect(
    name="gan",
    description='GAN training prints ("[e/E][i/N] Loss_D: x Loss_G: y", "[Epoch e/E] [Batch i/N] [D loss: x] [G loss: y]", '
                '"N [D loss: x, acc.: a%] [G loss: y]", WassersteinGAN\'s "[e/E][i/N][g] Loss_D: x Loss_G: y", '
                'dcgan.torch\'s "Epoch: [e][i / N] ... Err_G: y  Err_D: x")',
    shapes=(
        Shape(re.compile(rf"^[^\S\n]*\[(\d+)/\d+\]\[(\d+)/(\d+)\]"
                         rf"[^\S\n]+Loss_D:[^\S\n]*({_NUM})[^\S\n]+Loss_G:[^\S\n]*({_NUM})",
                         re.MULTILINE), head=("epoch0", "iter", "total", "loss_d", metrics.LOSS)),
        # The WassersteinGAN reference (main.py): "[%d/%d][%d/%d][%d] Loss_D: %f Loss_G: %f Loss_D_real: %f
        # Loss_D_fake %f" % (epoch, niter, i, len(dataloader), gen_iterations, ...): the generator's iteration
        # the step.
        Shape(re.compile(rf"^[^\S\n]*\[\d+/\d+\]\[\d+/\d+\]\[(\d+)\][^\S\n]+Loss_D:[^\S\n]*({_NUM})[^\S\n]+"
                         rf"Loss_G:[^\S\n]*({_NUM})", re.MULTILINE), head=(metrics.STEP, "loss_d", metrics.LOSS)),
        # soumith's dcgan.torch: print(('Epoch: [%d][%8d / %8d]\t Time: %.3f  DataTime: %.3f  Err_G: %.4f
        # Err_D: %.4f'), epoch from 1, the batch from 0.
        Shape(re.compile(rf"\bEpoch: \[(\d+)\]\[[^\S\n]*(\d+)[^\S\n]*/[^\S\n]*(\d+)\][^\n]*?\bErr_G: ({_NUM})"
                         rf"[^\S\n]+Err_D: ({_NUM})"), head=("epoch", "iter", "total", metrics.LOSS, "loss_d")),
        Shape(re.compile(rf"\[Epoch (\d+)/\d+\] \[Batch (\d+)/(\d+)\] \[D loss: ({_NUM})[^\]\n]*\] "
                         rf"\[G loss: ({_NUM})"), head=("epoch0", "iter", "total", "loss_d", metrics.LOSS)),
        # Keras-GAN's and ML-From-Scratch's print("%d [D loss: %f, acc.: %.2f%%] [G loss: %f]" % (epoch, ...)),
        # the most copied Keras GAN loop ("epoch" its iteration); roatienza's DCGAN "%d: [D loss: %f, acc:
        # %f]  [A loss: %f, acc: %f]", its adversarial model's loss the generator's.
        Shape(re.compile(rf"^[^\S\n]*\**(\d+):? \[D loss: ({_NUM})[^\]\n]*\][^\S\n]*\[[GA] loss: ({_NUM})",
                         re.MULTILINE), head=(metrics.STEP, "loss_d", metrics.LOSS)),
        # Deep Learning with Python's GAN loop: print('discriminator loss at step %s: %s' % (step, d_loss)), then
        # print('adversarial loss at step %s: %s' % (step, a_loss)) (the adversarial model's loss, the generator's).
        Shape(re.compile(rf"\badversarial loss at step (\d+): ({_NUM})"), head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"\bdiscriminator loss at step (\d+): ({_NUM})"), head=(metrics.STEP, "loss_d")),
        # rasbt's deeplearning-models GAN notebooks: "Epoch: 001/100 | Batch 100/469 | Gen/Dis Loss: 5.1797/0.0280"
        # (epochs from 1, the batch a count inside the epoch; the generator's loss, then the discriminator's).
        Shape(re.compile(rf"\bEpoch: (\d+)/\d+ \| Batch (\d+)/(\d+) \| Gen/Dis Loss: ({_NUM})/({_NUM})"),
              head=("epoch", "iter", "total", metrics.LOSS, "loss_d")),
    ),
    min_records=2,
)

# Anything else: a step-like key and a loss-like key on one line, as "key: v", "key=v" or "key v",
# in either order. Needs several such lines (see textlogs.sniff).
# Chinese tutorials' step labels too: 训练次数 ("training count", the step), 迭代次数 ("iterations").
# A federated run's round (LG-FedAvg's "Round 102, Average loss 2.148, Test loss 2.264", FedProx's "At
# round 0 training loss: 0.69"). InsightFace_TF and MobileFaceNet_TF print "epoch 5, total_step 349550,
# total loss is 6.06 , ...". Paxml's trainer logs "step_i: N, training loss: X"; OpenPCDet's "epoch:
# 3/120, acc_iter=1084, cur_iter=270/271, ..., loss=5.03" its global step as acc_iter.
# (Not an "inner iter": a count inside another, MiniLLM's "inner iter:   7/  8 | ... | global iter:     13/  5000|".)
_STEP_KEY = r"(?<!inner )(?:acc_iter|total_step|step_i|steps?|iters?|iterations?|num_updates|updates?|global_step|it|(?<!/)batch|episode|rounds?|训练次数|迭代次数|训练步数|步数|迭代)"
# The same, where a plain "step" with a global_step after it on its line is a count inside the epoch
# (Open-Sora's bar: "loss=0.73, ..., step=30, global_step=730"). Only in the shape of a loss then
# its step, where that bar's lines fall: the lookahead scans the rest of the line at each "step",
# and in every step pattern it slowed the general reader by 5%.
_STEP_KEY_BEFORE_GLOBAL = _STEP_KEY.replace(
    "steps?|", r"steps?(?![^\S\n]*[:=]?[^\S\n]*\d+\b[^\n]{0,512}?\bglobal_step\b)|", 1)
# step_loss: the diffusers training examples' bar (progress_bar.set_postfix(step_loss=..., lr=...));
# avr_loss: kohya's sd-scripts bar ("avr_loss=0.0875", its loss averaged over recent steps); xent:
# OpenNMT-py's "Step 100/200000; acc: 10.5; ppl: 50.2; xent: 3.9; ...".
# train_loss_step: Lightning's bar for self.log("train_loss", ..., on_step=True, on_epoch=True)
# (beside its train_loss_epoch, the running mean, not read).
# (Factored: a flat alternation of the names is tried at every character of a gap: +27% on a
# generic log when four names were added.)
# (not a loss summed over the batch's tokens beside its mean: PaddlePaddle's Transformer, "sum loss:
# 43280.62, avg loss: 10.858")
# (not a key that goes on in a digit: Facelet-Bank's "loss1: 0.059" is no "loss" of 1)
# (not a term's "<name> loss" where the line's total comes after it: WLASL's "Loc Loss: 0.0057 Cls
# Loss: 0.0075 Tot Loss: 0.0066", SSD ports' "loc loss, conf loss, total loss"; an average's
# name before it is the loss, beside a sum over the epoch. Asked only where "loss" starts: a check
# at every character of a gap costs.)
_TERM_BEFORE_TOTAL = (r"(?=loss)(?!(?<=[a-z] )(?<!avg )(?<!mean )(?<!average )loss\b[^\n]*?(?<![\w/])"
                      r"(?:tot(?:al)?[_ ]loss\b|loss_total\b))")
# (nor the lowest so far: hyperopt's "TPE using 5/5 trials with best loss -0.971961", a search's minimum)
# (its average named after it, freerec's "TRAIN @Epoch: 1 >>> || LOSS Avg: 0.18426": an epoch's mean)
_LOSS_KEY = (rf"(?:(?:(?:train(?:ing)?|tot(?:al)?|reduced_train|lm|avr)[_/ ]|step_|{_TERM_BEFORE_TOTAL})(?<!sum )"
             r"(?<!sum_)(?<!best )(?<!best_)loss(?:_total|_step| avg(?=:))?|xent)(?!\d)")
_SEP = r"[^\S\n]*[:=]?[^\S\n]*"
# The same between a loss key and its value, either of them perhaps quoted (a dict's repr printed
# by a logger: PaddleDetection's "'loss': '1.024392'").
# "loss is X": MindSpore's LossMonitor, log4j-style loggers; "loss is: X": NeuralPDE.jl's "Current loss is: X"
_QSEP = r"['\"]?[^\S\n]*(?:[:=]|is:?(?= ))?[^\S\n]*['\"]?"
# "Epoch 2 ... step 300": an epoch, then a count (inside the epoch, or global: the steps tell).
_COUNT_KEY = r"(?:step|iter|iteration|batch(?:[ _]?idx?)?|it)"
# The key perhaps quoted: a printed dict, "{'epoch': 3, 'train_loss': 0.41, ...}".
# "epoch", or "ep" as a key ("ep: 0, batch: 20, loss: ..."; not "ep 3", which may be an episode); "num_epoch: 3"
# (OneFlow's examples), "cur_epoch".
_EPOCH_WORD = r"(?i:\b(?:num_|cur_)?epoch|\bep(?=['\"]?[^\S\n]*[:=]))"
# (or its number after a hyphen: STgram-MFN's f"Epoch-{epoch}\tloss:{avg_loss:.5f}")
_EPOCH_NUM = (rf"{_EPOCH_WORD}['\"]?[^\S\n]*(?:[:=#]|-(?=\d))?[^\S\n]*\[?[^\S\n]*(\d+)(?:[^\S\n]*/[^\S\n]*\d+)?"
              r"[^\S\n]*\]?")
_EPOCH_START = rf"{_EPOCH_WORD}['\"]?[^\S\n]*(?:[:=#]|-(?=\d))?[^\S\n]*\[?[^\S\n]*\d"
_EPOCH_GAP = _gap_until(_EPOCH_START)
# The count a whole number (its key perhaps named with its total's: "step/total_step: 55/60"), its key
# not a unit's denominator ("ms/batch 45.60" is a time), nor a
# global count's (MiniLLM's "ppo epoch:  2/ 4 | global iter:     13/  5000|": the step itself), nor
# an inner loop's ("epoch   4 | inner iter:   0/  4 |": PPO's epochs over one batch of rollouts).
_EPOCH_THEN_COUNT = (rf"{_EPOCH_NUM}{_EPOCH_GAP}(?<![/\w])(?<!global )(?<!inner )"
                     rf"(?i:{_COUNT_KEY}\b(?:/[a-z_]*{_COUNT_KEY}s?\b)?)"
                     r"[^\S\n]*[:=#]?[^\S\n]*\[?[^\S\n]*(\d+)(?!\.\d|\d)")
# "Epoch: [21][ 35/464]", "Epoch 3 [10/100]" (no groups: for a lookahead): the epoch shape below reads it.
# ... and "Epoch 0/300 200/1000 loss: 0.97" (MONAI's UNETR / Swin-UNETR trainers), the count bare
# after the epoch's own "/TOTAL".
_EPOCH_OF_COUNT = rf"{_EPOCH_WORD}[^\S\n]*[:=#]?[^\S\n]*(\d+)[^\S\n]*/[^\S\n]*\d+[^\S\n]*[,|]?[^\S\n]+(\d+)[^\S\n]*/[^\S\n]*(\d+)\b"
_EPOCH_BRACKETS = (rf"{_EPOCH_WORD}[^\S\n]*[:=#]?[^\S\n]*\[?[^\S\n]*\d+(?:[^\S\n]*/[^\S\n]*\d+)?[^\S\n]*\]?:?[^\S\n]*[\[(][^\S\n]*\d+[^\S\n]*/|"
                   rf"{_EPOCH_WORD}[^\S\n]*[:=#]?[^\S\n]*\d+[^\S\n]*/[^\S\n]*\d+[^\S\n]*[,|]?[^\S\n]+\d+[^\S\n]*/[^\S\n]*\d+\b")
# Up to the next loss: a Keras bar whose redraws ran into one line ("... - loss: 2.3 - 2ms/step")
# reads each loss with its own record.
_LOSS_GAP = _gap_until(rf"(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}{_NUM}")
# The loss of an evaluation line that names no step or epoch ("Test set: Average loss: 0.0335, ...",
# "Validation loss: 2.1", "val_loss=2.1"): its first loss.
_UNSTEPPED_EVALUATION = re.compile(
    rf"(?<![\w/])(?i:(?:(?:val|valid|validation|eval|evaluation|test|dev)[_/ ]|(?:avg|average|mean)[_ ])*loss)(?!\w)"
    rf"{_QSEP}({_NUM})\b")
# Lightning 1.x's tqdm bar: "[00:05<00:06, 5.10it/s, loss=2.31, v_num=0, train_loss=2.29]". Its own
# "loss" is a running mean of the last 20 steps' losses (a spike shows a twentieth of its height);
# where the step's logged loss follows in the same postfix, the mean is not read.
_BAR_RUNNING_MEAN = re.compile(r"((?:it/s|s/it), )loss=[^,\]\n]*, (?=[^\]\n]*?\b(?:train_)?loss_step=|"
                               r"[^\]\n]*?\btrain_loss=)")


_BAR_MEAN_WORDS = ("/s, loss=", "/it, loss=")  # where neither is, the text has no such bar


def _without_bar_running_mean(text: str) -> str:
    if not any(word in text for word in _BAR_MEAN_WORDS):  # substring searches: most logs stop here
        return text
    return _BAR_RUNNING_MEAN.sub(r"\1", text)


# The same bar with no step loss after its mean (nothing but "loss=" logged to the bar): the mean is
# all there is. "v_num=" (the logger's version) tells Lightning's bar from a script's own tqdm postfix.
_BAR_RUNNING_MEAN_ONLY = re.compile(r"(?:it/s|s/it), loss=[^,\]\n]*, (?![^\]\n]*?\b(?:train_)?loss_step=)"
                                    r"(?![^\]\n]*?\btrain_loss=)[^\]\n]*?\bv_num=")


def reads_bar_running_mean(text: str, lines: Lines | None = None) -> bool:
    """Whether the loss a generic read finds is Lightning 1.x's bar mean of the last 20 steps.

    Example:
        >>> reads_bar_running_mean("Epoch 0: 50%|##  | 5/10 [00:01<00:01, 5.00it/s, loss=2.31, v_num=0]")
        True
        >>> reads_bar_running_mean("... 5.00it/s, loss=2.31, v_num=0, train_loss=2.29]")
        False
    """
    return Lines.of(text, lines).holds_any(_BAR_MEAN_WORDS) and _BAR_RUNNING_MEAN_ONLY.search(text) is not None


# The learning rate, the total grad norm and the fp16 loss scale on a generic step line ("step 120 |
# loss 2.31 | lr 3.0e-04 | grad_norm 0.87", "Epoch 2 | Step 40/500 | Loss 2.31 | LR 3e-4"): each read
# by a shape of its own, on the lines one of the loss shapes reads (its pattern, without groups, a
# lookahead), beside that shape's records (Shape.beside): each value takes its loss's step, and a
# line without a loss adds none.
_LR_KEY = r"(?:lr|learning[_ ]rate)"
# Under the trainer's own section too, as a tracker's names print (verl's SFT "train/grad_norm",
# OLMo's "optim/grad_norm"); not under one that names one model of several (verl's "actor/grad_norm"
# beside "critic/grad_norm": read with that model's loss, LossKey.rewrite).
_GRAD_NORM_KEY = rf"(?:(?:train(?:ing)?|optim(?:izer)?)/)?{GRAD_NORM_NAME}"
_LOSS_SCALE_KEY = r"(?:loss[_ ]scale)"  # fp16's dynamic loss scale (a GradScaler's get_scale())
_BESIDE_THE_LOSS = ((_LR_KEY, metrics.LR), (_GRAD_NORM_KEY, metrics.GRAD_NORM_TOTAL),
                    (_LOSS_SCALE_KEY, metrics.LOSS_SCALE))


def _beside_the_loss(loss: re.Pattern, head_fields: str, head: tuple[str, ...], before: bool = False,
                     pairs: tuple[tuple[str, str], ...] = (), **options) -> tuple[Shape, ...]:
    """Shapes reading the lr, the grad norm and the loss scale (or ``pairs``: ``(key pattern,
    name)``) on the lines the shape of pattern ``loss`` reads: ``head_fields`` (that shape's fields
    before its loss, named ``head``), then the key and its value, on a line where ``loss`` matches
    within the line's first characters; with ``before``, also the key and its value before those
    fields ("lr 3e-4 | step 120 | loss 2.31"). ``options``: the shapes' other fields."""
    pairs = pairs or _BESIDE_THE_LOSS
    without_groups = loss.pattern.removeprefix("^").replace(r"(\d+)", r"\d+").replace(f"({_NUM})", _NUM)
    assert "(\\d" not in without_groups and f"({_NUM})" not in without_groups
    line = rf"^(?={'' if loss.pattern.startswith('^') else _GAP}{without_groups}){_GAP}"
    shapes = [Shape(re.compile(rf"{line}{head_fields}{_GAP}(?<![\w/])(?i:{key}){_QSEP}({_NUM})\b", re.MULTILINE),
                    head=(*head, name), beside=loss, **options) for key, name in pairs]
    if before:
        shapes += [Shape(re.compile(rf"{line}(?<![\w/])(?i:{key}){_QSEP}({_NUM})\b{_GAP}{head_fields}", re.MULTILINE),
                         head=(name, *head), beside=loss, **options) for key, name in pairs]
    return tuple(shapes)


# The generic loss shapes: a step key, then the loss (not on a line where an epoch comes first);
# an epoch and a count inside it (perhaps "/TOTAL"), then the loss.
# (not a percentage: diffusers' bar is "Steps:  45%|...| 27/60")
# (a number perhaps after "#", Anti-DreamBooth's "Step #0, loss: 0.234";
# a whole number, perhaps printed with one decimal, "global_step=1038.0"; not the first digits of a
# float of more decimals or an exponent, "Update: 2.510e-03 mean" of a parameter update's size; each
# digit alike, as a line's skeleton writes it)
_STEP_FIELD = rf"(?i:\b{_STEP_KEY})['\"]?{_SEP}\[?[^\S\n]*#?(\d+)(?:[^\S\n]*/[^\S\n]*\d+)?\b(?!%|\.\d\d|\.\d+[eE])"
_STEP_LOSS = rf"^(?![^\n]*?{_EPOCH_THEN_COUNT}){_GAP}{_STEP_FIELD}{_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"
_EPOCH_COUNT_TOTAL = rf"{_EPOCH_THEN_COUNT}[^\S\n]*/[^\S\n]*(\d+)"
_EPOCH_COUNT_TOTAL_LOSS = rf"{_EPOCH_COUNT_TOTAL}[^\S\n]*\]?{_EPOCH_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"
_EPOCH_COUNT = rf"{_EPOCH_THEN_COUNT}(?!\d|[^\S\n]*/[^\S\n]*\d)"
_EPOCH_COUNT_LOSS = rf"{_EPOCH_COUNT}[^\S\n]*\]?{_EPOCH_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"
_STEP_LOSS_LINE = re.compile(_STEP_LOSS, re.MULTILINE)
_EPOCH_COUNT_TOTAL_LOSS_LINE = re.compile(_EPOCH_COUNT_TOTAL_LOSS)
_EPOCH_COUNT_LOSS_LINE = re.compile(_EPOCH_COUNT_LOSS)
# "N/TOTAL" only on lines without a step key (see the shape); in brackets at a line's start, after
# two spaces or a tab (EasyOCR's trainer indents "[20000/300000] Train loss: ..." with one).
# Not a logger's date before its clock ("[04/01 21:48:48 name]: Epoch 4/100, ...": detectron2's and
# fvcore's "%m/%d %H:%M:%S"; rich's bar, "10/30 0:00:01 • 0:00:00", is a count before a time). Not in a
# tqdm bar's description ("Epoch 1/3: 66%|####  | 200/300 [...", "[Epoch 1/3] train: 45it [..."): the
# bar's own count follows. Not the epoch's own "Epoch 3/50" (a line per epoch). ST-GCN's
# and 2s-AGCN's "\tBatch(100/1879) done. Loss: 5.9635  lr:0.100000" too, and a count in parentheses at a line's
# start ("(330 / 438)  Loss: nan  pointer_loss: nan ...").
_COUNT_TOTAL = (r"(?:^|(?<![\d/:.-])(?<![Ee]poch)(?<!EPOCH)[^\S\n]|(?<![^\n])\[|(?<=[^\S\n]{2})\[|(?<=\t)\["
                r"|(?<=\bBatch)\(|(?<![^\n])\()"
                r"(?!\d\d/\d\d \d\d:\d\d:\d\d)(\d+)[^\S\n]*/[^\S\n]*(\d+)\b"
                r"(?![/:.]\d|\][^\S\n]*\[)(?![^\n]*?(?:\d%\|[^|\n]*\|[^\S\n]*\d+/\d+|[^\S\n]\d+it \[))")
_COUNT_TOTAL_LOSS_LINE = re.compile(rf"^(?![^\n]*?(?i:\b{_STEP_KEY}){_SEP}\d+(?![\d%]))(?![^\n]*?{_EPOCH_BRACKETS})"
                                    rf"{_GAP}{_COUNT_TOTAL}{_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b", re.MULTILINE)

# An evaluation line that names its epoch and no step or count ("Epoch [3/10], Validation Loss:
# 2.1"): the epoch's last training step's evaluation loss (the generic reader's epoch_evaluation).
def _epoch_evaluation(key: str) -> Shape:
    """An evaluation line that names its epoch and no step or count, then a loss under ``key``."""
    return Shape(re.compile(rf"^(?![^\n]*?(?<![\w/])(?i:{_COUNT_KEY}|{_STEP_KEY})\b){_GAP}{_EPOCH_NUM}[:,]?{_GAP}"
                            rf"(?<![\w/])(?i:{key}){_QSEP}({_NUM})\b", re.MULTILINE), head=("epoch", metrics.LOSS))


# An evaluation line (by its words) that names its epoch and no step ("Epoch [3/10], Validation Loss:
# 2.1"): the epoch's last training step's evaluation loss (the generic reader's epoch_evaluation);
# and on any line, a loss named as an evaluation's: "epoch 3 val_loss 2.1", "Epoch 3 | val loss:
# 2.1", "epoch=3 eval_loss=2.1" ("val" marks an evaluation line only before the line's loss:
# litgpt's "loss train: 3.0, val: n/a" is a training line).
_EPOCH_EVALUATION = _epoch_evaluation(_LOSS_KEY)
# "val_loss", "Val. Loss" (bentrevett's seq2seq tutorials), "Test Loss" (TensorFlow 2's quickstart).
_EVALUATION_WORD = r"(?:val\.?|vali|valid|validation|eval|evaluation|dev|test)"
_EVALUATION_LOSS_KEY = rf"{_EVALUATION_WORD}[_ ]loss"
_EPOCH_EVALUATION_KEY = _epoch_evaluation(_EVALUATION_LOSS_KEY)
# ... and with a step: "step 500 | val_loss 2.1", "step 500: loss 2.3 val_loss 2.1" (the step's).
_STEP_EVALUATION_KEY = Shape(re.compile(rf"^(?![^\n]*?{_EPOCH_THEN_COUNT}){_GAP}{_STEP_FIELD}{_GAP}"
                                        rf"(?<![\w/])(?i:{_EVALUATION_LOSS_KEY}){_QSEP}({_NUM})\b", re.MULTILINE),
                             head=(metrics.STEP, metrics.LOSS))

# Python logging's default format before a message (logging.basicConfig: "%(levelname)s:%(name)s:"),
# "INFO:root:", "INFO:pytorch:".
_LEVEL_NAME = r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:)?"
GENERIC = Dialect(
    name="text",
    description="any text log with a step-like key (step, iter, global_step, N/TOTAL) and a loss on each line "
                "(and the lr, grad norm and loss scale beside it)",
    rewrite=_without_bar_running_mean,
    rewrite_needs=_BAR_MEAN_WORDS,
    shapes=(
        # Not on a line where an epoch comes before the step key (the epoch shape below reads it).
        Shape(_STEP_LOSS_LINE, head=(metrics.STEP, metrics.LOSS)),
        # (a step key of its own: not a time per step named after it, verl's "timing_s/step:70.300";
        # a whole number printed as a float by tqdm's format_num, as Lightning 1.x's bar shows a
        # logged global_step from 1000 on: "global_step=1038.0", "global_step=2e+3"; no literal
        # digit in the pattern, which runs once per line skeleton, every digit a 0 there)
        # (not a checkpoint's name glued to the bar: Lightning's ".../epoch=8-step=36.ckpt"; nor a bar's
        # percentage after the loss: NVIDIA's BERT "step_loss : 0.063 ... Iteration:  29%|###")
        Shape(re.compile(rf"(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b{_LOSS_GAP}(?<![\w/-])(?i:{_STEP_KEY_BEFORE_GLOBAL}){_SEP}"
                         rf"(\d+(?:\.\d)?|\d(?:\.\d+)?e\+\d+)\b(?!\.\d|%)"),
              head=(metrics.LOSS, metrics.STEP)),
        # "N/TOTAL" only on lines without a step key: a progress bar's count inside the epoch is
        # not the step where the line also names it (NeMo's "120/1000 [...] global_step=119.0").
        # The count starts again each epoch (Lightning's and Keras' bars): steps go on across epochs.
        Shape(_COUNT_TOTAL_LOSS_LINE, head=("iter", "total", metrics.LOSS)),
        # Keras' bar over a dataset of no known length (a tf.data pipeline): "     23/Unknown - 0s 13ms/step - loss:
        # 0.0640 - mse: 0.0639", the count inside the epoch (starting again at each: steps go on across epochs).
        Shape(re.compile(rf"^[^\S\n]*(\d+)/Unknown\b{_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        # Lightning's bar over a dataset of no known length (an IterableDataset): "Epoch 2: : 17671it
        # [1:05:34,  4.49it/s, loss=2.15, v_num=3hqp]": epochs from 0, the count inside the epoch.
        Shape(re.compile(rf"\bEpoch (\d+): :?[^\S\n]*(\d+)it \[[^\]\n]*?(?<![\w/])(?i:{_LOSS_KEY})=({_NUM})\b"),
              head=("epoch0", "iter", metrics.LOSS)),
        # The PyTorch tutorials' and examples' own prints: f"Epoch [{e}/{E}], Step [{i}/{n}], Loss:
        # {loss:.4f}", "Epoch: e, Batch: b, Loss: x"; the MNIST example's f"Train Epoch: {e}
        # [{n}/{N} ({pct:.0f}%)]\tLoss: {loss:.6f}"; the CIFAR-10 tutorial's f"[{e}, {i:5d}] loss:
        # {loss:.3f}". A count that starts again in each epoch becomes a global step.
        # (a group that takes part in one match and not in another would shift the fields: one
        # shape with the epoch's length, one without)
        Shape(_EPOCH_COUNT_TOTAL_LOSS_LINE, head=("epoch", "iter", "total", metrics.LOSS)),
        Shape(_EPOCH_COUNT_LOSS_LINE, head=("epoch", "iter", metrics.LOSS)),
        # ... and the ImageNet example's ProgressMeter (copied into many repositories; the count
        # in parentheses too, the super-resolution example's "===> Epoch[1](12/25): Loss: 0.3127"):
        # "Epoch: [21][1390/1930]\tTime 0.690 (0.986)\t...\tLoss 2.5681e+00 (1.0952e+01)", the
        # epoch perhaps with its total ("Epoch: [127/300][ 35/464]"); the loss, not its average.
        # (Ignite's ProgressBar: "Epoch [1/10]: [9/938]   1%|...| , loss=1.97 [00:00<00:10]".)
        Shape(re.compile(rf"{_EPOCH_NUM}:?[^\S\n]*[\[(][^\S\n]*(\d+)[^\S\n]*/[^\S\n]*(\d+)[^\])\n]*[\])]"
                         rf"{_EPOCH_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"),
              head=("epoch", "iter", "total", metrics.LOSS)),
        Shape(re.compile(rf"{_EPOCH_OF_COUNT}{_EPOCH_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"),
              head=("epoch", "iter", "total", metrics.LOSS)),
        # ... and without the epoch's length (SwAV's and DeepCluster-v2's logger: "Epoch: [163][50]\tTime
        # 0.890 (0.919)\t...\tLoss 8.0065 (8.0066)\tLr: 3.1976").
        Shape(re.compile(rf"\b(?i:epoch):?[^\S\n]*\[[^\S\n]*(\d+)[^\S\n]*\]\[[^\S\n]*(\d+)[^\S\n]*\]"
                         rf"{_EPOCH_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"),
              head=("epoch", "iter", metrics.LOSS)),
        # ... its prefix written "Train: [{epoch}]" (ProgressMeter(..., prefix=f"Train: [{epoch}]"), Pointcept's
        # "Train: [{epoch}/{max_epoch}][{iter}/{max_iter}] ... loss: 1.1908 Lr: 0.00198"):
        # sightseq's ">> Train: [1][108/90000]\tTime 0.348 (0.361)\t...\tLoss 30.0584 (31.5477)"); CenterNet's
        # and FairMOT's bar: "mot/default| train: [10][929/2658]|Tot: 0:15:44 |ETA: 0:00:00 |loss -0.5303 |hm_loss ...".
        Shape(re.compile(rf"\b(?i:train):[^\S\n]*\[(\d+)(?:/\d+)?\]\[[^\S\n]*(\d+)[^\S\n]*/[^\S\n]*(\d+)\]"
                         rf"{_EPOCH_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"),
              head=("epoch", "iter", "total", metrics.LOSS)),
        # (after Python logging's default prefix too, basicConfig's "INFO:pytorch:[1,   100] loss: 2.3")
        Shape(re.compile(rf"^[ \t]*{_LEVEL_NAME}\[[^\S\n]*(\d+),[^\S\n]*(\d+)\][^\S\n]*"
                         rf"(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b", re.MULTILINE),
              head=("epoch", "iter", metrics.LOSS)),
        # ... and pointnet.pytorch's (fxia22/pointnet.pytorch, and the point-cloud trainers copied from
        # it): "[%d: %d/%d] train loss: %f accuracy: %f" (its "[8: 90/199] test loss: ..." an evaluation).
        Shape(re.compile(rf"^[ \t]*{_LEVEL_NAME}\[[^\S\n]*(\d+):[^\S\n]*(\d+)[^\S\n]*/[^\S\n]*(\d+)\][^\S\n]*"
                         rf"(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b",
                         re.MULTILINE),
              head=("epoch", "iter", "total", metrics.LOSS)),
        # The lr and the grad norm beside the loss (each a shape of its own, on the loss's lines).
        *_beside_the_loss(_STEP_LOSS_LINE, _STEP_FIELD, (metrics.STEP,), before=True),
        *_beside_the_loss(_COUNT_TOTAL_LOSS_LINE, _COUNT_TOTAL, ("iter", "total")),
        # A bar's validation loss ("..., train_loss=0.52, val_loss=0.71]"), shown from the validation
        # on at every redraw until the next one.
        *_beside_the_loss(_COUNT_TOTAL_LOSS_LINE, _COUNT_TOTAL, ("iter", "total"), shown_until_changed=True,
                          pairs=((r"(?:val|valid|validation)[_/]loss(?:_epoch)?", metrics.VAL_LOSS),)),
        *_beside_the_loss(_EPOCH_COUNT_TOTAL_LOSS_LINE, _EPOCH_COUNT_TOTAL, ("epoch", "iter", "total")),
        *_beside_the_loss(_EPOCH_COUNT_LOSS_LINE, _EPOCH_COUNT, ("epoch", "iter")),
    ),
    drop_words=_EVAL_WORDS,
    epoch_evaluation=_EPOCH_EVALUATION,
    evaluation_keys=(_EPOCH_EVALUATION_KEY, _STEP_EVALUATION_KEY),
    unstepped_evaluation=_UNSTEPPED_EVALUATION,
    step_wraps=True,
    events=(_DETECTRON2_NAN, YOLOX_L1),
    min_records=5,
    amp_lines=True,
)

# The names a LightningModule logs its training loss under, as its progress bar shows them (with
# on_step and on_epoch both, "train_loss_step" is the step's; "train_loss_epoch" is not the loss).
_LIGHTNING_LOSS_KEYS = dict.fromkeys(("loss", "train_loss", "train/loss", "training_loss", "loss_step",
                                      "train_loss_step", "train/loss_step"), metrics.LOSS)

# CLU's evaluation lines, written as its training lines: "[1000] eval/loss=2.1, eval/accuracy=0.5",
# "[1000] val_loss=2.1".
_CLU_EVALUATION = Shape(re.compile(rf"(?:^|\] )\[(\d+)\][^\S\n][^\n]*?(?<![\w/])(?i:{_EVALUATION_WORD}[_/ ]loss)"
                                   rf"(?:=|:[^\S\n]*)({_NUM})(?:,|[^\S\n]|$)", re.MULTILINE),
                        head=(metrics.STEP, metrics.LOSS))

# Progress lines of particular tools and tutorials, read like the generic ones but a dialect of
# their own: each shape is a pass over the whole text, and on a generic log these six cost ~20%
# (their own sniffing, over the first megabyte only, is what picks them).
PROGRESS_LINES = Dialect(
    name="text",
    description="progress lines of tqdm descriptions, the PyTorch quickstart, CLU, ESPnet2, torchtune, "
                "Lightning's rich bar, fast_neural_style, '[e/E][i/N] Loss: X', 'loss X after N batches', "
                "the Keras guide's custom loop ('Training loss (for 1 batch) at step N: X')",
    shapes=(
        # A tqdm bar whose description holds the loss (pbar.set_description(f"loss={loss:.4f}")):
        # "loss=2.3412: 45%|####5     | 27/60 [00:05<00:06, 5.1it/s]"; the bar's count is the step.
        # (The description's rest up to its percentage bounded: on a line of thousands of losses run
        # together, an unbounded scan from each to the line's end took minutes.)
        # (Not torchtune's "1|25|Loss: X: 26%|...| 26/101 [": its description's step is the step.)
        Shape(re.compile(rf"(?<![\w/])(?<!\d\|)(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b[^\n|]{{0,512}}?\d+%\|[^|\n]*\|[^\S\n]*(\d+)/(\d+) \["),
              head=(metrics.LOSS, "iter", "total")),
        # ... drawn without its bar, the description no more than the loss and what follows it:
        # torch-ngp's and nerf2mesh's bar_format "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt}
        # [...]", "loss=nan (nan) lr=0.007100: :  86% 86/100 [00:00<00:00, ...]". (A description with
        # an epoch before its loss, "Train Epoch: 16 Loss: 0.36: 100% 2785/2785 [...]", is the
        # epoch's line: the generic reader's.)
        Shape(re.compile(rf"^[^\S\n]*(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b[^\n|]{{0,512}}?\d+%[^\S\n]+(\d+)/(\d+) \[", re.MULTILINE),
              head=(metrics.LOSS, "iter", "total")),
        # The PyTorch quickstart tutorial's train loop (copied into countless scripts):
        # f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]", the samples seen in the epoch (a count
        # that starts again each epoch: the steps go on across epochs, in samples).
        Shape(re.compile(rf"^[^\S\n]*(?i:loss):[^\S\n]*({_NUM})[^\S\n]+\[[^\S\n]*(\d+)/[^\S\n]*(\d+)\][^\S\n]*$",
                         re.MULTILINE), head=(metrics.LOSS, "iter", "total")),
        # CLU's LoggingWriter (JAX: big_vision, scenic, ...): "[{step}] train/loss=2.31, learning_rate=...",
        # also with spaces between the pairs (absl-logged JAX loops: "[0] loss=6.0003 learning_rate=0.001"),
        # a script's own "[100] loss: 2.31", and XLNet's absl lines ("...train_gpu.py:303] [21500] | gnorm
        # 0.25 lr 0.000223 | loss 7.64 | pplx 2081.29, bpc 11.0233": the loss after a space).
        # (after a time.ctime() too: pytorch-deepglr's "Fri Apr  3 16:41:06 2020 [1] loss: 9261402.918, time ...";
        # after Python logging's default prefix, absl's through it: "INFO:absl:[0] kl_div=0.17, ..., loss=1.26")
        # (a tab after the count: "[12]\tloss: 0.5", XGBoost's and LightGBM's "[12]\ttrain-logloss:0.5")
        Shape(re.compile(r"(?:^|\] |^(?:DEBUG|INFO|WARNING):[\w.]+:"
                         r"|^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} )"
                         rf"\[(\d+)\][^\S\n][^\n]*?"
                         rf"(?<![\w/])(?i:{_LOSS_KEY})(?:=|:[^\S\n]*|[^\S\n]+)({_NUM})(?:,|[^\S\n]|$)",
                         re.MULTILINE), head=(metrics.STEP, metrics.LOSS)),
        # A count and a colon that open the message, then the loss: DPPO's pretraining under Hydra's
        # logger, log.info(f"{self.epoch}: train loss {loss_train:8.4f} | t:{timer():8.4f}")
        # ("[...][agent.pretrain.train_diffusion_agent][INFO] - 87: train loss   0.1508 | t: 56.9872").
        Shape(re.compile(rf"(?:^|[^\S\n]-[^\S\n])[^\S\n]*(\d+):[^\S\n]+(?i:{_LOSS_KEY}){_QSEP}({_NUM})(?:[^\S\n]|$)",
                         re.MULTILINE), head=(metrics.STEP, metrics.LOSS)),
        # A loss, then the count it was taken at: "Loss: 6.0023 after 100 batches".
        Shape(re.compile(rf"(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}({_NUM})[^\S\n]+after[^\S\n]+(\d+)[^\S\n]+"
                         r"(?i:batch(?:es)?|steps?|iter(?:ation)?s?|updates?)\b"),
              head=(metrics.LOSS, metrics.STEP)),
        # The Keras guide's training loop written from scratch (copied as the custom-loop template):
        # f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}" (older: "for one
        # batch"), a step inside the epoch after "Start of epoch {epoch}".
        Shape(re.compile(rf"(?i:train(?:ing)?[^\S\n]+loss)[^\S\n]*(?:\(for[^\S\n]+(?:\d+|one)[^\S\n]+batch(?:es)?\)[^\S\n]*)?"
                         rf"at[^\S\n]+step[^\S\n]+(\d+)[^\S\n]*:[^\S\n]*({_NUM})(?![\w.])"),
              head=(metrics.STEP, metrics.LOSS)),
        # pytorch/examples fast_neural_style: "{time}\tEpoch {e}:\t[{n}/{N}]\tcontent: x\tstyle: y\ttotal: z"
        # (samples seen in the epoch; the total is the loss it backpropagates).
        Shape(re.compile(rf"\bEpoch (\d+):\t\[(\d+)/(\d+)\]\tcontent: [^\t\n]*\tstyle: [^\t\n]*\ttotal: ({_NUM})"),
              head=("epoch", "iter", "total", metrics.LOSS)),
        # ESPnet2's trainer: "1epoch:train:101-200batch: iter_time=..., loss_ctc=..., loss=68.3, ..."
        # (the batch count inside the epoch).
        Shape(re.compile(rf"\b(\d+)epoch:train:\d+-(\d+)batch: [^\n]*?(?<![\w/])loss=({_NUM})(?:,|$)", re.MULTILINE),
              head=("epoch", "iter", metrics.LOSS)),
        # eriklindernoren's PyTorch-YOLOv3 before 2019 (and its pruning forks): "[Epoch %d/%d, Batch %d/%d]
        # [Losses: x %f, y %f, w %f, h %f, conf %f, cls %f, total %f, recall: %.5f, precision: %.5f]": the
        # total is the loss, the batch a count inside the epoch.
        Shape(re.compile(rf"\[Epoch (\d+)/\d+, Batch (\d+)/(\d+)\][^\S\n]*\[Losses:[^\]\n]*?[^\S\n]total[^\S\n]+"
                         rf"({_NUM})\b"),
              head=("epoch", "iter", "total", metrics.LOSS)),
        # PaddlePaddle v2's event handler (its book's examples): "Pass 0, Batch 100, Cost 2.261713, {...}": the
        # pass an epoch from 0, the batch a count inside it, the cost the loss.
        Shape(re.compile(rf"^[^\S\n]*Pass (\d+), Batch (\d+), Cost ({_NUM})\b", re.MULTILINE),
              head=("epoch0", "iter", metrics.LOSS)),
        # Karpathy's makemore and "Neural Networks: Zero to Hero" loops (copied into countless notebooks):
        # print(f'{i:7d}/{max_steps:7d}: {loss.item():.4f}'), a step of the run's total and the loss alone.
        Shape(re.compile(rf"^[^\S\n]*(\d+)/[^\S\n]*(\d+):[^\S\n]*({_NUM})[^\S\n]*$", re.MULTILINE),
              head=(metrics.STEP, "_", metrics.LOSS)),
        # CNTK's progress lines: " Epoch[ 1 of 300]-Minibatch[   1-  10, 0.00%]: CrossEntropyWithSoftmax = 2.30 * 640;
        # EvalClassificationError = 0.9 * 640; time = ..." (the training criterion first, under its node's name; the
        # minibatches counted inside the epoch, the range's end the count); CNTK 1's "...]: SamplesSeen = 500;
        # TrainLossPerSample =  5.87155566; EvalErr[0]PerSample = ..." (the criterion after the samples' count).
        Shape(re.compile(rf"\bEpoch\[[^\S\n]*(\d+) of \d+\]-Minibatch\[[^\S\n]*\d+-[^\S\n]*(\d+)[^\]\n]*\]:[^\S\n]*"
                         rf"(?:SamplesSeen = \d+;[^\S\n]*)?[\w.]+ =[^\S\n]*({_NUM})(?![\w.])"),
              head=("epoch", "iter", metrics.LOSS)),
        # CREStereo's: "...,lr:0.0004,[2/100:5/500] ==> loss:26.19" (the epoch and its batch in one bracket).
        Shape(re.compile(rf"\[(\d+)/\d+:(\d+)/(\d+)\][^\S\n]*==>[^\S\n]*(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b"),
              head=("epoch", "iter", "total", metrics.LOSS)),
        # TensorFlow's speech_commands trainer and the keyword-spotting ones built on it (kws_streaming, ARM's
        # ML-KWS-for-MCU): "Step #5195: rate 0.001000, accuracy 76.0%, cross entropy 0.697745".
        Shape(re.compile(rf"\bStep #(\d+): rate ({_NUM}), accuracy {_NUM}%, cross entropy ({_NUM})\b"),
              head=(metrics.STEP, metrics.LR, metrics.LOSS)),
        # DCGAN's print kept by scripts with one loss: f"[{epoch}/{epochs}][{i}/{len(loader)}] Loss: {loss}"
        # (a count inside the epoch; epochs from 0 or 1).
        Shape(re.compile(rf"^[^\S\n]*\[(\d+)/\d+\][^\S\n]*\[(\d+)/(\d+)\][^\S\n]*(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b",
                         re.MULTILINE), head=("epoch", "iter", "total", metrics.LOSS)),
        # torchtune's bar: f"{epoch + 1}|{global_step}|Loss: {loss}" (the global step; its bar's count,
        # drawn before the description is set again, one ahead), perhaps after a launcher's prefix
        # (torchx's "[trainer0|0]:").
        Shape(re.compile(rf"^[ \t]*(?:\[[^\]\n]{{1,40}}\]:)?[ \t]*(\d+)\|(\d+)\|Loss:[^\S\n]*({_NUM})", re.MULTILINE),
              head=("epoch", metrics.STEP, metrics.LOSS)),
        # Lightning's RichProgressBar as a terminal draws it (each redraw ended by "\r"): f"Epoch
        # {epoch}/{max_epochs - 1}", the bar, f"{completed}/{total}", "elapsed • remaining",
        # f"{speed:.2f}it/s", then f"{name}: {value:.3f}" for each metric logged with prog_bar=True.
        # Epochs from 0, the count inside the epoch; a draw at 0 shows the last epoch's values at
        # the same global step as its last draw.
        Shape(re.compile(r"^[^\S\n]*Epoch (\d+)/-?\d+[^\d\n]*?(\d+)/(\d+)[^\S\n]+\d+:\d\d:\d\d • "
                         r"(?:-:--:--|\d+:\d\d:\d\d)[^\S\n]+[\d.]+it/s[^\S\n]*([^\n]*)", re.MULTILINE),
              head=("epoch0", "iter", "total"), keys=_LIGHTNING_LOSS_KEYS),
    ),
    drop_words=_EVAL_WORDS,
    evaluation_keys=(_CLU_EVALUATION,),
    unstepped_evaluation=_UNSTEPPED_EVALUATION,
    step_wraps=True,
    min_records=5,
    amp_lines=True,
)

# Megatron-LM / Megatron-DeepSpeed / NeMo / GPT-NeoX stdout: one line per logged iteration,
#  " iteration     7001/  159576 | consumed samples: 1 | elapsed time per iteration (ms): 9.1 | learning rate:
#  5.998E-05 | global batch size: 96 | lm loss: 2.733351E+00 | loss scale: 4096.0 | grad norm: 0.329 |
#  number of skipped iterations:   0 | number of nan iterations:   0 |", mixed with everything else. Fields
# come and go between versions (bf16 runs have no loss scale, a diverged step no lm loss): every
# "name: number" field is read. NeMo 2 prints "Training epoch 0, iteration 10/99 | lr: ... | global_step:
# 10 | reduced_train_loss: ..." (its global_step is the step). nanotron prints "iteration: 10 / 100 |
# consumed_tokens: 32.8K | ... | lm_loss: 10.8 | lr: 1e-05 | ... | grad_norm: 0.0967 |" (numbers in
# human_format: three significant digits, K/M/G/B/T above a thousand). "validation loss at iteration N | lm loss
# value: X | lm loss PPL: Y |" gives val_loss / val_ppl. DeepSpeed prints "OVERFLOW! Rank 0 Skipping step.
# Attempted loss scale: X, reducing to Y" (older: "fp16 dynamic loss scale overflow! Skipping step. ...")
# inside the optimizer step of the iteration whose line follows; Megatron skips an update only when the
# fp16 grads held an Inf/NaN ("number of skipped iterations: N" > 0: an overflow). A resumed run logs
# iterations again: the last occurrence counts. Read by the megatron loader (its own sniffer and place in
# the discovery order), not through textlogs' sniffer.
_MEGATRON_KEYS = {
    "lm loss": metrics.LOSS, "lm_loss": metrics.LOSS, "reduced_train_loss": metrics.LOSS,  # lm_loss: GPT-NeoX
    "learning rate": metrics.LR, "lr": metrics.LR, "grad norm": metrics.GRAD_NORM_TOTAL,
    "grad_norm": metrics.GRAD_NORM_TOTAL,  # nanotron
    "loss scale": metrics.LOSS_SCALE, "number of skipped iterations": metrics.AMP_SKIPPED_STEPS,
    "number of nan iterations": metrics.NAN_ITERATIONS, "samples per second": metrics.SAMPLES_PER_SEC,
    "elapsed time per iteration (ms)": "iter_time_ms",
}
_MEGATRON_SECONDS = {"elapsed time per iteration (s)": ("elapsed time per iteration (ms)", 1000.0)}
_SP = r"[^\S\n]"  # \s within a line
_MEGATRON_GAP = _gap_until(r"\biteration:?\s+\d")
# nanotron's human_format: 32.8K, 5.76M, 1.13G (3 significant digits; B for billions in some forks).
_HUMAN_SIZES = {"K": ("", 1e3), "M": ("", 1e6), "G": ("", 1e9), "B": ("", 1e9), "T": ("", 1e12), "P": ("", 1e15),
                "E": ("", 1e18)}  # human_format(inf) prints "infE"
MEGATRON = Dialect(
    name="megatron",
    description='Megatron-LM / Megatron-DeepSpeed / NeMo / nanotron stdout logs (" iteration N/M | lm loss: ... |")',
    shapes=(
        Shape(re.compile(rf"\biteration:?{_SP}+(\d+){_SP}*/{_SP}*(\d+){_SP}*\|([^\n]*)"),
              head=(metrics.STEP, "total"), fields="|", keys=_MEGATRON_KEYS, rescale=_MEGATRON_SECONDS,
              units=_HUMAN_SIZES,
              record_events=(
                  RecordEvent(metrics.AMP_SKIPPED_STEPS, EventKind.OVERFLOW, source="megatron",
                              detail="skipped_iterations"),
                  RecordEvent(metrics.NAN_ITERATIONS, EventKind.NONFINITE, source="megatron", detail="nan_iterations"),
                  RecordEvent(metrics.LOSS, EventKind.NONFINITE, when="nonfinite"),
                  RecordEvent(metrics.GRAD_NORM_TOTAL, EventKind.NONFINITE, when="nonfinite"),
              )),
        Shape(re.compile(rf"\bvalidation loss at iteration{_SP}+(\d+)\b[^|\n]*\|([^\n]*)"), fields="|",
              keys={"lm loss value": metrics.VAL_LOSS, "lm loss ppl": "val_ppl"}, prefix="val_",
              rescale=_MEGATRON_SECONDS),
    ),
    events=(
        EventLine(re.compile(rf"(?i:overflow!){_SP}*(?:(?i:rank){_SP}+(?P<rank>\d+){_SP}+)?[Ss]kipping step(?i:\.?"
                             rf"{_SP}*Attempted loss scale:{_SP}*(?P<attempted>[-+\w.]+),{_SP}*reducing to"
                             rf"{_SP}*(?P<new>[-+\w.]+))"), source="deepspeed", keep_rank=True),
    ),
    step_key="global_step",
    # A file must show an iteration line carrying at least one training field.
    sniff=re.compile(rf"\biteration:?\s+\d+\s*/\s*\d+\s*\|{_MEGATRON_GAP}"
                     r"(?:lm[ _]loss|learning rate|loss scale|grad[ _]norm|reduced_train_loss|\blr)\s*:"),
    min_records=1,
    drop_cut_line=False,
    clean=False,
    timestamp=re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?\]"),
    restarts=True,
    event_rows=False,
    total_meta=("train_iters", "first"),
    record_word="iteration",
    event_word="overflow",
)

# One line per epoch, the epoch the step: f"epoch {e} loss: {x}", "Epoch 3, Loss: x", "Epoch 1:
# train loss: x - validation loss: y". Tried only where the generic reader finds no series (its
# shapes read an epoch line that also counts steps inside the epoch).
_EPOCH_LOSS_LINE = re.compile(rf"^{_GAP}{_EPOCH_NUM}[:,]?"
                              rf"{_GAP}(?<![\w/])(?:(?i:train(?:ing)?) )?(?i:{_LOSS_KEY}){_QSEP}({_NUM})\b", re.MULTILINE)
EPOCH_LINES = Dialect(
    name="text",
    description="one line per epoch (epoch E ... loss X)",
    shapes=(
        Shape(_EPOCH_LOSS_LINE, head=(metrics.STEP, metrics.LOSS)),
        # The same line's validation loss ("Epoch: 0111 train_loss= 0.00122 ... val_loss= nan"): a
        # NaN there is a warning of its own.
        Shape(re.compile(rf"^{_GAP}{_EPOCH_NUM}[:,]?{_GAP}(?<![\w/])(?i:{_LOSS_KEY}){_QSEP}{_NUM}\b"
                         rf"{_GAP}(?<![\w/])(?i:{_EVALUATION_LOSS_KEY}){_QSEP}({_NUM})\b", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS), beside=_EPOCH_LOSS_LINE),
        *_beside_the_loss(_EPOCH_LOSS_LINE, rf"{_EPOCH_NUM}[:,]?", (metrics.STEP,)),
        # The two losses named by their sets alone, the training one first, right after the epoch:
        # demucs' and svoice's solver, "Epoch 3: train=0.0878 valid=0.0781 best=0.0781", and many
        # scripts' own f"[{epoch}/{epochs}] train={train_loss:.4f} val={val_loss:.4f}". (Only beside an
        # evaluation's value, nothing but punctuation after the epoch: "Epoch 3 accuracy: train=0.9
        # val=0.8" is no loss.)
        Shape(re.compile(rf"^{_GAP}{_EPOCH_NUM}[^\w\n]{{0,8}}(?<![\w/])(?i:train)[^\S\n]*[:=][^\S\n]*({_NUM})[,;|]?"
                         rf"[^\S\n]+(?i:val|valid|validation)[^\S\n]*[:=][^\S\n]*({_NUM})\b", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS, metrics.VAL_LOSS)),
        # AlphaPose's epoch line, f"{set}-{epoch:d} epoch | loss:{loss:.8f} | acc:{acc:.4f}" ("Train-0 epoch |
        # loss:0.00107745 | acc:0.1478"): the epoch before the word.
        Shape(re.compile(rf"^[^\S\n]*Train-(\d+) epoch \| loss:({_NUM})\b", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        # CenterTrack's log.txt, its total loss "tot" first: "2021-02-23-19-09: epoch: 1 |tot 8.034233 | hm
        # 0.780280 | ..." (CenterNet's and FairMOT's name it "loss" there).
        Shape(re.compile(rf"^[^\n]*?\bepoch: (\d+) \|tot ({_NUM}) \|", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    drop_words=_EVAL_WORDS,
    unstepped_evaluation=_UNSTEPPED_EVALUATION,
    min_records=5,
    epoch_trainings=True,
    amp_lines=True,
)

# The same lines where an epoch prints several (PaddleOCR without its global_step: "epoch: [1/10],
# lr: ..., loss: 38.9" every N iterations): each line a step, numbered in order, the epoch a column.
EPOCH_LINES_IN_ORDER = replace(
    EPOCH_LINES,
    shapes=tuple(replace(shape, head=("epoch",) + shape.head[1:]) for shape in EPOCH_LINES.shapes),
    step_from_order=True,
    epoch_trainings=False,
)

# A loss (or a cost: the course notebooks' word for it) named before its step, joined by a word: the
# Deep Learning Specialization's print("Cost after iteration %i: %f" % (i, cost)) and "Cost after epoch
# %i: %f", many scripts' f"Loss at step {step}: {loss}", "Training loss after iteration 100: 0.69".
# (An evaluation's, "Validation loss at step 100: X", is none.)
_LOSS_NAMED_BEFORE = (r"(?<![\w/])(?<![Vv]al )(?<![Vv]alid )(?<![Vv]alidation )(?<![Ee]val )(?<![Tt]est )(?<![Dd]ev )"
                      r"(?i:(?:train(?:ing)?[_ ])?(?:loss|cost))[^\S\n]+(?i:after|at|of|for|in|over|@)[^\S\n]+")
_LOSS_NAMED_AFTER = rf"[^\S\n]*#?[^\S\n]*(\d+)[^\S\n]*(?:[:=,]|(?i:is)(?= ))?[^\S\n]*({_NUM})(?![\w.])"
LOSS_BEFORE_STEP = Dialect(
    name="text",
    description="a loss or cost named before its step (\"Cost after iteration 100: 0.69\", \"Loss at step 200: 2.31\"), "
                "or in a sentence after it (\"After 100 training step(s), loss on training batch is 2.31.\")",
    shapes=(
        Shape(re.compile(rf"{_LOSS_NAMED_BEFORE}(?i:iterations?|iters?|steps?|batch(?:es)?|updates?)"
                         rf"{_LOSS_NAMED_AFTER}"), head=(metrics.STEP, metrics.LOSS)),
        # ... and after it: TensorFlow 1's textbook MNIST, print("After %d training step(s), loss on training
        # batch is %g." % (step, loss_value)), "After 100 steps, loss is 2.31".
        Shape(re.compile(rf"\b(?i:after)[^\S\n]+(\d+)[^\S\n]+(?i:training[^\S\n]+)?(?i:steps?|iterations?|batch(?:es)?)"
                         rf"(?:\(s\))?,?[^\S\n]+(?i:the[^\S\n]+)?(?i:loss|cost)(?:[^\S\n]+on[^\S\n]+(?:the[^\S\n]+)?"
                         rf"training[^\S\n]+batch)?[^\S\n]+(?:is|=|:)[^\S\n]*({_NUM})"),
              head=(metrics.STEP, metrics.LOSS)),
        # ... as Deeplearning4j's ScoreIterationListener names it: "o.d.o.l.ScoreIterationListener - Score at
        # iteration 60 is NaN" (the score its network minimises, its loss).
        Shape(re.compile(rf"\bScore at iteration (\d+) is ({_NUM})(?![\w.])"), head=(metrics.STEP, metrics.LOSS)),
        # ... before its epoch and batch: hualin95's DeepLabV3+ and its forks, logger.info("The train loss of
        # epoch{}-batch-{}:{}".format(epoch, batch, loss)).
        Shape(re.compile(rf"{_LOSS_NAMED_BEFORE}(?i:epoch)[^\S\n]*(\d+)[^\S\n]*[-_,/][^\S\n]*"
                         rf"(?i:batch|iter(?:ation)?|step)[^\S\n]*[-_#]?[^\S\n]*(\d+)[^\S\n]*[:=,][^\S\n]*"
                         rf"({_NUM})(?![\w.])"),
              head=("epoch", "iter", metrics.LOSS)),
    ),
    drop_words=_EVAL_WORDS,
    # "Training loss at step 300" then "at step 0" under each "Epoch: N": a count inside the epoch
    # (a TF2 PointNet port; each epoch's records had replaced the last's at the same steps).
    step_wraps=True,
    min_records=2,
    amp_lines=True,
)
# ... after an epoch: "Cost after epoch 5: 0.41", "loss after epoch 3 is 0.52".
LOSS_BEFORE_EPOCH = replace(
    LOSS_BEFORE_STEP,
    description="a loss or cost named before its epoch (\"Cost after epoch 5: 0.41\")",
    shapes=(
        Shape(re.compile(rf"{_LOSS_NAMED_BEFORE}(?i:epochs?){_LOSS_NAMED_AFTER}"), head=(metrics.STEP, metrics.LOSS)),
    ),
    step_unit="epoch",
)

# Keras' fit(verbose=2) before TensorFlow 2 (Keras 1, Keras 2.0-2.2): the header "Epoch 3/50" on a
# line of its own, then one line for the epoch that counts no batches: "3s - loss: 0.41 - acc: 0.86
# - val_loss: 0.52" (Keras 2: " - 3s - loss: ...", 2.2: " - 3s 50ms/step - loss: ..."). Each joins its
# header and is read as a line per epoch reads "Epoch 3/50 - 3s - loss: 0.41 - ...". Pasted, the
# time is often gone with the bar ("loss: 0.41 - acc: 0.86 - ..." under the header, a blank line
# between: a question's paste); such a line is Keras' where a " - key: " follows its loss.
_KERAS_EPOCH_LINE = r"(?:[^\S\n]*- )?\d+s(?: \d+[mu]?s/step)? - "
_KERAS_TIMELESS_LINE = r"[^\S\n]*loss: [^\s-][^\s]* - \w+: "
# A callback's line, printed before the epoch's own (the progress logger is the last callback):
# ModelCheckpoint's "Epoch 00003: val_loss improved from 0.52 to 0.48, saving model to m.h5",
# ReduceLROnPlateau's "Epoch 00012: ReduceLROnPlateau reducing learning rate to 1e-04.",
# EarlyStopping's "Epoch 00008: early stopping" (the last epoch's line after it).
_KERAS_CALLBACK_LINE = r"Epoch \d{5}: [^\n]*\n"
KERAS_EPOCHS = replace(
    EPOCH_LINES,
    name="keras_epochs",
    description="Keras' fit(verbose=2) output before TensorFlow 2: 'Epoch 3/50', then '3s - loss: X - val_loss: Y' "
                "(or, its time cut in a paste, 'loss: X - acc: A - ...')",
    sniff=re.compile(rf"^(?:{_KERAS_EPOCH_LINE}loss: |{_KERAS_TIMELESS_LINE})", re.MULTILINE),
    joins=re.compile(rf"^(Epoch \d+/\d+)[^\S\n]*\n(?:[^\S\n]*\n|{_KERAS_CALLBACK_LINE})*"
                     rf"(?={_KERAS_EPOCH_LINE}|{_KERAS_TIMELESS_LINE})", re.MULTILINE),
    join_with=r"\1 - ",
    min_records=2,
    step_unit="epoch",
    epoch_trainings=False,  # (its fits are told apart by their "Epoch 1/N" headers: textlogs._keras_fits)
)

# Det3D and CenterPoint (its fork): the step's line "Epoch [1/20][6840/15448]\tlr: 0.00011, eta: ...,
# memory: 7964, ", then one "task : ['car'], loss: 2.2752, hm_loss: ..., loc_loss: ..." line per
# detection head; the step's loss is the sum of its heads' (a NaN head's, NaN). Each step is read as
# the line "Epoch [1/20][6840/15448] lr: 0.00011, loss: <sum>"; task lines with no step line before
# them (a paste's cut head) are left out.
_DET3D_TASK = re.compile(rf"\btask : \[[^\]\n]*\], loss: ({_NUM})")
_DET3D_STEP = re.compile(rf"^[^\n]*?(Epoch \[\d+/\d+\]\[\d+/\d+\])\t?[^\S\n]*lr: ({_NUM})[^\n]*\n"
                         r"((?:[^\n]*?\btask : \[[^\n]*(?:\n|$))+)", re.MULTILINE)


def _det3d_step(match: re.Match) -> str:
    total = sum(float(loss) for loss in _DET3D_TASK.findall(match.group(3)))
    return f"{match.group(1)} lr: {match.group(2)}, loss: {total!r}\n"


DET3D = replace(
    GENERIC,
    name="det3d",
    description="Det3D / CenterPoint (\"Epoch [e/E][i/N]\\tlr: ...\", then \"task : ['car'], loss: X, ...\" per head: their sum)",
    rewrite=lambda text: _DET3D_STEP.sub(_det3d_step, text),
    rewrite_needs=("task : [",),
    sniff=re.compile(r"\btask : \[[^\]\n]*\], loss: "),
    min_records=2,
)

# DeepFaceLab's trainer: f"[{time}][#{iter:06d}][{ms:04d}ms]" then its models' losses, the source's and the
# destination's autoencoder ("src_loss:0.286 dst_loss:0.137", or in 2.0 "[0.2449][0.4413]"): both trained at
# once, their sum the loss.
_DFL_STEP = re.compile(rf"^[^\S\n]*\[\d\d:\d\d:\d\d\]\[#(\d+)\]\[\d+ms\](?:\[({_NUM})\]\[({_NUM})\]|"
                       rf"[^\S\n]*src_loss:[^\S\n]*({_NUM})[^\S\n]+dst_loss:[^\S\n]*({_NUM}))", re.MULTILINE)


def _dfl_step(match: re.Match) -> str:
    src, dst = match.group(2) or match.group(4), match.group(3) or match.group(5)
    return f"iter {int(match.group(1))} loss: {float(src) + float(dst)!r} src_loss: {src} dst_loss: {dst}"


# faceswap's (deepfakes/faceswap) the same two sides' losses: f"[{time}] [#{iter:05d}] Loss A: {a:.5f}, Loss B:
# {b:.5f}", drawn again on one line (its next output glued after the last number).
_FACESWAP_STEP = re.compile(rf"\[\d\d:\d\d:\d\d\][^\S\n]*\[#(\d+)\][^\S\n]*Loss A:[^\S\n]*({_NUM}),[^\S\n]*"
                            rf"Loss B:[^\S\n]*({_NUM}(?:\.\d{{5}})?)")


def _faceswap_step(match: re.Match) -> str:
    a, b = match.group(2), match.group(3)[: match.group(3).find(".") + 6] if "." in match.group(3) else match.group(3)
    return f"\niter {int(match.group(1))} loss: {float(a) + float(b)!r} loss_a: {a} loss_b: {b}\n"


DEEPFACELAB = replace(
    GENERIC,
    name="deepfacelab",
    description="DeepFaceLab (\"[12:00:00][#061370][4251ms] src_loss:0.286 dst_loss:0.137\", or "
                "\"...[0.2449][0.4413]\") "
                "and faceswap (\"[00:27:25] [#00015] Loss A: 0.20026, Loss B: 0.22471\"): the two sides' sum",
    rewrite=lambda text: _FACESWAP_STEP.sub(_faceswap_step, _DFL_STEP.sub(_dfl_step, text)),
    rewrite_needs=("ms][", "ms] src_loss:", "Loss A:"),
    sniff=re.compile(r"^[^\S\n]*\[\d\d:\d\d:\d\d\]\[#\d+\]\[\d+ms\]|\[#\d+\][^\S\n]*Loss A:", re.MULTILINE),
    min_records=2,
)

# PySlowFast (and the video models built on it: MViT, X3D, TimeSformer's trainer): its logging.py
# prints each record as "json_stats: {...}", the training iterations' with "_type": "train_iter"
# (newer: "train_iter_ssl"), "epoch": "1/300", "iter": "80/240" (older: "cur_epoch": "1", "cur_iter":
# "10": counts as text), the loss, the LR and (newer) the grad norm; its epoch summaries and
# evaluations ("train_epoch", "val_iter", "val_epoch") are no training records. Each training
# record is read as the line "epoch: 1/300, iter: 80/240, loss: X, lr: L, grad_norm: G".
_SLOWFAST_STATS = re.compile(r"json_stats: (\{[^\n]*\})")
_SLOWFAST_FIELDS = ("loss", "lr", "grad_norm")


def _slowfast_line(match: re.Match) -> str:
    try:
        row = json.loads(match.group(1))
    except ValueError:
        return match.group(0)
    if not isinstance(row, dict) or not str(row.get("_type", "")).startswith("train_iter"):
        return f"json_stats: ({row.get('_type') if isinstance(row, dict) else 'record'})"
    fields = [f"epoch: {row.get('epoch', row.get('cur_epoch'))}", f"iter: {row.get('iter', row.get('cur_iter'))}"]
    fields += [f"{key}: {row[key]}" for key in _SLOWFAST_FIELDS if key in row]
    return ", ".join(fields)


PYSLOWFAST = replace(
    GENERIC,
    name="pyslowfast",
    description='PySlowFast ("json_stats: {"_type": "train_iter", "epoch": "1/300", "iter": "80/240", "loss": X, ...}")',
    rewrite=lambda text: _SLOWFAST_STATS.sub(_slowfast_line, text),
    rewrite_needs=("json_stats: {",),
    sniff=re.compile(r'json_stats: \{"_type": "train_iter'),
    min_records=2,
)

def _lines_under(header: str, stop: str, most: int) -> str:
    """A pattern's prefix: a ``header`` line, then at most ``most`` lines (fewest first) none of which
    starts as ``stop`` does (the next header): a record printed a few lines under its epoch's header.

    Example:
        >>> re.match(_lines_under(r"== E(\\d+) ==", "== E", 2) + "loss (\\S+)", "== E3 ==\\nlr 0.1\\nloss 2.5").groups()
        ('3', '2.5')
    """
    return rf"{header}[^\S\n]*\n(?:(?!{stop})[^\n]*\n){{0,{most}}}?"


# Open3D-ML's pipelines (RandLA-Net, KPConv on Semantic3D, S3DIS, ...): "=== EPOCH 0/100 ===", then per
# metric a line of its training and evaluation value, "loss train: 1.981  eval: 2.344" ("acc train: ...",
# "iou train: ..."). Epochs from 0; the eval value the val_loss.
_OPEN3D_EPOCH = _lines_under(r"^=== EPOCH (\d+)/\d+ ===", "=== EPOCH", 4)
OPEN3D_ML = Dialect(
    name="open3d_ml",
    description='Open3D-ML\'s pipelines ("=== EPOCH 0/100 ===", then "loss train: 1.981  eval: 2.344")',
    shapes=(
        Shape(re.compile(rf"{_OPEN3D_EPOCH}loss train: ({_NUM})(?:[^\S\n]+eval: ({_NUM}))?", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS, metrics.VAL_LOSS)),
    ),
    sniff=re.compile(r"^loss train: [-+\d.naif]+[^\S\n]+eval: ", re.MULTILINE),
    min_records=2,
    step_unit="epoch",
)

# yanx27's Pointnet_Pointnet2_pytorch (its part- and semantic-segmentation trainers, and their forks):
# "**** Epoch 1 (1/128) ****" (the launch's own count, then the epoch of the training: a resumed run
# prints "Epoch 1 (4/128)"), "Training mean loss: 0.817511"; its evaluation "---- EPOCH 001 EVALUATION ----",
# "eval mean loss: 0.767204". The epoch in brackets is the step.
_POINTNET2_EPOCH = _lines_under(r"\*{4} Epoch \d+ \((\d+)/\d+\) \*{4}", r"[^\n]*\*{4} Epoch ", 8)
_POINTNET2_TRAIN = re.compile(rf"{_POINTNET2_EPOCH}[^\n]*?Training mean loss: ({_NUM})")
POINTNET2 = Dialect(
    name="pointnet2",
    description='yanx27\'s Pointnet_Pointnet2_pytorch ("**** Epoch 1 (1/128) ****", "Training mean loss: X", '
                '"eval mean loss: Y")',
    shapes=(
        Shape(_POINTNET2_TRAIN, head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"---- EPOCH (\d+) EVALUATION ----[^\S\n]*\n(?:[^\n]*\n){{0,4}}?[^\n]*?"
                         rf"eval mean loss: ({_NUM})"),
              head=(metrics.STEP, metrics.VAL_LOSS), beside=_POINTNET2_TRAIN),
    ),
    sniff=re.compile(r"Training mean loss: [-+\d.naif]"),
    min_records=2,
    step_unit="epoch",
)

# graykode's nlp-tutorial (NNLM, Word2Vec, TextCNN, Seq2Seq, Transformer, BERT), copied into many courses:
# print('Epoch:', '%04d' % (epoch + 1), 'cost =', '{:.6f}'.format(loss)), "Epoch: 0010 cost = 15.205759".
# The cost is the loss; the epoch (printed every N) the step.
NLP_TUTORIAL_COST = Dialect(
    name="nlp_tutorial_cost",
    description='graykode\'s nlp-tutorial ("Epoch: 0010 cost = 15.205759")',
    shapes=(
        Shape(re.compile(rf"^Epoch: (\d+) cost = ({_NUM})[^\S\n]*$", re.MULTILINE), head=(metrics.STEP, metrics.LOSS)),
    ),
    min_records=2,
    step_unit="epoch",
    epoch_trainings=True,
)

# llama-recipes (llama-cookbook)'s fine-tuning loop: its tqdm bar counts optimizer steps ("3/9" under
# gradient accumulation), its description each batch, "Training Epoch: 1/3, step 10/36 completed (loss:
# 0.52)" (the step from 0 within the epoch, the batch's loss): read by the description (by the bar's count,
# three of four losses were dropped as one step's several).
LLAMA_RECIPES = Dialect(
    name="llama_recipes",
    description='llama-recipes / llama-cookbook ("Training Epoch: 1/3, step 10/36 completed (loss: 0.52): 33%|...| '
                '3/9")',
    shapes=(
        Shape(re.compile(rf"\bTraining Epoch: (\d+)/\d+, step (\d+)/(\d+) completed \(loss: ({_NUM})\)"),
              head=("epoch", "iter", "total", metrics.LOSS)),
    ),
    min_records=2,
)

# TFLearn's console: "Training Step: 8  | total loss: 2.03040 | time: 0.275s", then its optimizer's line
# "| Adam | epoch: 001 | loss: 2.03040 - acc: 0.2720 -- iter: 00512/55000" (the same loss, the samples seen
# as "iter"; read too, each loss was read twice, at step 8 and at 512), its val_loss there after a
# validation. The step is the training step, the total loss the loss.
_TFLEARN_STEP = re.compile(rf"^Training Step: (\d+)[^\S\n]*\| total loss: ({_NUM})", re.MULTILINE)
TFLEARN = Dialect(
    name="tflearn",
    description='TFLearn ("Training Step: 8  | total loss: 2.03040 | time: 0.275s", then "| Adam | epoch: 001 | '
                'loss: 2.03040 - acc: 0.2720 | val_loss: 1.42 - val_acc: 0.51 -- iter: 00512/55000")',
    shapes=(
        Shape(_TFLEARN_STEP, head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"^Training Step: (\d+)[^\S\n]*\|[^\n]*\n[^\n]*\bval_loss: ({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS), beside=_TFLEARN_STEP),
    ),
    sniff=re.compile(r"^Training Step: \d+[^\S\n]*\| total loss: ", re.MULTILINE),
    min_records=2,
)

# PyTorch's "NLP from scratch" tutorials, copied into many courses: the character-level RNN classifier's
# print('%d %d%% (%s) %.4f %s / %s %s' % (iter, percent, timeSince(start), loss, name, guess, correct)),
# "5000 5% (0m 12s) 2.4177 Coelho / Portuguese ✓"; the name generator's "0m 16s (5000 5%) 3.1569"; the
# seq2seq translator's "1m 20s (- 19m 1s) (5000 6%) 2.7087" (the time left after the time spent). The
# iteration the step, the loss the average over the iterations since the last print.
_TUTORIAL_TIME = r"\d+m \d+s"
NLP_TUTORIALS = Dialect(
    name="nlp_tutorials",
    description='PyTorch\'s NLP-from-scratch tutorials ("5000 5% (0m 12s) 2.4177 Coelho / Portuguese ✓", '
                '"0m 16s (5000 5%) 3.1569", "1m 20s (- 19m 1s) (5000 6%) 2.7087")',
    shapes=(
        Shape(re.compile(rf"^(\d+) \d+% \({_TUTORIAL_TIME}\) ({_NUM}) ", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"^{_TUTORIAL_TIME} (?:\(- -?{_TUTORIAL_TIME}\) )?\((\d+) \d+%\) ({_NUM})[^\S\n]*$",
                         re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    min_records=2,
)

# The PyTorch transfer-learning tutorial's train_model, copied into many scripts (layumi's person re-ID
# baseline among them): "Epoch 0/24", a line of dashes, then each phase's "train Loss: 0.5814 Acc: 0.6967" and
# "val Loss: 0.2474 Acc: 0.9085" (the re-ID baseline's "train Loss: 0.4552 Reg: 0.0000 Acc: 0.0087 ..." after
# lines of its own). Epochs from 0; the val phase's loss is the epoch's val_loss.
# (the epoch perhaps named after the model it trains: "resnet-50 - Epoch 1/100", a script that trains several)
_TUTORIAL_EPOCH = _lines_under(r"^(?:[^\n]*?[^\S\n])?Epoch (\d+)/\d+[^\S\n]*\n-{3,}", r"[^\n]*\bEpoch \d", 6)
_TUTORIAL_TRAIN = re.compile(rf"{_TUTORIAL_EPOCH}[Tt]rain Loss: ({_NUM})", re.MULTILINE)
TRANSFER_TUTORIAL = Dialect(
    name="transfer_tutorial",
    description='the PyTorch transfer-learning tutorial\'s train_model ("Epoch 0/24", "----------", "train Loss: X '
                'Acc: A", "val Loss: Y Acc: B")',
    shapes=(
        Shape(_TUTORIAL_TRAIN, head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"{_TUTORIAL_EPOCH}(?:[Vv]al|[Vv]alid|[Tt]est) Loss: ({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS), beside=_TUTORIAL_TRAIN),
    ),
    sniff=re.compile(r"^[Tt]rain Loss: [-+\d.na]", re.MULTILINE),
    min_records=2,
    step_unit="epoch",
    epoch_trainings=True,  # (a script that trains several models in turn)
)

# torch-ngp's Trainer and the NeRF / text-to-3D / talking-head repositories built on it (stable-dreamfusion,
# nerf2mesh, RAD-NeRF, ER-NeRF): "==> Start Training <workspace> Epoch 82/300, lr=0.050000 ...", then a tqdm
# bar over the epoch's steps, "loss=1.0000 (1.0000), lr=0.050000: :  50% 50/100 [00:09<00:09,  5.39it/s]"
# (the step's loss, the epoch's mean so far), and "++> Evaluate <workspace> at epoch 82 ...", its bar
# "loss=0.0000 (0.0000): : 100% 8/8 [...]" no training's. Read as "Epoch [82], Step [50/100], Loss: 1.0,
# lr: 0.05" lines (the general reader's): the count inside the epoch goes on across epochs; the evaluation's
# lines are left out.
_NGP_EVALUATION = re.compile(r"\+\+> Evaluate .*?(?=^==> |^[^\n]*\bStart Training\b|\Z)", re.MULTILINE | re.DOTALL)
_NGP_LINE = re.compile(rf"\bStart Training\b[^\n]*?\bEpoch (\d+)|"
                       rf"\bloss=({_NUM}) \({_NUM}\), lr=({_NUM}): :[^\S\n]*\d+%[^\n]*?(\d+)/(\d+)")


def _torch_ngp_lines(text: str) -> str:
    """torch-ngp's bars as lines the general reader reads, each under its epoch's header; its
    evaluations left out."""
    epoch = None  # the last "Start Training ... Epoch E" line's

    def line(match: re.Match) -> str:
        nonlocal epoch
        if match.group(1) is not None:
            epoch = match.group(1)
            return match.group(0)
        loss, lr, count, total = match.group(2, 3, 4, 5)
        at = "" if epoch is None else f"Epoch [{epoch}], "
        return f"\n{at}Step [{count}/{total}], Loss: {loss}, lr: {lr}\n"
    return _NGP_LINE.sub(line, _NGP_EVALUATION.sub("", text))


TORCH_NGP = replace(
    GENERIC,
    name="torch_ngp",
    description='torch-ngp\'s Trainer (stable-dreamfusion, nerf2mesh, ER-NeRF: "Start Training ... Epoch E", then '
                '"loss=X (mean), lr=L: :  50% 50/100 [...]"; its evaluations\' bars left out)',
    rewrite=_torch_ngp_lines,
    rewrite_needs=("), lr=",),
    sniff=re.compile(rf"\bloss=(?:{_NUM}) \((?:{_NUM})\), lr=(?:{_NUM}): :"),
    min_records=2,
)

# The skeleton action-recognition trainers of ST-GCN's line (2s-AGCN, MS-G3D, CTR-GCN, InfoGCN, TD-GCN and
# their forks; print_log puts "[ <time.asctime()> ] " before each line): "Training epoch: 3" (MS-G3D's
# "Training epoch: 3, LR: 0.1000"), the epoch's "\tMean training loss: 2.4913." (MS-G3D's "Mean training
# loss: 1.6621 (BS 32: 3.3243)."; CTR-GCN's "  Mean training acc: 31.93%." after), then "Eval epoch: 3"
# and "\tMean test loss of 258 batches: 1.7752676130265228.". Epochs from 1. Where an epoch's lines
# print its batches ("\tBatch(100/589) done. Loss: 3.6262  lr:0.100000") the general reader reads those.
_GCN_TIME = r"(?:\[ [^\]\n]* \][^\S\n]*)?"
# (a line between that is another epoch's, or a batch's: no record of this shape; a paste cut between
# "Training epoch: 18" and epoch 57's lines does not give epoch 18 epoch 57's loss)
_GCN_BETWEEN = r"(?:(?![^\n]*(?:\bBatch\(|\bepoch: \d))[^\n]*\n){0,2}?"
_GCN_EPOCH_LOSS = re.compile(rf"^{_GCN_TIME}Training epoch: (\d+)[^\n]*\n{_GCN_BETWEEN}"
                             rf"{_GCN_TIME}Mean training loss: ({_NUM})", re.MULTILINE)
SKELETON_GCN = Dialect(
    name="skeleton_gcn",
    description='ST-GCN\'s line of skeleton action-recognition trainers (2s-AGCN, MS-G3D, CTR-GCN: "[ <time> ] '
                'Training epoch: E", then "Mean training loss: X.", "Eval epoch: E", "Mean test loss of N '
                'batches: Y.")',
    shapes=(
        Shape(_GCN_EPOCH_LOSS, head=(metrics.STEP, metrics.LOSS)),
        Shape(re.compile(rf"^{_GCN_TIME}Eval epoch: (\d+)[^\n]*\n{_GCN_BETWEEN}{_GCN_TIME}Mean test loss of \d+ "
                         rf"batches: ({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.VAL_LOSS), beside=_GCN_EPOCH_LOSS),
        Shape(re.compile(rf"^{_GCN_TIME}Training epoch: (\d+), LR: ({_NUM})", re.MULTILINE),
              head=(metrics.STEP, metrics.LR), beside=_GCN_EPOCH_LOSS),
    ),
    sniff=re.compile(rf"^{_GCN_TIME}Mean training loss: [-+\d.na]", re.MULTILINE),
    min_records=2,
    step_unit="epoch",
)

# What a logger puts before a message: a date and time ("2024-01-01 12:00:05,123", "[12:00:05]"),
# a level, a logger's name, with the separators logging's formats use ("INFO:root:", " - INFO - ").
# (Python's "%(asctime)s - %(name)s - %(levelname)s - %(message)s": the logger's name before the level; a message's
# own indent after them.)
_LOG_PREFIX = (r"(?:\[?(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[,.]\d+)?\]?[^\S\n]*(?:[-|:][^\S\n]*)?)?"
               r"(?:[A-Za-z_][\w.]*[^\S\n]+-[^\S\n]+(?=(?:DEBUG|INFO|WARNING|WARN)\b))?"
               r"(?:(?:DEBUG|INFO|WARNING|WARN)[^\S\n]*(?:[-|:][^\S\n]*)?)?"
               r"(?:(?<=[:\s-])[A-Za-z_][\w.]*[^\S\n]*[-|:][^\S\n]*)?[^\S\n]*")
# A script that prints its loss alone, with no step: "loss: 2.31", "Training loss = 2.31"
# (print(f"loss: {loss.item()}") every step or every N): numbered 1, 2, 3 in order.
# ... or a tqdm bar of no known length whose description is the loss, left on its own line at each epoch's end
# (Wav2Lip's SyncNet trainer: prog_bar.set_description('Loss: {}'.format(running_loss / (step + 1))), "Loss:
# 0.5212869264862754: : 11it [00:06,  1.59it/s]": the epoch's running mean)
_BAR_WITHOUT_TOTAL = r":[^\S\n]*:?[^\S\n]*\d+it \[[^\]\n]*\][^\S\n]*"
_PAIR = rf"[A-Za-z_][\w/.]*[^\S\n]*=[^\S\n]*{_NUM}[^\S\n]*"  # a key=value pair, its value a number
LOSS_LINES = Dialect(
    name="text",
    description="lines of a loss and no step (loss: X; a=1, loss=X, b=2), numbered in order",
    shapes=(
        # (and TensorFlow 1's tf.Print(total_loss, [total_loss], message="Total loss is :"), DeepLab's:
        # "Total loss is :[0.1406]", its list read as its number by textscan.plain_numbers; a script's
        # "Avg Loss is 3.5779"; "is" only before a number that ends the line: "Warning: loss is NaN, skipping
        # this step" is a message)
        # (and the training line of GAT's train.py, "Training: loss = 1.94591, acc = 0.15000 | Val: loss =
        # 1.94328, acc = 0.21400": its accuracy after the loss, its validation part an evaluation's)
        # (fields after the loss only where a word names it the training's: "Loss:10.923, Step time:
        # 0.413s," alone is a wrapped line's end, ColossalAI's Rich handler wrapping "[n/N] Loss:...")
        # (two such words too: FourCastNet's and the PhysicsNeMo examples' "Avg train loss=0.577775" under "Time
        # taken for epoch 1 is ...", "Avg Train Loss: 0.976610" under "--- Epoch 1 Summary ---")
        Shape(re.compile(rf"^[^\S\n]*{_LOG_PREFIX}(?=(?i:train(?:ing)?|total|avg|average|mean)(?:[ _]|:[^\S\n]+)|"
                         rf"[^\n]*?{_NUM}(?:[^\S\n]*|{_BAR_WITHOUT_TOTAL})$)"
                         rf"(?:(?i:train(?:ing)?|total|avg|average|mean)(?:[ _]|:[^\S\n]+)){{0,2}}(?i:loss)"
                         rf"(?:[^\S\n]+is(?=[^\S\n]*:?[^\S\n]*{_NUM}[^\S\n]*$)[^\S\n]*:?|[^\S\n]*[:=])[^\S\n]*({_NUM})"
                         rf"[^\S\n]*(?:[,;|][^\n]*|{_BAR_WITHOUT_TOTAL})?$", re.MULTILINE), head=(metrics.LOSS,)),
        # ... or among a line's key=value pairs, all numbers, after others (dotaservice's PPO optimizer:
        # "steps_per_s=443.39, avg_weight_age=4.9, reward_per_sec=-0.0046, loss=0.2225, entropy=7.487", under
        # its "iteration 9/10000")
        Shape(re.compile(rf"^[^\S\n]*{_LOG_PREFIX}(?:{_PAIR},[^\S\n]*)+(?i:loss)[^\S\n]*=[^\S\n]*({_NUM})"
                         rf"(?:[^\S\n]*,[^\S\n]*{_PAIR})*[^\S\n]*$", re.MULTILINE), head=(metrics.LOSS,)),
    ),
    step_from_order=True,
    # "validation loss: 2.1" every N lines (x-transformers' examples): the step before it.
    drop_words=_EVAL_WORDS,
    unstepped_evaluation=_UNSTEPPED_EVALUATION,
    min_records=5,
    # An epoch's line of its own above its loss lines, counted from the first again: trainings appended
    # (chemprop's "Epoch 0" above its "Loss = 1.18e+00, PNorm = ..." lines, again at each cross-validation fold).
    epoch_trainings=re.compile(r"^[^\S\n]*(?i:epoch)[^\S\n]*[:=#]?[^\S\n]*(\d+)(?:[^\S\n]*/[^\S\n]*\d+)?[^\S\n]*$",
                               re.MULTILINE),
)

# print(t, loss.item()) (the PyTorch tutorial "Learning PyTorch with Examples") and print((t, loss))
# or Python 2's print(t, loss.data[0]): a line holding a step and a loss, nothing else; NVIDIA's
# WaveGlow prints print("{}:\t{:.9f}".format(iteration, reduced_loss)).
PAIRS = Dialect(
    name="text",
    description="lines of a step and a loss alone (print(t, loss.item()), (t, loss) tuples, \"N:\\tX\")",
    shapes=(
        Shape(re.compile(rf"^[ \t]*\(?[ \t]*(\d+)[ \t]*[,:]?[ \t]+({_NUM})[ \t]*\)?[ \t]*$", re.MULTILINE),
              head=(metrics.STEP, metrics.LOSS)),
    ),
    min_records=5,
    amp_lines=True,
)

# In the order the sniffer tries them; the generic readers come last.
# A log of overflow lines alone (apex prints them between the script's own lines, which may be in
# no format sentinel reads): the loss scale is still judged. Tried only where nothing else reads
# the file (see textlogs.pick_dialect).
AMP_ONLY = Dialect(
    name="amp_overflow",
    description='mixed-precision overflow lines alone (apex "Gradient overflow.  Skipping step, loss scaler 0 '
                'reducing loss scale to X", "OVERFLOW! Skipping step. Attempted loss scale: A, reducing to B")',
    shapes=(),
    events=AMP_LINES,
    sniff=AMP_SNIFF,
    min_records=1,
    event_word="overflow",
)

# A library's lines saying the loss went non-finite, and no record line (a paste of TensorFlow's
# "Model diverged with loss = NaN." and its traceback): read only from a file named on its own, where
# no dialect reads a record (see textlogs.pick_dialect).
NONFINITE_ONLY = Dialect(
    name="nonfinite_message",
    description='a library\'s line that the loss went non-finite, alone (TensorFlow\'s "Model diverged with '
                'loss = NaN."), in a file named on its own',
    shapes=(),  # its lines are every text's event lines (text_events.read_events)
    sniff=NONFINITE_WORDS[0],
    min_records=1,
    event_word="non-finite message",
)

# pytorch-CycleGAN-and-pix2pix's loss_log.txt (and its console): "(epoch: 1, iters: 100, time: 2.416,
# data: 9.430) D_A: 0.540 G_A: 0.433 cycle_A: 2.246 idt_A: 1.263 D_B: 0.589 ..." (pix2pix: G_GAN,
# G_L1, D_real, D_fake); iters counts the epoch's samples. Each name is one term of a loss: the
# generator's loss is the sum of the terms that are not D_*, the discriminators' their sum
# (textlogs.gan_terms).
CYCLEGAN = Dialect(
    name="cyclegan",
    description='pytorch-CycleGAN-and-pix2pix ("(epoch: E, iters: I, time: T, data: D) D_A: x G_A: y ...")',
    shapes=(
        # (forks print "(Epoch: E, ...")
        Shape(re.compile(r"\((?i:epoch): (\d+), iters: (\d+), time: [^)\n]*\)[ ,]*([^\n]*)"), head=("epoch", "iter"),
              separators=(": ", ", ")),
    ),
    min_records=2,
    loss_terms=LossTerms(),
)

# BasicSR's MessageLogger (the trainer of Real-ESRGAN, GFPGAN, SwinIR's and many restoration
# models): "[exp..][epoch:  0, iter:   1,000, lr:(2.000e-04,)] [eta: 1 day, 2:03:04, time (data):
# 0.512 (0.004)] l_pix: 3.3498e-02 ", iter the global step printed "{:8,d}"; mmsr's and EDVR's
# "[epoch:  0, iter:     100, lr:(1.000e-04,)] l_pix: ..." and the first ESRGAN codes' "<epoch:  0,
# iter:     100, lr:1.000e-04> l_pix: ...". Each l_* key is a term of the loss, l_g_* the
# generator's and l_d_* the discriminator's (out_d_*: its outputs, no loss); textlogs.gan_terms.
# KAIR's (SwinIR's training code) "<epoch:  9, iter:   1,000, lr:2.000e-04> G_loss: 4.617e-02 ": its
# network G's loss (an L1 where it trains for PSNR), the loss.
BASICSR = Dialect(
    name="basicsr",
    description='BasicSR ("[train..][epoch:  0, iter:   1,000, lr:(2.000e-04,)] [eta: ...] l_pix: 3.3498e-02")',
    shapes=(
        Shape(re.compile(rf"[\[<]epoch:[^\S\n]*(\d+), iter:[^\S\n]*(\d{{1,3}}(?:,\d{{3}})*), lr:\(?({_NUM})"
                         rf"[^\n]*?(?:\)\]|>)(?:[^\S\n]*\[eta: [^\]\n]*\])?[^\S\n]*([^\n]*)"),
              head=("_", metrics.STEP, metrics.LR), separators=(": ",), keys={"g_loss": metrics.LOSS},
              scrub=(re.compile(r"(?<=\d),(?=\d{3}(?!\d))"), "")),
    ),
    sniff=re.compile(r"[\[<]epoch:[^\S\n]*\d+, iter:[^\S\n]*[\d,]+, lr:"),
    min_records=2,
    loss_terms=LossTerms(term="l_", critic="l_d_", alone=True),
)

# EDSR-PyTorch's trainer (RCAN's and the super-resolution repositories built on it): "[Epoch E]\tLearning
# rate: 1.00e-4", then f"[{samples}/{dataset}]\t{display_loss}\t{model:.1f}+{data:.1f}s", its loss
# display "[L1: 5.9633]" per loss term and "[Total: X]" after them where there are several (a GAN's
# discriminator's "[DIS: X]" among them). The count is the epoch's samples.
EDSR = Dialect(
    name="edsr",
    description='EDSR-PyTorch ("[1600/16000]\\t[L1: 5.9633]\\t65.8+0.4s", "[Total: X]" over several terms)',
    shapes=(
        # (a space before the tab after the display: older versions' "[L1: nan] \t21.0+60.3s")
        Shape(re.compile(rf"^\[(\d+)/(\d+)\]\t((?:\[[\w.]+: {_NUM}\])+)[^\S\n]*\t[\d.]+\+[\d.]+s[^\S\n]*$",
                         re.MULTILINE),
              head=("iter", "total"), separators=("[", "]", ":"), keys={"total": metrics.LOSS}),
    ),
    sniff=re.compile(r"^\[\d+/\d+\]\t\[[\w.]+: ", re.MULTILINE),
    min_records=2,
    loss_terms=LossTerms(critic="dis", alone=True),  # one term and no Total: that term
)

# VITS (and the voice models trained with its train.py: so-vits-svc's first versions, Bert-VITS2,
# VITS2, MB-iSTFT-VITS, RVC): "Train Epoch: E [P%]" then logger.info([x.item() for x in losses] +
# [global_step, lr]), losses = [loss_disc, loss_gen, loss_fm, loss_mel, loss_dur, loss_kl] (no
# loss_dur where the durations are not learnt). The generator optimises the sum of all but the
# first, VITS' loss_gen_all: read as the loss; loss_disc, the discriminator's, as loss_d.
_VITS_LIST = re.compile(rf"(?:^|(?<=[\t:]))\[({_NUM}(?:, {_NUM}){{3,}})\][^\S\n]*$", re.MULTILINE)
_VITS_TERMS = {6: ("gen", "fm", "mel", "dur", "kl"), 5: ("gen", "fm", "mel", "kl")}


def _vits_pairs(match: re.Match) -> str:
    """A VITS list as "step loss X loss_d Y lr Z <term> V ...": the loss is the generator's sum."""
    *losses, step, lr = match.group(0).split(", ")
    disc, terms = losses[0], losses[1:]
    total = sum(float(value) for value in terms)
    names = _VITS_TERMS.get(len(losses)) or tuple(f"term_{i}" for i in range(1, len(terms) + 1))
    return " ".join([step, "loss", repr(total), "loss_d", disc, "lr", lr,
                     *(f"{name} {value}" for name, value in zip(names, terms))])


# so-vits-svc 4.x: f"Losses: {[loss_disc, loss_gen, loss_fm, loss_mel, loss_kl]}, step: {global_step}, lr: {lr},
# reference_loss: {sum}": read as its 3.0 list, "[loss_disc, ..., loss_kl, step, lr]".
_SOVITS4 = re.compile(rf"\bLosses: \[({_NUM}(?:, {_NUM}){{3,}})\], step: (\d+), lr: ({_NUM})[^\n]*")


VITS = Dialect(
    name="vits",
    description='VITS and its voice models ("Train Epoch: E [P%]" then "[loss_disc, loss_gen, loss_fm, loss_mel, '
                'loss_dur, loss_kl, step, lr]")',
    shapes=(
        Shape(_VITS_LIST, head=(metrics.STEP,), separators=(),
              scrub=(re.compile(rf"^{_NUM}(?:, {_NUM}){{3,}}$", re.MULTILINE), _vits_pairs)),
        # RVC: logger.info([global_step, lr]), then f"loss_disc={loss_disc:.3f}, loss_gen=..., loss_fm=...,
        # loss_mel=..., loss_kl=..." (its loss_gen_all the sum of all but loss_disc: textlogs.gan_terms)
        Shape(re.compile(rf"(?:^|(?<=[\t:]))\[(\d+), ({_NUM})\][^\S\n]*\n[^\n]*?\b(loss_disc=[^\n]*)", re.MULTILINE),
              head=(metrics.STEP, metrics.LR), separators=("=", ",")),
    ),
    rewrite=lambda text: _SOVITS4.sub(r"[\1, \2, \3]", text),
    rewrite_needs=("Losses: [",),
    # (RVC's loss lines too: a paste of two records under one "Train Epoch" line)
    sniff=re.compile(r"\bTrain Epoch: \d+ \[\d+%\]|\bloss_disc=[^\n]*\bloss_gen="),
    min_records=2,
    loss_terms=LossTerms(term="loss_", critic="loss_disc"),
)

# DeepXDE (deepxde/display.py TrainingDisplay): a header "Step  Train loss  Test loss  Test metric",
# then a row per display_every iterations, each loss a list of its terms (the PDE's residuals, the
# boundary and initial conditions) printed "{:.2e}": "1000      [2.92e+02, 4.68e+01]    [3.00e+02,
# 3.39e+01]    []". The loss it trains is their sum (a term NaN, the sum NaN).
_DEEPXDE_WHOLE_ROW = re.compile(r"^(\d+)[^\S\n]+\[([^\]\n]*)\][^\S\n]+\[([^\]\n]*)\][^\S\n]+\[[^\]\n]*\][^\S\n]*$",
                                re.MULTILINE)  # (what its sniff counts: a pattern of one line)
# (a paste's last row cut inside its test loss: its training loss whole, read, the test's not)
_DEEPXDE_ROW = re.compile(r"^(\d+)[^\S\n]+\[([^\]\n]*)\](?:[^\S\n]+\[([^\]\n]*)\][^\S\n]+\[[^\]\n]*\][^\S\n]*$"
                          r"|[^\S\n]+\[[^\]\n]*(?=\n?\Z))", re.MULTILINE)


def _deepxde_sums(text: str) -> str:
    """Each row as its step, the sum of its training loss's terms and the sum of its test loss's.

    Example:
        >>> _deepxde_sums("0  [1.0e+00, 2.0e+00]  [3.0e+00]  []\\n1  [5.0e-01, 1.0e+00]  [2.5e+00, 0.")
        '0 loss: 3.0 test_loss: 3.0\\n1 loss: 1.5 test_loss: -'
    """
    return _DEEPXDE_ROW.sub(lambda m: f"{m.group(1)} loss: {_term_sum(m.group(2))} test_loss: "
                                      f"{_term_sum(m.group(3)) if m.group(3) is not None else '-'}", text)


def _term_sum(terms: str) -> str:
    try:
        return repr(sum(float(term) for term in terms.split(",")))
    except ValueError:
        return "-"  # not numbers: no value


DEEPXDE = Dialect(
    name="deepxde",
    description='DeepXDE ("Step  Train loss  Test loss  Test metric" rows, each loss a list of terms: their sum)',
    shapes=(
        Shape(re.compile(rf"^(\d+ loss: {_NUM} test_loss: (?:{_NUM}|-))$", re.MULTILINE),
              keys={"loss": metrics.LOSS, "test_loss": "val_loss"}),
    ),
    rewrite=_deepxde_sums,
    rewrite_needs=(re.compile(r"\][^\S\n]+\["),),
    sniff=_DEEPXDE_WHOLE_ROW,
    min_records=2,
    note=lambda text: ("the loss read is the sum of each row's 'Train loss' terms (DeepXDE prints the terms: the "
                       "residuals and the boundary and initial conditions), 'Test loss' as val_loss"),
)

# LeRobot (lerobot/utils/logging_utils.py MetricsTracker, scripts/train.py before it): "step:{s}
# smpl:{n} ep:{e} epch:{x:.2f} loss:{l:.3f} grdn:{g:.3f} lr:{lr:0.1e} updt_s:... data_s:...", each
# count through format_big_number: "step:20K" from step 1,000 on (loaders/rounded_steps.py works the
# steps back). "ep" counts episodes, "epch" epochs. Its evaluation lines hold no loss.
_LEROBOT_RECORD = re.compile(r"\bstep:(\d+(?:\.\d+)?[KMBTQ]?) (smpl:(?:(?!\sstep:|\sINFO )[^\n])*)")


def _lerobot_records(text: str) -> list[re.Match]:
    """The training records (an evaluation's line holds no loss)."""
    return [m for m in _LEROBOT_RECORD.finditer(text) if " loss:" in m.group(2)]


def _lerobot_steps(text: str) -> str:
    """The records' rounded steps ("step:20K") written as the steps they were (where a logging
    interval fits them all; else each spread over the range it rounds from, in order)."""
    found = _lerobot_records(text)
    printed = [m.group(1) for m in found]
    if all(p[-1:].isdigit() for p in printed):
        return text
    steps = unrounded(printed) or spread_rounded(printed)
    out, last = [], 0
    for m, step in zip(found, steps):
        out += [text[last:m.start(1)], str(step)]
        last = m.end(1)
    return "".join(out) + text[last:]


def _lerobot_step_note(text: str) -> str | None:
    """What a LeRobot log's warnings say of its rounded steps (None where none is rounded)."""
    printed = [m.group(1) for m in _lerobot_records(text)]
    if all(p[-1:].isdigit() for p in printed):
        return None
    if unrounded(printed) is not None:
        return ("LeRobot prints its step rounded from 1,000 on (step:20K): the steps are worked back from the "
                "logging interval the lines keep")
    return ("LeRobot prints its step rounded from 1,000 on (step:20K), and no one logging interval fits the lines (a "
            "restart, lines left out): each line's step is estimated within the thousand it rounds from")


LEROBOT = Dialect(
    name="lerobot",
    description='LeRobot ("step:N smpl:S ep:E epch:X loss:L grdn:G lr:R ...", its step rounded from 1K on)',
    shapes=(
        Shape(re.compile(r"\bstep:(\d+) (smpl:(?:(?!\sstep:|\sINFO )[^\n])*)"),
              keys={"loss": metrics.LOSS, "grdn": metrics.GRAD_NORM_TOTAL, "lr": metrics.LR, "ep": "episodes",
                    "epch": metrics.EPOCH},
              require="loss"),
    ),
    rewrite=_lerobot_steps,
    rewrite_needs=(re.compile(r"\bstep:\d+(?:\.\d+)?[KMBTQ] smpl:"),),
    sniff=re.compile(r"\bstep:\d+(?:\.\d+)?[KMBTQ]? smpl:\S+ ep:\S+ epch:[^\n]*?\bloss:"),
    min_records=2,
    note=_lerobot_step_note,
)

DIALECTS: tuple[Dialect, ...] = (HF_TRAINER, FAIRSEQ, DEEPSPEED, TORCHTITAN, MMENGINE, LITGPT, NANOGPT, BUILD_NANOGPT,
                                 NEMO1, MAXTEXT, PADDLENLP, TIMM, SWIN, EFFICIENTDET, TIANSHOU, KERAS_RL, COMPOSER,
                                 OLMO, COQUI, RSL_RL, POSE_STAGES, CHINESE_NER, WENET, NNUNET, DEEPXDE, LEROBOT, MLX,
                                 AVALANCHE, FLOWER, GLUONTS, GLUONTS_EPOCHS, ESPNET2_EPOCHS, HF_FLAX, HF_FLAX_EPOCHS,
                                 DEEPSPEECH, FUXICTR, GAN, CYCLEGAN, BASICSR, EDSR, VITS, DARKNET, HIFIGAN, MARIAN,
                                 NANOT5, TRAX, MXNET, FASTREID, TINYGRAD, GPT2_SIMPLE, VIDEOPOSE3D, SOUNDSTREAM,
                                 YOLOV4_PYTORCH, BTS, YOLACT, KPCONV, PFLLIB, DCGAN_TF, YOLO_RESULTS, MT_DNN, TACOTRON2,
                                 DGCNN, DGL_KE, UNSLOTH_TRAIN, STEP_AFTER_LOSS_KEY, LOSS_BEFORE_STEP, LOSS_BEFORE_EPOCH,
                                 TRIPLET_REID, POINTNET_BATCHES, POINTNET_EPOCHS, SPEECHBRAIN_SEPARATION, NGCF, DARTS,
                                 PYSLOWFAST, TRANSFER_TUTORIAL, NLP_TUTORIALS, TFLEARN, LLAMA_RECIPES, OPEN3D_ML,
                                 POINTNET2, NLP_TUTORIAL_COST, TORCH_NGP, SKELETON_GCN, DET3D, DEEPFACELAB, CATALYST,
                                 BIG_VISION, MINDSPORE_OUTPUTS, PIXART, VAR, FASTTEXT, LUZ, TF_OBJECT_DETECTION,
                                 OPENNMT_TF, TF, LOG4J, KERAS_EPOCHS, PROGRESS_LINES, GENERIC, EPOCH_LINES, PAIRS,
                                 LOSS_LINES)
# Readers of any text: tried only where no tool's dialect recognises the file, and only where
# what they read is a series (see textlogs.pick_dialect).
FALLBACKS: tuple[Dialect, ...] = (GENERIC, EPOCH_LINES, PAIRS, LOSS_LINES)
# The readers of no one tool's lines: a tool's dialect that found records of its own is not
# outcounted by them (NeMo's bar redraws pasted on one line: each postfix's loss read by the
# progress lines as the next bar's description).
GENERAL_READERS: tuple[Dialect, ...] = (PROGRESS_LINES, *FALLBACKS)
