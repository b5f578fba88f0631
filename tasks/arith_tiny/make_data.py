"""Deterministic generator for the `arith_tiny` task: fixed-width addition, answer digits reversed.

Prompt:  "012+345="   (both operands zero-padded to WIDTH digits)
Target:  "7530"       (the sum zero-padded to WIDTH+1 digits, written least-significant digit first)
Answer:  "357"        (canonical integer; the verifier reverses the completion and compares ints)

Every prompt has the same length and every target the same length, so batches need no padding
and a generation budget of len(target)+1 new tokens (digits + EOS) is always enough.

Difficulty is a fixed mixture: each operand independently has 1..WIDTH digits (uniform), so
problems range from "003+005=" to full-width ones with carry chains. `level` is "d<k>" where k is
the digit count of the longer operand; `carries` is the number of carry operations.

Pairs (a, b) are unique across all splits, drawn eval -> train -> sft -> eval_extra. Only 100 single-digit
pairs exist, so eval gets 44 of them, train the remaining 56 and sft none, and the realised mixes differ:
d1/d2/d3 = 44/165/291 (eval), 56/4340/15604 (train), 0/2355/17645 (sft). The shipped checkpoint and
every measurement were made on exactly these files.

eval_large.jsonl is eval.jsonl's 500 problems followed by 2,000 more drawn last (so that no other file
changed): 2,500 problems, enough for a standard error of at most 0.01 on one accuracy measurement
(sqrt(0.25 / 2500)). The 2,000 hold no single-digit pair (all 100 are taken), so its mix is
d1/d2/d3 = 44/326/2130 (78% d3 in train: the d1 and d2 pairs are mostly taken).

Usage:  python tasks/arith_tiny/make_data.py [--out-dir tasks/arith_tiny/data] [--seed 1234]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ALPHABET = "0123456789+="
WIDTH = 3
N_TRAIN = 20000  # RL prompts
N_SFT = 20000  # supervised warm-start examples
N_EVAL = 500
N_EVAL_EXTRA = 2000  # eval_large = eval + these
DEFAULT_SEED = 1234


def format_question(a: int, b: int, width: int = WIDTH) -> str:
    return f"{a:0{width}d}+{b:0{width}d}="


def format_target(a: int, b: int, width: int = WIDTH) -> str:
    return f"{a + b:0{width + 1}d}"[::-1]


def parse_completion(text: str) -> int | None:
    """Reverse the model's digit string back into an integer; None if it is not all digits."""
    text = text.strip()
    if not text or not text.isdigit():
        return None
    return int(text[::-1])


def count_carries(a: int, b: int) -> int:
    carries, carry = 0, 0
    while a or b:
        carry = 1 if (a % 10 + b % 10 + carry) >= 10 else 0
        carries += carry
        a //= 10
        b //= 10
    return carries


def _operand(rng: random.Random, width: int) -> int:
    digits = rng.randint(1, width)
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(lo, 10**digits - 1)


def make_record(split: str, idx: int, a: int, b: int, width: int = WIDTH) -> dict:
    return {
        "id": f"{split}-{idx:05d}",
        "question": format_question(a, b, width),
        "answer": str(a + b),
        "target": format_target(a, b, width),
        "level": f"d{max(len(str(a)), len(str(b)))}",
        "carries": count_carries(a, b),
    }


def generate(seed: int = DEFAULT_SEED, width: int = WIDTH) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    seen: set[tuple[int, int]] = set()
    out: dict[str, list[dict]] = {}
    # Eval first so its pairs are excluded from every training split.
    for split, n in (("eval", N_EVAL), ("train", N_TRAIN), ("sft", N_SFT), ("eval_extra", N_EVAL_EXTRA)):
        rows = []
        while len(rows) < n:
            a, b = _operand(rng, width), _operand(rng, width)
            if (a, b) in seen:
                continue
            seen.add((a, b))
            rows.append(make_record(split, len(rows), a, b, width))
        out[split] = rows
    out["eval_large"] = out["eval"] + out.pop("eval_extra")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent / "data")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in generate(args.seed).items():
        path = args.out_dir / f"{split}.jsonl"
        with path.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
        print(f"wrote {len(rows)} rows to {path}")


if __name__ == "__main__":
    main()
