"""Training logs that name the epoch, the step and the loss in other languages."""

from __future__ import annotations

import pytest

from sentinel.analyze.discover import discover_runs


@pytest.mark.parametrize("line, unit", [
    ("====> エポック {k}/10, 平均損失: {loss}", "epoch"),  # a Japanese tutorial's VAE
    ("    Эпоха [{k}/10], Train Loss: {loss}, Val Accuracy: 0.6483", "epoch"),
    ("Epoche {k}/10, Verlust: {loss}", "epoch"),
    ("반복 {k}0 || 손실: {loss} || 10iter: 12.1 sec.", "step"),  # a Korean SSD book's trainer
    ("Época {k}/10 - pérdida: {loss}", "epoch"),
])
def test_the_words_of_other_languages_are_read(tmp_path, line, unit):
    """Each was refused ("not a log format sentinel reads"), --step-col unable to name the step."""
    lines = [line.format(k=k, loss=f"{3.2 / k:.4f}") for k in range(1, 11)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(["Verlustfunktion und Optimierer definiert.", *lines]) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert len(run.steps) == 10 and run.steps["loss"].iloc[-1] == pytest.approx(0.32)
    assert run.meta.get("step_unit", "step") == unit


def test_a_word_inside_another_is_left(tmp_path):
    """German's "Verlustfunktion" (loss function) holds "Verlust": no loss key of its own."""
    from sentinel.analyze.loaders.log_words import in_english

    assert in_english("Verlustfunktion: MSE, Lernrate=0.001\n")[0] == "Verlustfunktion: MSE, Lernrate=0.001\n"
