"""A Hugging Face Trainer run in 2 processes (torchrun, gloo on CPU) with a poisoned batch on rank 1.

Usage: python -m torch.distributed.run --nproc_per_node 2 hf_ddp_run.py OUT_DIR
Each rank saves its final weights to OUT_DIR/weights_rank<r>.pt.
"""

import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from sentinel.callbacks import SentinelTrainerCallback

VOCAB, SEQ, B, STEPS, BAD_STEP = 64, 16, 8, 100, 80


class Data(torch.utils.data.Dataset):
    """Sequences counting up; the batch rank 1 trains on at step BAD_STEP counts down instead.

    With in-order batches accelerate gives rank r the batches r, r + 2, ...: rank 1's batch of
    step s is batch 2 * s + 1.
    """

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        n = 2 * B * STEPS
        self.x = (torch.randint(0, VOCAB, (n, 1), generator=g) + torch.arange(SEQ)) % VOCAB
        bad = (2 * BAD_STEP + 1) * B
        self.x[bad:bad + B] = self.x[bad:bad + B].flip(1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


class InOrderTrainer(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        return torch.utils.data.SequentialSampler(self.train_dataset)


def main(out: str) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                       bos_token_id=0, eos_token_id=0))
    args = TrainingArguments(output_dir=f"{out}/out", use_cpu=True, max_steps=STEPS, per_device_train_batch_size=B,
                             learning_rate=3e-3, lr_scheduler_type="constant", logging_steps=10, report_to=[],
                             save_strategy="no", disable_tqdm=True, seed=0, ddp_backend="gloo")
    trainer = InOrderTrainer(model=model, args=args, train_dataset=Data(),
                             callbacks=[SentinelTrainerCallback(log_dir=f"{out}/run", tensorboard=False)])
    trainer.train()
    torch.save({k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
               f"{out}/weights_rank{args.process_index}.pt")
    torch.distributed.barrier()  # both ranks' results on disk before either leaves
    # As in ddp_run.py: no gloo teardown at interpreter exit, which aborted now and then under load.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
