"""Does the guard harm a healthy run? Withheld updates, rollbacks and give-ups on unusual healthy training.

The promise under test: the guard never harms a healthy run. Each scenario below is a healthy
run that looks unusual to a loss-spike detector (a loss below zero or at 1e-15, heavy-tailed
batches, a loss that is reweighted, gets a new term or moves to harder data on purpose, an RL
loss whose scale and sign wander, fp16 AMP, gradient accumulation). Each is trained twice from
the same seed, in the same process: once plainly, once in the README's raw loop under
``Sentinel(model, opt, scheduler=..., log_dir=..., loss_fn=...)`` at its default settings
(``scaler=`` for fp16; ``add_loss``/``check()`` under accumulation)::

    for batch in sen.batches(loader):
        opt.zero_grad(); loss = loss_fn(model, batch); loss.backward()
        if sen.check(loss):
            opt.step()
        sched.step(); sen.end_step()

From the guarded run's ``events.jsonl`` it counts the withheld updates (``skip_step``) and their
longest run of consecutive steps, rollbacks, give-ups (a ``gave_up`` event or
``sentinel.TrainingGaveUp``: the run stops there and its restored weights are evaluated),
``new_level`` events, accepted divergences (``divergence`` with ``accepted: true``) and dropped
batches (``skip``), and it evaluates a held-out metric (lower is better, never negative: an MSE,
a cross-entropy, a KL divergence, a regret) on both runs and prints guarded / unguarded. While
the guard changes nothing the two runs are the same computation and the ratio is exactly 1.

Harm, counted in the summary line: a give-up, a rollback, more than 1% of the steps withheld, or
a final metric more than 10% worse than the unguarded run's (ratio above 1.10). The scenarios are
healthy by construction, so the target is no harm anywhere. ``overfit16`` is the exception to
read with care: its metric is the training MSE at float32's floor (~1e-15), where any change to
the trajectory moves the ratio by orders of magnitude in either direction.

Run:
    .venv/bin/python benchmarks/guard_healthy.py                    # all, seeds 0 and 1: ~3 min on 2 cores
    .venv/bin/python benchmarks/guard_healthy.py --scenarios curriculum,two_domains --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

import sentinel

HARM_WITHHELD = 0.01  # more than 1% of the steps withheld
HARM_RATIO = 1.10  # a final metric more than 10% worse


@dataclass
class Setup:
    """One scenario, built fresh for a seed: what a training script would hold."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    batches: Iterable[Any]  # one epoch, re-iterable (a list or a DataLoader)
    loss_fn: Callable[[nn.Module, Any], torch.Tensor]  # a batch's (micro-batch's) mean loss
    evaluate: Callable[[nn.Module], float]  # held-out metric, >= 0, lower is better
    scheduler: Any = None
    epochs: int = 1
    on_step: Callable[[int], None] | None = None  # the script's own schedule, before step n
    scaler: torch.amp.GradScaler | None = None  # fp16 AMP
    accumulate: int = 1  # micro-batches per optimizer step


# ------------------------------------------------------------------ shared pieces
def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, o))


def _mse(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


def _ce(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _student_t2(n: int, g: torch.Generator) -> torch.Tensor:
    """|t| with 2 degrees of freedom, clamped at 30: z / sqrt(chi2_2 / 2), chi2_2 = -2 log u."""
    z = torch.randn(n, 1, generator=g)
    u = torch.rand(n, 1, generator=g).clamp_min(1e-12)
    return (z / (-u.log()).sqrt()).abs().clamp(max=30.0)


def _gaussian_nll(seed: int, offset: int, sd: float, bs: int, steps: int = 1500) -> Setup:
    """Heteroscedastic regression: the net predicts a mean and a log-variance. The metric is
    the KL divergence from the true conditional N(f(x), sd^2) to the predicted one (the excess NLL)."""
    g = torch.Generator().manual_seed(seed + offset)
    w = torch.randn(4, 1, generator=g)

    def data(n):
        x = torch.randn(n, 4, generator=g)
        return x, x @ w * 0.5 + sd * torch.randn(n, 1, generator=g)

    batches = [data(bs) for _ in range(steps)]
    xe = torch.randn(4096, 4, generator=g)

    def nll(m, batch):
        x, y = batch
        out = m(x)
        mu, logvar = out[:, :1], out[:, 1:]
        return (0.5 * (logvar + (y - mu) ** 2 / logvar.exp())).mean()

    def kl(m):
        out = m(xe)
        mu, logvar = out[:, :1], out[:, 1:]
        var = sd ** 2
        return (0.5 * (logvar - math.log(var) + (var + (xe @ w * 0.5 - mu) ** 2) / logvar.exp() - 1)).mean().item()

    model = _mlp(4, 64, 2)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, nll, kl)


# ------------------------------------------------------------------ scenarios
def gauss_nll(seed: int) -> Setup:
    """Gaussian NLL with target noise 0.1: the loss falls well below zero (to about -1.8)."""
    return _gaussian_nll(seed, 400, sd=0.1, bs=32)


def nll_near_zero(seed: int) -> Setup:
    """Gaussian NLL that converges just below zero (noise 0.55, batch 16): batches cross zero."""
    return _gaussian_nll(seed, 900, sd=0.55, bs=16)


def overfit16(seed: int, epochs: int = 1500) -> Setup:
    """Memorise 16 random points, full batch, Adam: the loss falls to ~1e-15 (float32's floor)."""
    g = torch.Generator().manual_seed(seed + 500)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    model = _mlp(4, 128, 1)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), loader, _mse,
                 lambda m: F.mse_loss(m(x), y).item(), epochs=epochs)


def heavy_tail_bs2(seed: int, steps: int = 2000) -> Setup:
    """Batch size 2, target noise scaled by |Student-t(2)|: most batches tiny, some huge."""
    g = torch.Generator().manual_seed(seed + 600)
    w = torch.randn(8, 1, generator=g)

    def data(n):
        x = torch.randn(n, 8, generator=g)
        return x, torch.tanh(x @ w) + 0.3 * _student_t2(n, g) * torch.randn(n, 1, generator=g)

    batches = [data(2) for _ in range(steps)]
    xe = torch.randn(4096, 8, generator=g)
    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, _mse,
                 lambda m: F.mse_loss(m(xe), torch.tanh(xe @ w)).item())


def label_noise(seed: int, steps: int = 2000) -> Setup:
    """5-class classification, batch 8, 30% of the training labels replaced at random."""
    g = torch.Generator().manual_seed(seed + 700)
    centres = torch.randn(5, 10, generator=g) * 2.0

    def data(n, noisy=True):
        y = torch.randint(0, 5, (n,), generator=g)
        x = centres[y] + torch.randn(n, 10, generator=g)
        if noisy:
            y = torch.where(torch.rand(n, generator=g) < 0.3, torch.randint(0, 5, (n,), generator=g), y)
        return x, y

    batches = [data(8) for _ in range(steps)]
    xe, ye = data(4096, noisy=False)
    model = _mlp(10, 64, 5)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=2e-3), batches, _ce,
                 lambda m: F.cross_entropy(m(xe), ye).item())


class _Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.f = _mlp(16, 64, 16)
        self.logit_scale = nn.Parameter(torch.tensor(0.0))  # learnable temperature, as CLIP


def infonce_temp(seed: int, steps: int = 1500) -> Setup:
    """Contrastive InfoNCE over two noisy views, batch 32, with a learnable temperature."""
    g = torch.Generator().manual_seed(seed + 800)
    proj = torch.randn(16, 16, generator=g)

    def data(n):
        z = torch.randn(n, 16, generator=g)
        return (z + 0.3 * torch.randn(n, 16, generator=g)) @ proj, (z + 0.3 * torch.randn(n, 16, generator=g)) @ proj

    batches = [data(32) for _ in range(steps)]
    held_out = data(512)

    def infonce(m, batch):
        a, p = batch
        za, zp = F.normalize(m.f(a), dim=1), F.normalize(m.f(p), dim=1)
        logits = za @ zp.T * m.logit_scale.exp().clamp(max=100)  # (B, B)
        return F.cross_entropy(logits, torch.arange(len(a)))

    model = _Encoder()
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, infonce,
                 lambda m: infonce(m, held_out).item())


def sgdr(seed: int, steps: int = 2000) -> Setup:
    """Cosine annealing with warm restarts every 250 steps, Adam at 1e-2: the loss gets low
    within a cycle and jumps at each restart."""
    g = torch.Generator().manual_seed(seed + 1500)
    w = torch.randn(8, 1, generator=g)

    def data(n):
        x = torch.randn(n, 8, generator=g)
        return x, torch.tanh(x @ w) + 0.02 * torch.randn(n, 1, generator=g)

    batches = [data(32) for _ in range(steps)]
    xe = torch.randn(4096, 8, generator=g)
    model = _mlp(8, 64, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=250, eta_min=1e-5)
    return Setup(model, opt, batches, _mse, lambda m: F.mse_loss(m(xe), torch.tanh(xe @ w)).item(),
                 scheduler=sched)


def warmup_high_loss(seed: int, steps: int = 1200) -> Setup:
    """A badly scaled output layer (weights x30, bias 20) starts the loss in the hundreds; the
    learning rate warms up linearly over 200 steps."""
    g = torch.Generator().manual_seed(seed + 1400)
    w = torch.randn(8, 1, generator=g)

    def data(n):
        x = torch.randn(n, 8, generator=g)
        return x, x @ w + 0.1 * torch.randn(n, 1, generator=g)

    batches = [data(32) for _ in range(steps)]
    xe = torch.randn(4096, 8, generator=g)
    model = _mlp(8, 64, 1)
    with torch.no_grad():
        model[-1].weight.mul_(30.0)
        model[-1].bias.fill_(20.0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 200))
    return Setup(model, opt, batches, _mse, lambda m: F.mse_loss(m(xe), xe @ w).item(), scheduler=sched)


def loss_weight10(seed: int, steps: int = 1200, switch: int = 500) -> Setup:
    """The script multiplies its loss by 10 at step 500 (and keeps it)."""
    g = torch.Generator().manual_seed(seed + 300)
    w = torch.randn(8, 1, generator=g)

    def data(n):
        x = torch.randn(n, 8, generator=g)
        return x, torch.tanh(x @ w) + 0.3 * torch.randn(n, 1, generator=g)

    batches = [data(32) for _ in range(steps)]
    xe = torch.randn(4096, 8, generator=g)
    weight = [1.0]

    def on_step(step):
        weight[0] = 10.0 if step >= switch else 1.0

    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches,
                 lambda m, b: weight[0] * _mse(m, b), lambda m: F.mse_loss(m(xe), torch.tanh(xe @ w)).item(),
                 on_step=on_step)


def aux_term_on(seed: int, steps: int = 1200, switch: int = 500) -> Setup:
    """Classification plus an auxiliary regression head whose MSE term is switched on at step 500."""
    g = torch.Generator().manual_seed(seed + 2700)
    centres = torch.randn(5, 10, generator=g) * 1.5
    a = torch.randn(10, 3, generator=g)

    def data(n):
        y = torch.randint(0, 5, (n,), generator=g)
        x = centres[y] + torch.randn(n, 10, generator=g)
        return x, y, x @ a + 0.5 * torch.randn(n, 3, generator=g)

    batches = [data(32) for _ in range(steps)]
    held_out = data(4096)
    aux = [0.0]

    def total(m, batch, weight):
        x, y, z = batch
        out = m(x)
        return F.cross_entropy(out[:, :5], y) + weight * F.mse_loss(out[:, 5:], z)

    def on_step(step):
        aux[0] = 1.0 if step >= switch else 0.0

    model = _mlp(10, 64, 8)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches,
                 lambda m, b: total(m, b, aux[0]), lambda m: total(m, held_out, 1.0).item(), on_step=on_step)


def curriculum(seed: int, steps: int = 1500, switch: int = 600) -> Setup:
    """A data curriculum: from step 600 the batches come from a harder stage, and stay there."""
    g = torch.Generator().manual_seed(seed + 100)
    w = torch.randn(8, 1, generator=g)

    def easy(n):
        x = torch.randn(n, 8, generator=g)
        return x, x @ w * 0.3 + 0.05 * torch.randn(n, 1, generator=g)

    def hard(n):
        x = torch.randn(n, 8, generator=g)
        return x, x @ w * 0.3 + torch.sin(3 * x[:, :1]) * x[:, 1:2] + 0.5 * torch.randn(n, 1, generator=g)

    batches = [easy(32) if s < switch else hard(32) for s in range(steps)]
    xe = torch.randn(4096, 8, generator=g)
    ye = xe @ w * 0.3 + torch.sin(3 * xe[:, :1]) * xe[:, 1:2]
    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, _mse,
                 lambda m: F.mse_loss(m(xe), ye).item())


def domain_shift(seed: int, steps: int = 1600, switch: int = 500) -> Setup:
    """Pre-train on domain A, then from step 500 train on a different domain B in the same loop."""
    g = torch.Generator().manual_seed(seed + 3200)
    w, v = torch.randn(8, 1, generator=g), torch.randn(8, 1, generator=g)

    def domain_a(n):
        x = torch.randn(n, 8, generator=g)
        return x, torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)

    def domain_b(n):
        x = torch.randn(n, 8, generator=g)
        return x, 2 * torch.sin(x @ v) + 0.5 * torch.randn(n, 1, generator=g)

    batches = [domain_a(32) if s < switch else domain_b(32) for s in range(steps)]
    xe = torch.randn(4096, 8, generator=g)
    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, _mse,
                 lambda m: F.mse_loss(m(xe), 2 * torch.sin(xe @ v)).item())


def two_domains(seed: int, steps: int = 2000, every: int = 10) -> Setup:
    """Every 10th batch comes from a harder, shifted domain (a recurring part of the data mix)."""
    g = torch.Generator().manual_seed(seed + 200)
    w, v = torch.randn(8, 1, generator=g), torch.randn(8, 1, generator=g)

    def easy(n, noise=0.05):
        x = torch.randn(n, 8, generator=g)
        return x, x @ w * 0.3 + noise * torch.randn(n, 1, generator=g)

    def hard(n, noise=0.3):
        x = torch.randn(n, 8, generator=g) + 2.0
        return x, x @ v + torch.sin(2 * x[:, :1]) * 2 + noise * torch.randn(n, 1, generator=g)

    batches = [hard(32) if s % every == every - 1 else easy(32) for s in range(steps)]
    (xe, ye), (xh, yh) = easy(4096, 0.0), hard(4096, 0.0)
    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, _mse,
                 lambda m: 0.9 * F.mse_loss(m(xe), ye).item() + 0.1 * F.mse_loss(m(xh), yh).item())


def rare_hard(seed: int, steps: int = 2000, p: float = 0.01) -> Setup:
    """1% of the samples come from a shifted region with a different target, batch 32."""
    g = torch.Generator().manual_seed(seed + 1000)
    w, v = torch.randn(8, 1, generator=g), torch.randn(8, 1, generator=g)

    def data(n, noise=0.1):
        hard = (torch.rand(n, 1, generator=g) < p).float()
        x = torch.randn(n, 8, generator=g) + hard * 3.0
        y = (1 - hard) * torch.tanh(x @ w) + hard * (x @ v) + noise * torch.randn(n, 1, generator=g)
        return x, y

    batches = [data(32) for _ in range(steps)]
    xe, ye = data(8192, noise=0.0)
    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, _mse,
                 lambda m: F.mse_loss(m(xe), ye).item())


def dqn_target(seed: int, steps: int = 2000, sync: int = 200, states: int = 32, actions: int = 4,
               gamma: float = 0.9) -> Setup:
    """Fitted Q-learning (Huber TD loss) with a target network synced every 200 steps: the
    targets, and so the loss, move at every sync. The metric is the MSE to the true Q."""
    g = torch.Generator().manual_seed(seed + 3300)
    nxt = torch.randint(0, states, (states, actions), generator=g)  # deterministic transitions
    reward = torch.randn(states, actions, generator=g)
    feats = torch.randn(states, 16, generator=g)

    def data(n):
        s = torch.randint(0, states, (n,), generator=g)
        a = torch.randint(0, actions, (n,), generator=g)
        return s, a, reward[s, a] + 0.1 * torch.randn(n, generator=g), nxt[s, a]

    batches = [data(32) for _ in range(steps)]
    q_true = torch.zeros(states, actions)
    for _ in range(500):  # value iteration
        q_true = reward + gamma * q_true[nxt].max(-1).values
    model = _mlp(16, 64, actions)
    target = copy.deepcopy(model)

    def td_loss(m, batch):
        s, a, r, s2 = batch
        q = m(feats[s]).gather(1, a[:, None]).squeeze(1)
        with torch.no_grad():
            y = r + gamma * target(feats[s2]).max(1).values
        return F.smooth_l1_loss(q, y)

    def on_step(step):
        if step > 0 and step % sync == 0:
            target.load_state_dict(model.state_dict())

    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), batches, td_loss,
                 lambda m: F.mse_loss(m(feats), q_true).item(), on_step=on_step)


def reinforce_baseline(seed: int, steps: int = 2000, bs: int = 16) -> Setup:
    """REINFORCE on a contextual bandit, advantage = reward - batch mean: the loss sits around
    zero with both signs. The metric is the regret (best expected reward - the policy's)."""
    g = torch.Generator().manual_seed(seed + 2300)
    payoff = torch.randn(8, 4, generator=g)
    batches = [(torch.randn(bs, 8, generator=g), torch.randn(bs, generator=g), torch.tensor(i))
               for i in range(steps)]
    ce = torch.randn(4096, 8, generator=g)

    def pg_loss(m, batch):
        c, noise, idx = batch
        logits = m(c)
        pick = torch.Generator().manual_seed(int(idx))  # the same actions when a batch is re-run
        a = torch.multinomial(logits.softmax(-1).detach(), 1, generator=pick).squeeze(1)
        r = (c @ payoff).gather(1, a[:, None]).squeeze(1) + 0.5 * noise
        return -(logits.log_softmax(-1).gather(1, a[:, None]).squeeze(1) * (r - r.mean())).mean()

    def regret(m):
        r = ce @ payoff
        return (r.max(1).values - (m(ce).softmax(-1) * r).sum(1)).mean().item()

    model = _mlp(8, 64, 4)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), batches, pg_loss, regret)


class _VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc, self.dec = _mlp(32, 64, 8), _mlp(4, 64, 32)


def vae_kl_anneal(seed: int, steps: int = 1500) -> Setup:
    """A VAE (Bernoulli decoder) whose KL weight is annealed from 0 to 1 over steps 300-800."""
    g = torch.Generator().manual_seed(seed + 2100)
    protos = (torch.rand(8, 32, generator=g) > 0.5).float()

    def data(n):
        k = torch.randint(0, 8, (n,), generator=g)
        return (protos[k] + (torch.rand(n, 32, generator=g) < 0.05).float()) % 2

    batches = [data(32) for _ in range(steps)]
    xe = data(2048)
    eps_e = torch.randn(2048, 4, generator=g)  # fixed noise: the held-out ELBO is deterministic
    beta = [0.0]

    def neg_elbo(m, x, b, eps=None):
        h = m.enc(x)
        mu, logvar = h[:, :4], h[:, 4:]
        z = mu + (torch.randn_like(mu) if eps is None else eps) * (0.5 * logvar).exp()
        rec = F.binary_cross_entropy_with_logits(m.dec(z), x, reduction="none").sum(1)
        kl = 0.5 * (mu ** 2 + logvar.exp() - 1 - logvar).sum(1)
        return (rec + b * kl).mean()

    def on_step(step):
        beta[0] = min(1.0, max(0.0, (step - 300) / 500))

    model = _VAE()
    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), batches,
                 lambda m, x: neg_elbo(m, x, beta[0]), lambda m: neg_elbo(m, xe, 1.0, eps_e).item(),
                 on_step=on_step)


def amp_fp16(seed: int, steps: int = 1500) -> Setup | str:
    """fp16 autocast on CPU with ``GradScaler("cpu")``; growth every 50 steps, so the scale
    climbs into overflow and backs off again during the run, as a GradScaler does."""
    reason = _cpu_fp16_unavailable()
    if reason:
        return reason
    g = torch.Generator().manual_seed(seed + 2500)
    centres = torch.randn(10, 20, generator=g)

    def data(n):
        y = torch.randint(0, 10, (n,), generator=g)
        return centres[y] + torch.randn(n, 20, generator=g), y

    batches = [data(32) for _ in range(steps)]
    xe, ye = data(4096)

    def loss_fn(m, batch):
        x, y = batch
        with torch.autocast("cpu", dtype=torch.float16):
            out = m(x)
        return F.cross_entropy(out.float(), y)

    model = _mlp(20, 128, 10)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batches, loss_fn,
                 lambda m: F.cross_entropy(m(xe), ye).item(),
                 scaler=torch.amp.GradScaler("cpu", growth_interval=50))


def grad_accum(seed: int, steps: int = 800, micro: int = 4) -> Setup:
    """Gradient accumulation over 4 micro-batches of 8 heavy-tailed samples, linear warm-up."""
    g = torch.Generator().manual_seed(seed + 2600)
    w = torch.randn(8, 1, generator=g)

    def data(n):
        x = torch.randn(n, 8, generator=g)
        return x, torch.tanh(x @ w) + 0.3 * _student_t2(n, g) * torch.randn(n, 1, generator=g)

    batches = [data(8) for _ in range(steps * micro)]
    xe = torch.randn(4096, 8, generator=g)
    model = _mlp(8, 64, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    return Setup(model, opt, batches, _mse, lambda m: F.mse_loss(m(xe), torch.tanh(xe @ w)).item(),
                 scheduler=sched, accumulate=micro)


def ragged_last_batch(seed: int, epochs: int = 40) -> Setup:
    """The README's fixed-order DataLoader for 40 epochs; each epoch's last batch holds 1 sample."""
    g = torch.Generator().manual_seed(seed + 3500)
    x, w = torch.randn(17 * 32 + 1, 8, generator=g), torch.randn(8, 1, generator=g)
    y = torch.tanh(x @ w) + 0.5 * torch.randn(len(x), 1, generator=g)
    xe = torch.randn(4096, 8, generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    model = _mlp(8, 64, 1)
    return Setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3), loader, _mse,
                 lambda m: F.mse_loss(m(xe), torch.tanh(xe @ w)).item(), epochs=epochs)


SCENARIOS: dict[str, Callable[[int], Setup | str]] = {f.__name__: f for f in (
    gauss_nll, nll_near_zero, overfit16, heavy_tail_bs2, label_noise, infonce_temp, sgdr,
    warmup_high_loss, loss_weight10, aux_term_on, curriculum, domain_shift, two_domains, rare_hard,
    dqn_target, reinforce_baseline, vae_kl_anneal, amp_fp16, grad_accum, ragged_last_batch)}


def _cpu_fp16_unavailable() -> str | None:
    """Why fp16 autocast with a CPU GradScaler cannot run here, or None when it can."""
    try:
        torch.amp.GradScaler("cpu")
        with torch.autocast("cpu", dtype=torch.float16):
            torch.ones(2, 2) @ torch.ones(2, 2)
    except (RuntimeError, TypeError, ValueError) as err:
        return f"skipped: fp16 autocast with GradScaler('cpu') fails on this torch ({err})"
    return None


# ------------------------------------------------------------------ one run
@dataclass
class Outcome:
    steps: int
    metric: float
    gave_up: int | None = None  # the step of TrainingGaveUp


def train(s: Setup, log_dir: Path | None) -> Outcome:
    """The README's raw loop, under ``Sentinel`` at its defaults when ``log_dir`` is given."""
    sen = None
    if log_dir is not None:
        sen = sentinel.Sentinel(s.model, s.optimizer, scheduler=s.scheduler, scaler=s.scaler,
                                log_dir=str(log_dir), loss_fn=s.loss_fn)
    step, gave_up = 0, None
    try:
        for _ in range(s.epochs):
            for i, batch in enumerate(sen.batches(s.batches) if sen else s.batches):
                if i % s.accumulate == 0:
                    if s.on_step is not None:
                        s.on_step(step)
                    s.optimizer.zero_grad()
                loss = s.loss_fn(s.model, batch) / s.accumulate
                (s.scaler.scale(loss) if s.scaler else loss).backward()
                if sen and s.accumulate > 1:
                    sen.add_loss(loss)
                if (i + 1) % s.accumulate:
                    continue
                if s.scaler:
                    s.scaler.unscale_(s.optimizer)
                if sen is None or sen.check(loss if s.accumulate == 1 else None):
                    s.scaler.step(s.optimizer) if s.scaler else s.optimizer.step()
                if s.scaler:
                    s.scaler.update()
                if s.scheduler is not None:
                    s.scheduler.step()
                if sen:
                    sen.end_step()
                step += 1
    except sentinel.TrainingGaveUp:
        gave_up = step  # the guard restored its last good snapshot: evaluate that
    finally:
        if sen:
            sen.close()
    with torch.no_grad():
        return Outcome(step, s.evaluate(s.model), gave_up)


def count_events(log_dir: Path) -> dict[str, int]:
    """What the guard did, from the run directory's ``events.jsonl``."""
    c = dict.fromkeys(("withheld", "streak", "rollbacks", "gave_up", "new_level", "accepted", "dropped"), 0)
    run, last = 0, None
    with open(log_dir / "events.jsonl") as f:
        for event in map(json.loads, filter(str.strip, f)):
            kind = event["kind"]
            if kind == "skip_step":
                c["withheld"] += 1
                run = run + 1 if last == event["step"] - 1 else 1
                last = event["step"]
                c["streak"] = max(c["streak"], run)
            elif kind == "rollback":
                c["rollbacks"] += 1
            elif kind == "gave_up":
                c["gave_up"] += 1
            elif kind == "new_level":
                c["new_level"] += 1
            elif kind == "divergence" and event.get("accepted"):
                c["accepted"] += 1
            elif kind == "skip":
                c["dropped"] += 1
    return c


def compare(name: str, seed: int, tmp: Path) -> dict[str, Any]:
    """Train ``name`` unguarded, then guarded, from ``seed``; one table row's figures."""
    torch.manual_seed(seed)
    plain_setup = SCENARIOS[name](seed)
    if isinstance(plain_setup, str):
        return {"name": name, "seed": seed, "note": plain_setup}
    plain = train(plain_setup, None)
    torch.manual_seed(seed)
    log_dir = tmp / f"{name}_s{seed}"
    guarded = train(SCENARIOS[name](seed), log_dir)
    counts = count_events(log_dir)
    ratio = guarded.metric / plain.metric if plain.metric > 0 else (1.0 if guarded.metric == 0 else math.inf)
    return {"name": name, "seed": seed, "steps": guarded.steps, "plain_steps": plain.steps,
            "gave_up_at": guarded.gave_up, "plain": plain.metric, "guarded": guarded.metric,
            "ratio": ratio, **counts}


def harms(r: dict[str, Any]) -> dict[str, bool]:
    """Which of the four harms a row shows."""
    return {"rollback": r["rollbacks"] > 0,
            "give-up": r["gave_up"] > 0 or r["gave_up_at"] is not None,
            "withheld": r["withheld"] > HARM_WITHHELD * max(r["steps"], 1),
            "ratio": not r["ratio"] <= HARM_RATIO}  # NaN counts as harm


def _row(r: dict[str, Any]) -> str:
    if "note" in r:
        return f"| {r['name']} | {r['seed']} | {r['note']} |" + " |" * 10
    gave = "no"
    if r["gave_up_at"] is not None or r["gave_up"]:
        gave = f"at step {r['gave_up_at']}" if r["gave_up_at"] is not None else "yes"
    steps = f"{r['steps']}" if r["steps"] == r["plain_steps"] else f"{r['steps']} (of {r['plain_steps']})"
    share = 100 * r["withheld"] / max(r["steps"], 1)
    return (f"| {r['name']} | {r['seed']} | {steps} | {r['withheld']} ({share:.1f}%) | {r['streak']} | "
            f"{r['rollbacks']} | {gave} | {r['new_level']} | {r['accepted']} | {r['dropped']} | "
            f"{r['plain']:.4g} | {r['guarded']:.4g} | {r['ratio']:.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated, from: {', '.join(SCENARIOS)}")
    parser.add_argument("--seeds", default="0,1", help="comma-separated integers")
    parser.add_argument("--verbose", action="store_true", help="show sentinel's warnings (stderr)")
    args = parser.parse_args(argv)
    names = [n for n in args.scenarios.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(map(repr, unknown))}: choose from {', '.join(SCENARIOS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        parser.error(f"--seeds {args.seeds!r} is not a comma-separated list of integers")
    torch.set_num_threads(1)
    if not args.verbose:
        logging.getLogger("sentinel").setLevel(logging.ERROR)  # every answer is in events.jsonl

    t0 = time.perf_counter()
    rows = []
    out = sys.stdout
    out.write("| scenario | seed | steps | withheld | longest | rollbacks | give-up | new_level | "
              "accepted div. | dropped | final unguarded | final guarded | ratio |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    with tempfile.TemporaryDirectory(prefix="guard_healthy_") as tmp:
        for name in names:
            for seed in seeds:
                r = compare(name, seed, Path(tmp))
                rows.append(r)
                out.write(_row(r) + "\n")
                out.flush()
    runs = [r for r in rows if "note" not in r]
    flags = [harms(r) for r in runs]
    harmed = sum(any(f.values()) for f in flags)
    out.write(f"\n{len(runs)} runs ({len(rows) - len(runs)} skipped): {sum(f['rollback'] for f in flags)} "
              f"with a rollback, {sum(f['give-up'] for f in flags)} with a give-up, "
              f"{sum(f['withheld'] for f in flags)} with more than 1% withheld, "
              f"{sum(f['ratio'] for f in flags)} with a ratio above {HARM_RATIO:.2f}; "
              f"{harmed} harmed in any way ({time.perf_counter() - t0:.0f} s)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
