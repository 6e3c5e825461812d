"""Lines in which a training library says that a loss, a gradient or a parameter went
non-finite, whatever prints the steps around them: PyTorch's anomaly mode (``torch.autograd.
detect_anomaly``, Lightning's ``Trainer(detect_anomaly=True)``), the check that the DeiT / MAE /
ConvNeXt family of training scripts stop on, Lightning's ``detect_nan_parameters``, detectron2's RPN,
``clip_grad_norm_(error_if_nonfinite=True)``, mmengine's ``CheckInvalidLossHook``, Keras'
``TerminateOnNaN``, DINOv2's ``NaN detected``, MindSpore's ``LossMonitor``, SpeechBrain's loss check,
pytorch-accelerated's ``TerminateOnNaNCallback``, TensorFlow's ``NanTensorHook``, RecBole's loss check,
SAM 2's trainer, the TF Object Detection API's ``check_numerics``, TensorFlow's summary ops, Composer's
``NaNMonitor``, faceswap's NaN protection, Coqui TTS' and DiffWave's loss checks, deepspeech.pytorch's
and JAX's ``jax_debug_nans``. Each is a ``nonfinite`` event; where the line names the operation or
the parameter, that is the event's ``module``. Such a line has no step of its own: it is given the
step of the next record line, or the one after the last (the training stopped there).

Example:
    >>> match = NONFINITE_LINES[0].pattern.search(
    ...     "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.")
    >>> match.group("module")
    'LogSoftmaxBackward0'
"""

from __future__ import annotations

import re

from sentinel import metrics
from sentinel.analyze.loaders.dialect_types import EventLine
from sentinel.events import EventKind

NONFINITE_LINES: tuple[EventLine, ...] = (
    # torch/csrc/autograd/engine.cpp, in anomaly mode: the backward function whose output was not finite.
    EventLine(re.compile(r"Function '(?P<module>[\w.]+)' returned (?P<value>nan|inf) values in its \d+\w* output"),
              EventKind.NONFINITE, source="anomaly_mode", detail={"phase": "backward"}),
    # DeiT, MAE, BEiT, ConvNeXt, Swin (engine.py): print("Loss is {}, stopping training".format(loss_value));
    # SAM 2's trainer: logging.error(f"Loss is {loss.item()}, attempting to stop training")
    EventLine(re.compile(r"\bLoss is (?P<value>nan|-?inf), (?:attempting to )?stop(?:ping)? training"), EventKind.NONFINITE,
              source="loss_check", detail={"metric": metrics.LOSS}),
    # lightning.pytorch.utilities.finite_checks.detect_nan_parameters: the parameter, by name.
    EventLine(re.compile(r"Detected nan and/or inf values in `(?P<module>[^`\n]+)`"), EventKind.NONFINITE,
              source="lightning", detail={"phase": "parameters"}),
    # torch.nn.utils.clip_grad_norm_(..., error_if_nonfinite=True)
    EventLine(re.compile(r"The total norm of order [-\w.]+ for gradients from `parameters` is non-finite"),
              EventKind.NONFINITE, source="clip_grad_norm", detail={"metric": metrics.GRAD_NORM_TOTAL}),
    # mmengine's CheckInvalidLossHook
    EventLine(re.compile(r"loss become infinite or NaN!"), EventKind.NONFINITE, source="mmengine",
              detail={"metric": metrics.LOSS}),
    # OneTrainer's RuntimeError("Training loss became NaN. ..."), and the scripts that say it so
    EventLine(re.compile(r"(?i:\bloss (?:has )?bec[oa]me (?P<value>nan|inf)\b)"), EventKind.NONFINITE,
              source="loss_check", detail={"metric": metrics.LOSS}),
    # Keras' TerminateOnNaN (its batch counts inside the epoch: not the step)
    EventLine(re.compile(r"\bBatch \d+: Invalid loss, terminating training"), EventKind.NONFINITE,
              source="keras", detail={"metric": metrics.LOSS}),
    # DINOv2 (and the scripts that copied its train loop): logger.info("NaN detected"), then an
    # AssertionError, where the sum of the step's losses is NaN.
    EventLine(re.compile(r"\bNaN detected[^\S\n]*$", re.MULTILINE), EventKind.NONFINITE, source="nan_check",
              detail={"metric": metrics.LOSS}),
    # A script's own check that names where ("NaN detected in gradient of embedding.weight", "NaN detected in
    # parameter embedding.weight after update", "NaN detected in model output"): the module named.
    EventLine(re.compile(r"\bNaN detected in (?:the )?(?:(?:gradients?|grads?) of |parameters? |model )?"
                         r"(?P<module>[\w.]+)"), EventKind.NONFINITE, source="nan_check"),
    # MindSpore's LossMonitor: ValueError("In epoch: E step: S, loss is NAN or INF, training process
    # cannot continue, ..."); SpeechBrain's Brain.check_loss_isfinite: ValueError("Loss is not finite
    # and patience is exhausted. ..."); pytorch-accelerated's TerminateOnNaNCallback, and the scripts
    # that say it so: "Stopping training due to NaN loss ..."; TensorFlow's NanTensorHook (and OpenNMT-tf,
    # and the TF 1 scripts that assert it): "Model diverged with loss = NaN."; RecBole's
    # ValueError("Training loss is nan"); NeMo 0.x's logging.warning(f"WARNING: Loss is NaN or inf {loss}").
    EventLine(re.compile(r"\bloss is NAN or INF, training process cannot continue|\bLoss is NaN or inf\b|"
                         r"\bLoss is not finite and patience is exhausted|(?i:\bstopping training due to nan loss\b)|"
                         r"\bModel diverged with loss = NaN\b|(?i:\btraining loss is nan\b)"),
              EventKind.NONFINITE, source="loss_check", detail={"metric": metrics.LOSS}),
    # OLMo-core's trainer: RuntimeError(f"{ce_loss} loss encountered at step {step}"), at its own step.
    EventLine(re.compile(r"\b(?P<value>nan|inf) loss encountered at step (?P<step>\d+)"), EventKind.NONFINITE,
              source="loss_check", detail={"metric": metrics.LOSS}),
    # TensorFlow's NanTensorHook's error (NanLossDuringTrainingError("NaN loss during training.")), the
    # TF Object Detection API's tf.check_numerics(total_loss, "LossTensor is inf or nan."), Composer's
    # NaNMonitor ("Train loss contains a NaN.", "Train loss {key} contains a NaN.").
    EventLine(re.compile(r"\bNaN loss during training\b|\bLossTensor is inf or nan\b|"
                         r"\bTrain loss (?:\S+ )?contains a NaN\b"),
              EventKind.NONFINITE, source="loss_check", detail={"metric": metrics.LOSS}),
    # Coqui TTS' trainer (" > Detected NaN loss ..."), DiffWave / WaveGrad ("Detected NaN loss at step N."), and
    # the scripts that skip such a batch ("Detected NaN loss. Skipping backward pass.").
    EventLine(re.compile(r"(?i:\bdetected (?P<value>nan|inf) loss\b)(?: at (?:step|iteration) (?P<step>\d+))?"),
              EventKind.NONFINITE, source="loss_check", detail={"metric": metrics.LOSS}),
    # deepspeech.pytorch: print("WARNING: received a nan loss, setting loss value to 0"), then the step's
    # line prints "Loss 0.0000": that 0 is the NaN (textscan reads it so).
    EventLine(re.compile(r"\breceived an? (?P<value>nan|inf) loss, setting loss value to 0\b"), EventKind.NONFINITE,
              source="loss_check", detail={"metric": metrics.LOSS, "zeroed": True}),
    # TensorFlow's summary ops (tf.summary.histogram of a weight, a gradient or an activation):
    # InvalidArgumentError "Nan in summary histogram for: <tensor>", the error TF 1 trainings (the
    # Object Detection API, TF-Slim) die of when their weights went NaN; the tensor is the module.
    EventLine(re.compile(r"\bNan in summary histogram for: (?P<module>[\w./:-]+)"), EventKind.NONFINITE,
              source="tf_summary"),
    # An epoch's total or mean loss printed as non-finite between step lines that print each step's
    # loss finite (PSMNet's "epoch 41 total training loss = nan" after each "Iter 496 training loss =
    # 65.174"): a step's NaN went into the epoch's sum where no step line showed it.
    EventLine(re.compile(r"(?i:\bepoch\b[^\n]{0,80}?\b(?:total|mean|average|avg)\b[^\n:=]{0,40}?\bloss\b"
                         r"[^\S\n]*[:=][^\S\n]*(?P<value>nan|-?inf)\b)"),
              EventKind.NONFINITE, source="epoch_loss", detail={"metric": metrics.LOSS}),
    # faceswap's NaN protection: "CRITICAL NaN Detected. Loss: [0.2126, nan]", then "A NaN was detected and you
    # have NaN protection enabled. Training has been terminated."
    EventLine(re.compile(r"\bNaN Detected\. Loss: \[|\bA NaN was detected and you have NaN protection enabled\b"),
              EventKind.NONFINITE, source="loss_check", detail={"metric": metrics.LOSS}),
    # BTS and the depth models trained with its loop: print('NaN in loss occurred. Aborting training.')
    EventLine(re.compile(r"\bNaN in loss occurred\b"), EventKind.NONFINITE, source="loss_check",
              detail={"metric": metrics.LOSS}),
    # A loss's running average printed beside its value, non-finite where the value is not: the
    # torchvision references' and DETR's / DINO's / DINOv2's / MAE's MetricLogger ("total_loss: 6.7223
    # (inf)": the window's median, then the average since the start), the ImageNet example's
    # ProgressMeter ("Loss 3.2168 (nan)"). A step's loss went non-finite at or before that line and
    # the average stays so for good: its first line alone tells it.
    EventLine(re.compile(r"(?i:(?<![\w/])[\w/]*loss\w*)['\"]?[^\S\n]*[:=]?[^\S\n]*[-+]?\d[\d.]*(?:[eE][-+]?\d+)?"
                         r"[^\S\n]+\((?P<value>nan|-?inf)\)"),
              EventKind.NONFINITE, source="running_average", detail={"metric": metrics.LOSS}, running=True),
    # PySlowFast's misc.check_nan_losses (and the video models trained with it): RuntimeError("ERROR: Got NaN
    # losses {}".format(datetime.now())); NeuralHydrology's trainer: RuntimeError(f"Loss was NaN for {nan_count}
    # times in a row. Stopped training.")
    EventLine(re.compile(r"\bERROR: Got NaN losses\b|\bLoss was NaN for \d+ times in a row\b"), EventKind.NONFINITE,
              source="loss_check", detail={"metric": metrics.LOSS}),
    # DDSP-SVC's solver: raise ValueError(' [x] nan loss ')
    EventLine(re.compile(r"\bValueError:[^\S\n]*\[x\] nan loss\b"), EventKind.NONFINITE, source="loss_check",
              detail={"metric": metrics.LOSS}),
    # OpenFold's AlphaFoldLoss: logging.warning(f"{loss_name} loss is NaN. Skipping..."), the term then
    # set to 0 for that step (the sum goes on finite): the term named.
    EventLine(re.compile(r"\b(?P<module>\w+) loss is (?P<value>NaN|nan|inf)\. Skipping\.\.\."), EventKind.NONFINITE,
              source="loss_term_check", detail={"metric": metrics.LOSS, "zeroed": True}),
    # detectron2's RPN (find_top_rpn_proposals): FloatingPointError("Predicted boxes or scores contain Inf/NaN.
    # Training has diverged."): the forward pass went non-finite before any loss was taken.
    EventLine(re.compile(r"\bPredicted boxes or scores contain Inf/NaN\. Training has diverged\b"), EventKind.NONFINITE,
              source="detectron2", detail={"module": "proposal_generator", "phase": "forward"}),
    # CNTK's SGD, where the criterion went non-finite: "EXCEPTION occurred: The training criterion is not a number
    # (NAN)."
    EventLine(re.compile(r"\bThe training criterion is not a number \(NAN\)"), EventKind.NONFINITE, source="cntk",
              detail={"metric": metrics.LOSS}),
    # JAX with jax_debug_nans: the primitive that made it.
    EventLine(re.compile(r"FloatingPointError: invalid value \((?P<value>nan|inf)\) encountered in (?P<module>[\w.]+)"),
              EventKind.NONFINITE, source="jax_debug_nans"),
)

# Every line above holds a match of this (asked of the text's distinct lines first).
WORDS = (re.compile(r"returned (?:nan|inf) values|Loss is (?:nan|-?inf)|Detected nan and/or inf|for gradients from "
                    r"`parameters` is non-finite|loss become infinite|Invalid loss, terminating|invalid value \(|NaN detected|"
                    r"(?i:loss (?:has )?bec[oa]me (?:nan|inf)\b)|loss is NAN or INF|Loss is not finite and|"
                    r"(?i:stopping training due to nan loss)|Model diverged with loss = NaN|(?i:training loss is nan)|(?:nan|inf) loss encountered at|"
                    r"NaN loss during training|LossTensor is inf or nan|Loss is NaN or inf|"
                    r"contains a NaN|(?i:detected (?:nan|inf) loss)|"
                    r"received an? (?:nan|inf) loss|Nan in summary histogram for|NaN in loss occurred|"
                    r"NaN Detected\. Loss|loss is (?:NaN|nan|inf)\. Skipping\.\.\.|Got NaN losses|Loss was NaN for|"
                    r"\[x\] nan loss|contain Inf/NaN\. Training has diverged|criterion is not a number \(NAN\)|"
                    r"A NaN was detected and you have NaN protection|\d[^\S\n]+\((?:nan|-?inf)\)|"
                    r"(?i:\bepoch\b[^\n]{0,80}?\b(?:total|mean|average|avg)\b[^\n:=]{0,40}?\bloss\b[^\S\n]*[:=][^\S\n]*-?(?:nan|inf)\b)"),)
