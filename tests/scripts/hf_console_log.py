"""A plain Hugging Face ``Trainer.train()`` (no sentinel) whose console output is the log under
test: the progress bar on stderr, the log dicts on stdout, as a terminal or ``nohup`` shows them.

Usage: python -u hf_console_log.py OUT_DIR LOGGING_STEPS [--eval]  (a batch of random tokens at step 30)
"""

import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

VOCAB, SEQ, BATCH, STEPS, BAD_STEP = 64, 16, 8, 60, 30


class Counting(torch.utils.data.Dataset):
    def __init__(self, n: int, corrupt=range(0)) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = (torch.randint(0, VOCAB, (n, 1), generator=g) + torch.arange(SEQ)) % VOCAB
        for i in corrupt:
            self.x[i] = torch.randint(0, VOCAB, (SEQ,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.x[i], "labels": self.x[i]}


class InOrder(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        return torch.utils.data.SequentialSampler(self.train_dataset)


def main() -> None:
    out, evaluate = sys.argv[1], "--eval" in sys.argv
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2))
    # Steps are 1-based: step BAD_STEP trains on batch BAD_STEP - 1.
    bad = range((BAD_STEP - 1) * BATCH, BAD_STEP * BATCH)
    args = TrainingArguments(output_dir=out, use_cpu=True, max_steps=STEPS, per_device_train_batch_size=BATCH,
                             learning_rate=3e-3, lr_scheduler_type="constant", logging_steps=int(sys.argv[2]), report_to=[],
                             save_strategy="no", seed=0, dataloader_num_workers=0,
                             eval_strategy="steps" if evaluate else "no", eval_steps=20,
                             per_device_eval_batch_size=BATCH)
    trainer = InOrder(model=model, args=args, train_dataset=Counting(STEPS * BATCH, bad),
                      eval_dataset=Counting(4 * BATCH) if evaluate else None)
    trainer.train()


if __name__ == "__main__":
    main()
