"""Mixed-precision overflow lines that any training script's log may hold, whatever prints its
steps: the loss scalers of NVIDIA apex, its ``FP16_Optimizer`` (and DeepSpeed's, which kept its
words), fairseq's trainer, PaddlePaddle's ``GradScaler``, MindYOLO's train step, ESPnet2's trainer (a
non-finite grad norm's skipped update), and OpenAI's diffusion trainers (guided-diffusion, improved-diffusion,
consistency models), which keep the scale as its base-2 logarithm. A dialect with event lines of
its own reads those instead.

Example:
    >>> bool(AMP_LINES[0].pattern.search(
    ...     "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"))
    True
"""

from __future__ import annotations

import re

from sentinel.analyze.loaders.dialect_types import EventLine

# A number as training scripts print it, NaN and infinity in each spelling (NAN and INF: Python's E
# format; MindSpore's error "loss is NAN or INF" names no value). The text readers' too (dialects.py).
NUM = r"[-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|NAN(?! or INF\b)|inf|Infinity|Inf|INF)"

# apex/amp/handle.py: print("Gradient overflow.  Skipping step, loss scaler {} reducing loss
# scale to {}".format(idx, scaler.loss_scale())), once per scaler (one per loss).
APEX_OVERFLOW = EventLine(
    # (older apex releases: "Gradient overflow, skipping step, loss scaler 0 reducing loss scale to X")
    re.compile(rf"Gradient overflow[.,]\s+[Ss]kipping step, loss scaler \d+ reducing loss scale to (?P<new>{NUM})"),
    source="apex")

AMP_LINES: tuple[EventLine, ...] = (
    APEX_OVERFLOW,
    # apex.fp16_utils.FP16_Optimizer and DeepSpeed: "OVERFLOW! Skipping step. Attempted loss
    # scale: 65536, reducing to 32768"
    EventLine(re.compile(rf"(?i:overflow)[!.]? (?:Rank (?P<rank>\d+) )?Skipping step\.? Attempted loss scale: "
                         rf"(?P<attempted>{NUM}), reducing to (?P<new>{NUM})"), source="fp16_optimizer"),
    # fairseq's trainer: "NOTE: overflow detected, setting loss scale to: 0.25"
    EventLine(re.compile(rf"overflow detected, setting (?:loss )?scale to:? (?P<new>{NUM})"), source="fairseq"),
    # guided-diffusion's fp16_util.MixedPrecisionTrainer (improved-diffusion's train_util alike):
    # logger.log(f"Found NaN, decreased lg_loss_scale to {self.lg_loss_scale}"), the scale 2**lg.
    EventLine(re.compile(rf"Found NaN, decreased lg_loss_scale to (?P<new_lg>{NUM})"), source="openai_diffusion"),
    # PaddlePaddle's AmpScaler / GradScaler (paddle/amp/grad_scaler.py): print('Found inf or nan,
    # current scale is: {}, decrease to: {}*{}'.format(scale, scale, decr_ratio)).
    EventLine(re.compile(rf"Found inf or nan, current scale is: (?P<attempted>{NUM}), decrease to: {NUM}\*"
                         rf"(?P<ratio>{NUM})"), source="paddle"),
    # MindYOLO's train step (MindSpore's dynamic loss scale): logger.warning(f"overflow, still update, loss scale adjust
    # to {scale}")
    EventLine(re.compile(rf"\boverflow, still update, loss scale adjust to (?P<new>{NUM})"), source="mindyolo"),
    # ESPnet2's trainer, where the grad norm is not finite (fp16's scaler, or a NaN): logging.warning(f"The grad
    # norm is {grad_norm}. Skipping updating the model.") (an update skipped, as a scaler's overflow skips one).
    EventLine(re.compile(r"The grad norm is (?:nan|inf)\. Skipping updating the model"), source="espnet"),
)

# Every line above holds one of these: a text without them is not searched further.
WORDS = ("verflow", "VERFLOW", "lg_loss_scale", "current scale is", "Skipping updating the model")
# Any of the scalers' lines, for the sniffer (not ESPnet2's skipped update: its lines alone are no scaler's
# overflows, and a paste of them beside a step line of another reader is that reader's).
SNIFF = re.compile(r"Gradient overflow[.,]\s+[Ss]kipping step, loss scaler \d+ reducing loss scale to |"
                   r"(?i:overflow)[!.]? (?:Rank \d+ )?Skipping step\.? Attempted loss scale: |"
                   r"overflow detected, setting (?:loss )?scale to|"
                   r"Found NaN, decreased lg_loss_scale to |"
                   r"Found inf or nan, current scale is: |"
                   r"\boverflow, still update, loss scale adjust to ")
