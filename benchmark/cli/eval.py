"""`replaybench eval`: pass@k of a model on a task's test split, with a progress bar, recorded in MLflow.

    replaybench eval --model Qwen/Qwen2.5-7B --task math500 --n 8 --k 1,8

The protocol is the paper's: n completions per problem, pass@1 from samples at temperature 0.1 (or
one greedy sample with --greedy), pass@k for k > 1 from samples at temperature 1.0, each averaged
over problems with the unbiased estimator; grading is the task's reward (for the math tasks,
math-verify on the last \\boxed{}). The sampling and scoring code is the pipeline's in-loop
evaluation's (`benchmark.grading.evaluation`). Prompts go through the model's chat template when it has one
(`benchmark.grading.prompts`).

MLflow: one run in the experiment `eval/<task>` with params (model, task and its version, split, n,
k, temperatures, limit, ...), metrics `pass_at_<k>`, and the artifact `completions.jsonl` (one line per
completion: problem index, temperature, sample index, completion, gold, score).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmark.errors import UserError

console = Console(stderr=True)


class EvalError(UserError, ValueError):
    """Arguments that cannot give an evaluation; the message names the fix."""


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("eval", help="pass@k of a model (local folder or hub id) on a task, recorded in MLflow")
    p.set_defaults(func=cmd_eval)
    p.add_argument("--model", required=True, help="a local model folder or a Hugging Face hub id")
    p.add_argument("--task", required=True, help="task name, e.g. math500")
    p.add_argument("--split", default="test", help="the task's split to evaluate (default: test; e.g. heldout)")
    p.add_argument("--n", type=int, default=8, help="completions per problem (default 8)")
    p.add_argument("--k", default="1,8", help="comma-separated k of pass@k, each <= n (default 1,8)")
    p.add_argument("--limit", type=int, help="evaluate the first LIMIT problems only")
    p.add_argument("--data-path", help="local data (.jsonl/.parquet file or a folder) for the evaluated split")
    p.add_argument("--max-new-tokens", type=int, help="generation limit (default: the task's max_gen_toks)")
    p.add_argument("--batch-size", type=int, default=16, help="problems per generate call (default 16)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--greedy", action="store_true", help="pass@1 from one greedy completion per problem")
    p.add_argument("--temperature", type=float, default=0.1, help="sampling temperature of pass@1 (default 0.1)")
    p.add_argument("--temperature-k", type=float, default=1.0,
                   help="sampling temperature of pass@k, k > 1 (default 1.0)")
    p.add_argument("--prompt-format", default="auto", choices=["auto", "chat", "plain"],
                   help="chat template of the tokenizer, raw prompt, or auto (chat when the tokenizer has a template)")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="weights dtype (auto: bfloat16 on a GPU, float32 on CPU)")
    p.add_argument("--out", type=Path, help="also write the completions .jsonl here")


def parse_ks(text: str, n: int) -> list[int]:
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise EvalError(f"--k {text!r}: give comma-separated integers, e.g. --k 1,8") from None
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise EvalError(f"--k {text}: every k must be between 1 and --n ({n}); raise --n or lower k")
    return ks


def cmd_eval(args) -> int:
    from benchmark.grading.prompts import PromptError

    try:
        run_eval(args)
    except (EvalError, PromptError) as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    return 0


def run_eval(args) -> dict:
    """Evaluate, record in MLflow, print the table; returns {"metrics", "params", "mlflow_run_id"}."""
    import torch

    from benchmark.grading.evaluation import pass_at_ks
    from benchmark.grading.prompts import PromptFormat
    from benchmark.grading.tasks import load_task
    from benchmark.rl.generation import HFEngine
    from benchmark.rl.policy import load_pretrained, set_threads
    from benchmark.tracking import TAG, RunRecorder, code_version

    if args.n < 1 or args.batch_size < 1 or (args.limit is not None and args.limit < 1):
        raise EvalError("--n, --batch-size and --limit must be positive")
    ks = parse_ks(args.k, args.n)
    set_threads()
    task = load_task(args.task, data_path={args.split: args.data_path} if args.data_path else None)
    task.require_verifier()  # e.g. no Lean for miniF2F: one clear error before the model loads
    docs = task.docs(args.split)[: args.limit]
    if not docs:
        raise EvalError(f"task {args.task}: split {args.split!r} has no documents")
    sample = None if args.data_path else task.bundled_sample(args.split)
    if sample is not None:
        console.print(f"[yellow]warning:[/] split {args.split!r} of {args.task} is the bundled sample {sample.name} "
                      f"({len(task.docs(args.split))} documents, a smoke-test fixture, not the data set): pass "
                      "--data-path with a full local copy for a real measurement")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if device == "cuda" else "float32")
    console.print(f"loading {args.model} ({dtype}, {device})")
    model, tokenizer = load_pretrained(args.model, dtype=dtype)
    prompt = PromptFormat(tokenizer, args.prompt_format)
    engine = HFEngine(model.to(device), tokenizer)

    # sampling passes: pass@1's, then pass@k's unless pass@1's samples serve (same temperature, n each)
    reuse = 1 in ks and not args.greedy and args.temperature == args.temperature_k
    passes = (1 in ks) + (ks[-1] > 1 and not reuse)
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console) as bar:
        def described(pass_index: int) -> str:
            of = f", pass {pass_index} of {passes}" if passes > 1 else ""
            return f"{args.task}{of}: problems sampled ({args.n} each)"

        # the bar counts problems, one pass at a time: 5 problems read 5/5, not 10/10 over two passes
        job = bar.add_task(described(1), total=len(docs))
        finished_passes = [0]

        def on_batch(done: int) -> None:
            bar.update(job, completed=done, description=described(finished_passes[0] + 1))
            if done == len(docs) and finished_passes[0] + 1 < passes:
                finished_passes[0] += 1

        metrics, sets = pass_at_ks(engine, task, docs, n=args.n, ks=ks, seed=args.seed, greedy=args.greedy,
                                   temperature_pass1=args.temperature, temperature_pass_k=args.temperature_k,
                                   prompt=prompt, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                                   on_batch=on_batch)

    target = task.config.get("doc_to_target")
    lines = [json.dumps({"problem": i, "temperature": s.temperature, "sample": j, "completion": text,
                         "gold": target(doc) if callable(target) else None, "score": score})
             for s in sets for i, (doc, row, scores) in enumerate(zip(docs, s.completions, s.scores))
             for j, (text, score) in enumerate(zip(row, scores))]
    params = {"model": args.model, "task": task.name, "task_version": task.version, "split": args.split,
              "n": args.n, "k": ",".join(map(str, ks)), "limit": args.limit, "problems": len(docs),
              "greedy": args.greedy, "temperature_pass1": 0.0 if args.greedy else args.temperature,
              "temperature_pass_k": args.temperature_k, "max_new_tokens": args.max_new_tokens or task.max_new_tokens,
              "batch_size": args.batch_size, "seed": args.seed, "prompt_format": prompt.kind, "dtype": dtype,
              "data_path": args.data_path, "code_version": code_version()}
    recorder = RunRecorder("", run_name=f"{Path(args.model).name} on {task.name}", experiment=f"eval/{task.name}",
                           tags={f"{TAG}task": task.name, f"{TAG}task_version": task.version}, params=params)
    recorder.flush(1, [(name, value, 0) for name, value in metrics.items()])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "completions.jsonl"
        path.write_text("".join(line + "\n" for line in lines))
        recorder.client.log_artifact(recorder.run_id, str(path))
    recorder.finish()
    if args.out:
        Path(args.out).write_text("".join(line + "\n" for line in lines))

    table = Table(title=f"{args.model} on {task.name} v{task.version} ({args.split}, {len(docs)} problems)")
    for col in ("metric", "value", "samples per problem", "temperature"):
        table.add_column(col)
    for name, value in metrics.items():
        k = int(name.rsplit("_", 1)[1])
        source = sets[0] if k == 1 else sets[-1]
        table.add_row(name.replace("_at_", "@"), f"{value:.4f}", str(source.n), f"{source.temperature:g}")
    Console().print(table)
    console.print(f"MLflow run {recorder.run_id} in experiment eval/{task.name}")
    return {"metrics": metrics, "params": params, "mlflow_run_id": recorder.run_id}
