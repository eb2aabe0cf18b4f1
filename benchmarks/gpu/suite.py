"""What every section shares: sizes and goals, the table's rows, the timing helpers, the ``Suite``."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

from common import ifqa, markdown_table

from gpu.workspace import Workspace
from tests.training.tiny import MINILM_SHAPE

MINILM = MINILM_SHAPE
TINY_BERT = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=512
)
LENGTHS = (128, 256)  # dense encoding: `ifqa index dense`'s default, all-MiniLM-L6-v2's own limit
#: The paper's retriever: DPR's passage and question encoders are BERT-base, read at 256 tokens
BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
DPR_LENGTH = 256
SIZES = {
    "full": dict(  # each section in under 8 minutes on one H100 (one device call), at the goals' sizes
        passages=600_000,
        startup_passages=4096,
        pairs=320_000,
        depth=100,
        sample_passages=99_624,
        sample_pairs=100_000,
        reads=200,
        fid_batches=(1, 4, 8),
        fid_steps=20,
        train_steps=100,
        serve_requests=50,
        bert=MINILM,
        dpr=BERT_BASE,
        t5="t5-base",
        bert_name="all-MiniLM-L6-v2 shape",
    ),
    "smoke": dict(
        passages=200,
        startup_passages=20,
        pairs=40,
        depth=10,
        sample_passages=200,
        sample_pairs=40,
        reads=4,
        fid_batches=(1,),
        fid_steps=2,
        train_steps=2,
        serve_requests=3,
        bert=TINY_BERT,
        dpr=TINY_BERT,
        t5="tiny T5",
        bert_name="tiny BERT",
    ),
}
SIZES["quick"] = {  # every section in at most 8 minutes on one H100 or H200, start-up under a fifth of each command
    **SIZES["full"],
    **dict(passages=150_000, pairs=100_000, sample_passages=20_000, sample_pairs=20_000, reads=64),
    **dict(fid_batches=(8,), fid_steps=8, train_steps=30, serve_requests=30),
}
SIZES["host"] = {  # the host's share on a CPU (--host): the models answer at once, so sizes bound CPU time only
    **SIZES["smoke"],
    **dict(passages=24_096, startup_passages=4096, pairs=50_000, depth=100, sample_passages=0, sample_pairs=0),
    **dict(reads=0, fid_batches=(), fid_steps=0, train_steps=0, serve_requests=0),
}
#: The goals the table judges (issue #67, from what the first real GPU measured), at their sizes only:
#: ÷ the reference at its defaults, ÷ the reference in ifqa's precision and batch, ÷ the model alone;
#: start-up (the command on one chunk, or one question) in seconds.
GOALS = {
    "dense": dict(minimum=150_000, defaults=4.0, same=1.5, ceiling=0.5, startup=5.0),
    "rerank": dict(minimum=100_000, defaults=3.0, same=1.5, ceiling=0.7, startup=5.0),
    "fid": dict(rate=55.0, batch=8),
    "host": dict(dense=1.2, rerank=60.0, workers=1.8),  # workers: two feed processes ÷ one, on a 2-core host
    "dpr": dict(
        minimum=150_000, ceiling=0.9
    ),  # a heavier model leaves the host more time: nearer the model alone  # --host: x the tokenizer's own cost per passage; µs of CPU per pair
}
STARTUP_SHARE = 0.2  # start-up should be under a fifth of a timed command


COLUMNS = (
    "path",
    "ifqa",
    "reference (library defaults)",
    "ifqa ÷ defaults",
    "reference (same precision and batch)",
    "ifqa ÷ same",
    "ceiling (model alone)",
    "ifqa ÷ ceiling",
    "start-up",
    "seconds",
)


def row(
    path: str,
    ours: float | None,
    unit: str,
    default: float | None = None,
    same: float | None = None,
    ceiling: float | None = None,
    startup: str = "",
    note: str = "",
) -> dict:
    text = lambda value: f"{value:,.1f} {unit}" if value is not None else ""  # noqa: E731
    ratio = lambda reference: f"{ours / reference:.2f}x" if ours and reference else ""  # noqa: E731
    share = f"{100 * ours / ceiling:.0f}%" if ours and ceiling else ""
    values = (
        path,
        text(ours),
        text(default),
        ratio(default),
        text(same),
        ratio(same),
        text(ceiling),
        share,
        startup,
        note,
    )
    return dict(zip(COLUMNS, values))


class Goals:
    """The issue's goals, each shown beside its measured value with pass/fail (judged at full size only)."""

    def __init__(self, smoke: bool):
        self.smoke, self.lines = smoke, {}

    def expect(self, key: str, goal: str, target: str) -> None:
        self.lines[key] = {"goal": goal, "target": target, "measured": "", "verdict": "not measured"}

    def judge(
        self,
        key: str,
        measured: float,
        target: float,
        shown: str,
        unjudged: str = "",
        remark: str = "",
        at_most: bool = False,
    ) -> None:
        """``measured`` against ``target``: at least it, or (``at_most``) at most it."""
        if self.smoke:
            verdict, remark = "not judged (smoke sizes)", ""
        elif unjudged:
            verdict = f"not judged ({unjudged})"
        else:
            verdict = "pass" if (measured <= target if at_most else measured >= target) else "FAIL"
        self.lines[key].update(measured=shown, verdict="; ".join(filter(None, [verdict, remark])))

    def table(self) -> str:
        return markdown_table(list(self.lines.values()))


def expect_host_goals(goals: Goals) -> None:
    host = GOALS["host"]
    goals.expect(
        "host-dense", "host: `ifqa index dense` CPU per passage ÷ the tokenizer's own", f"≤ {host['dense']:g}x"
    )
    goals.expect("host-rerank", "host: `ifqa rerank` CPU per pair, every process summed", f"≤ {host['rerank']:g} µs")
    for key, what in (("dense", "`ifqa index dense`"), ("rerank", "`ifqa rerank`")):
        goals.expect(
            f"host-workers-{key}", f"host: {what}, two feed workers ÷ one, steady rate", f"≥ {host['workers']:g}x"
        )


def expect_goals(goals: Goals) -> None:
    dense, rerank = GOALS["dense"], GOALS["rerank"]
    for length in LENGTHS:
        _expect_command(
            goals,
            f"dense-{length}",
            f"`ifqa index dense`, {length} tokens, {dense['minimum']:,}+ passages",
            "`encode`",
            dense,
        )
    _expect_command(goals, "rerank", f"`ifqa rerank`, {rerank['minimum']:,}+ pairs", "`CrossEncoder.predict`", rerank)
    goals.expect(
        "dpr-ceiling",
        f"`ifqa index dense`, DPR passage encoder (BERT-base), {DPR_LENGTH} tokens, {GOALS['dpr']['minimum']:,}+ "
        "passages, start-up included, ÷ the model alone",
        f"≥ {GOALS['dpr']['ceiling']:.0%}",
    )
    goals.expect(
        "fid",
        f"`ifqa train fid`, t5-base shape, 20 passages x 250 tokens, batch {GOALS['fid']['batch']}, steady rate",
        f"≥ {GOALS['fid']['rate']:g} ex/s",
    )


def _expect_command(goals: Goals, key: str, what: str, reference: str, goal: dict) -> None:
    what += ", start-up included"
    goals.expect(f"{key}-defaults", f"{what}, ÷ {reference} at its defaults", f"≥ {goal['defaults']:g}x")
    goals.expect(f"{key}-same", f"{what}, ÷ {reference} in the same precision and batch", f"≥ {goal['same']:g}x")
    goals.expect(f"{key}-ceiling", f"{what}, ÷ the model alone", f"≥ {goal['ceiling']:.0%}")
    goals.expect(
        f"{key}-startup",
        f"{what.split(',')[0]}: start-up (the command on one chunk or question)",
        f"≤ {goal['startup']:g} s",
    )


def judge_command(
    goals: Goals, key: str, goal: dict, items: int, rates: dict, share: float, unit: str, flag: str
) -> None:
    """``rates``: the command's (``ifqa``), and ``defaults``, ``same`` and ``ceiling``'s, per second."""
    unjudged = f"{items:,} {unit}, under the {goal['minimum']:,} the goal names" if items < goal["minimum"] else ""
    remark = f"start-up {share:.0%} of the run, over a fifth: raise {flag}" if share > STARTUP_SHARE else ""
    rate = rates["ifqa"]
    if "startup" in rates:
        goals.judge(f"{key}-startup", rates["startup"], goal["startup"], f"{rates['startup']:.1f} s", at_most=True)
    for name in ("defaults", "same", "ceiling"):
        ratio = rate / rates[name]
        shown = f"{ratio:.0%}" if name == "ceiling" else f"{ratio:.2f}x"
        goals.judge(
            f"{key}-{name}",
            ratio,
            goal[name],
            f"{shown} ({rate:,.0f} vs {rates[name]:,.0f} {unit}/s)",
            unjudged,
            remark,
        )


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def release(device: str) -> None:
    """Give back what this process holds on the GPU, so that a command started next has it all."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def warmed_rate(device: str, count: int, warm_up, run) -> float:
    """Items/s of ``run()`` over ``count`` items, after ``warm_up()``, with the GPU's queue drained at
    both ends so that the clock holds the device's work, not its launch."""
    warm_up()
    synchronize(device)
    started = time.perf_counter()
    run()
    synchronize(device)
    return count / (time.perf_counter() - started)


#: How the suite starts a command: as a user types it, or (``--host``) with its models answering at once
RUNNER: dict = {"host": False}
#: py-spy's samples a second (``profiled``): a profile's seconds are its samples over it
PROFILE_HZ = 50


def command(
    *args, phases=None, env: dict | None = None, profile=None
) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run an `ifqa` command as a user would (its own process); (start time, wall seconds, result),
    the result carrying ``cpu_seconds`` (the command's and its workers'). A failure raises with the
    command's last line of stderr. In host mode the models answer at once (``gpu/instant.py``);
    ``phases`` (a file): the parts of its start-up are stamped there (``gpu/phases.py``); ``env``: set
    in its environment; ``profile`` (a file): its stacks sampled there by py-spy (``profiled``)."""
    import resource
    import sys

    started, clock = time.time(), time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = ifqa(*args)
    if RUNNER["host"]:
        line = [sys.executable, str(Path(__file__).with_name("instant.py")), *map(str, args)]
    elif phases is not None:
        line = [sys.executable, str(Path(__file__).with_name("phases.py")), str(phases), *map(str, args)]
    if profile is not None:
        line = profiled(line, profile)
    import os

    # a session of its own: a measurement stopped by the call's budget ends the command and its feed workers
    with subprocess.Popen(
        line,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):  # the group may be gone already
                os.killpg(process.pid, signal.SIGKILL)
            raise
    result = subprocess.CompletedProcess(line, process.returncode, stdout, stderr)
    seconds = time.perf_counter() - clock
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command's CPU time (its workers' included)
    result.cpu_seconds = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise RuntimeError(f"ifqa {' '.join(map(str, args[:2]))} failed: {last}")
    return started, seconds, result


def profiled(line: list, profile) -> list:
    """``line`` sampled by py-spy (50 Hz, every thread, waiting included, the process never paused), its raw
    stacks written to ``profile``; as it is where py-spy is not installed."""
    import shutil

    spy = shutil.which("py-spy")
    if spy is None:
        return line
    return [spy, "record", "--nonblocking", "--idle", "--threads", "--rate", str(PROFILE_HZ), "--format", "raw"] + [
        "-o",
        str(profile),
        "--",
        *map(str, line),
    ]


def main_thread_profile(profile, top: int = 4) -> str:
    """Where a command's main thread spent its time, from py-spy's raw stacks: the functions it was in most
    (the innermost frame, and the innermost of ifqa's own), each with its share of the thread's samples."""
    from collections import Counter

    if not Path(profile).is_file():
        return "no profile (py-spy is not installed)"
    stacks = [line.rpartition(" ") for line in Path(profile).read_text().splitlines() if line.strip()]
    main = {stack.split(";")[0].split(":")[0] for stack, _, _ in stacks if "MainThread" in stack.split(";")[0]}
    places, total = Counter(), 0
    for stack, _, count in stacks:
        thread, *frames = stack.split(";")
        if thread.split(":")[0] not in main or not frames:
            continue
        name = lambda frame: frame.split(" (")[0] + " (" + frame.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"  # noqa: E731
        own = next((name(f) for f in reversed(frames) if "(ifqa/" in f or "/ifqa/" in f), "")
        places[name(frames[-1]) + (f" in {own}" if own and own != name(frames[-1]) else "")] += int(count)
        total += int(count)
    if not total:
        return "no main-thread samples in the profile"
    shown = ", ".join(f"{place} {100 * n / total:.0f}%" for place, n in places.most_common(top))
    return f"main thread ({total / PROFILE_HZ:.0f} s sampled): {shown}"


def model_alone(
    call, tokenizer, first: list[str], second: list[str] | None, batch: int, max_length: int, device: str
) -> float:
    """Items/s of the model alone: inputs tokenized, sorted by their token counts (as ifqa plans a chunk's
    batches: sorted by characters, 256-token batches were a third padding) and on the device before the
    clock starts."""
    import torch

    batches = device_batches(tokenizer, first, second, batch, max_length, device)
    with torch.inference_mode():
        return warmed_rate(
            device, len(first), lambda: call(batches[0]), lambda: [call(features) for features in batches]
        )


def device_batches(
    tokenizer, first: list[str], second: list[str] | None, batch: int, max_length: int, device: str
) -> list[dict]:
    """``first`` (with ``second``: pairs) tokenized in batches sorted by token count, each on ``device``."""
    counted = tokenizer(first, second, truncation=True, max_length=max_length)["input_ids"]
    order = sorted(range(len(first)), key=lambda i: -len(counted[i]))
    batches = []
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        features = tokenizer(
            [first[i] for i in chosen],
            [second[i] for i in chosen] if second else None,
            truncation=True,
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        )
        batches.append({k: v.to(device) for k, v in features.items()})
    return batches


def library_default(function, name: str = "batch_size"):
    """A parameter's default in the installed library (``encode``'s and ``predict``'s batch: 32)."""
    import inspect

    return inspect.signature(function).parameters[name].default


def precision_name(dtype) -> str:
    import torch

    return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype, "fp32")


def past_startup(total: float, startup: float) -> float | None:
    """What a full run spent beyond its start-up run (seconds, or CPU seconds), or None where start-up is
    nearly all of it (under 5% left: the difference is noise)."""
    spent = total - startup
    return None if spent < 0.05 * total else spent


def steady_text(items: int, seconds: float, startup: float, unit: str) -> str:
    """The rate past start-up: the full run's items beyond the start-up run's, over the seconds beyond its."""
    spent = past_startup(seconds, startup)
    if spent is None:
        return "steady rate not measurable (start-up is nearly the whole run)"
    return f"steady {items / spent:,.0f} {unit}/s"


def host_text(cpu: float, startup_cpu: float, pairs: int) -> str:
    """Host CPU per pair past start-up: the full run's CPU seconds beyond the start-up run's, over its pairs
    beyond the start-up run's."""
    spent = past_startup(cpu, startup_cpu)
    if spent is None:
        return "host CPU per pair not measurable (start-up is nearly the whole run)"
    return f"host CPU {1e6 * spent / max(1, pairs):.1f} µs per pair"


def startup_text(startup: float, small: int, total: float, unit: str, phases=None) -> str:
    """Start-up seconds and share of the run, with its parts where they were stamped (``gpu/phases.py``)."""
    import json

    share = startup / total
    warning = ", over a fifth" if share > STARTUP_SHARE else ""
    parts = ""
    if phases is not None and phases.exists():
        stamps = sorted(json.loads(phases.read_text()).items(), key=lambda item: item[1])
        parts = "; parts, s from the process's start: " + ", ".join(f"{name} {at:.1f}" for name, at in stamps)
    return f"{startup:.1f} s ({share:.0%} of the run{warning}; the command on {small:,} {unit}{parts})"


class BudgetSpent(BaseException):
    """The call's budget (``--budget``) ran out while a measurement ran: it is stopped, its row says so. Not
    an ``Exception``, as KeyboardInterrupt is not: a measurement's own ``except Exception`` (FiD's fall-back
    to eager where ``torch.compile`` fails) would take it for a failure and run on (the H200's call of
    2026-11-28 ran past its budget so, until the outer timeout)."""


#: whether a measurement is running under the budget: an alarm that lands after it ended is ignored
_MEASURING = [False]


def _budget_spent(signum, frame):
    if _MEASURING[0]:
        raise BudgetSpent("the call's budget ran out during this measurement")


def attempt(name: str, function, *args, deadline: float | None = None) -> list[dict]:
    """A measurement that fails (a package missing on the GPU machine, a bug) becomes a row saying why,
    so one failure never costs the others; each row notes its section's seconds. ``deadline`` (a
    ``time.time()``): past it the measurement is not started, and one running then is stopped (SIGALRM),
    so the suite writes its table and exits within the device call."""
    started = time.time()
    if deadline is not None and started >= deadline:
        return [{**row(name, None, ""), "ifqa": "not run: the call's budget was spent (--budget)", "seconds": "0"}]
    if deadline is not None:
        signal.signal(signal.SIGALRM, _budget_spent)
        # again every second until the measurement ends: a library that swallows one is stopped by the next
        _MEASURING[0] = True
        signal.setitimer(signal.ITIMER_REAL, max(0.01, deadline - started), 1.0)
    try:
        try:
            result = function(*args)
        finally:
            _MEASURING[0] = False  # first: an alarm from here on raises nothing (the table is yet to be written)
            if deadline is not None:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except (Exception, SystemExit, BudgetSpent) as exc:  # noqa: BLE001 - every failure is reported in the table
        detail = (getattr(exc, "stderr", None) or str(exc) or type(exc).__name__).strip().splitlines() or [
            type(exc).__name__
        ]
        return [
            {
                **row(name, None, ""),
                "ifqa": f"not measured: {type(exc).__name__}: {detail[-1][:160]}",
                "seconds": f"{time.time() - started:.0f}",
            }
        ]
    rows = result if isinstance(result, list) else [result]
    for entry in rows:
        entry["seconds"] = "; ".join(filter(None, [entry.get("seconds"), f"section {time.time() - started:.0f} s"]))
    return rows


class Suite:
    """What every section reads: sizes, device, the work folder, the models, the goals."""

    def __init__(self, args, size: dict, device: str, work: Workspace, folders: dict, goals: Goals):
        self.size, self.device, self.work, self.folders, self.goals = size, device, work, folders, goals
        self.smoke, self.quick = bool(args.smoke), bool(args.quick)
        self.passages = args.passages or size["passages"]
        self.pairs = args.pairs or size["pairs"]
        self.startup_passages = min(max(1, self.passages // 2), size["startup_passages"])
        self.startup: dict = {}  # start-up seconds measured once per command
        self.out_folder = Path(args.out).parent  # files that go back with the table (a device call's $OUT)

    def out_file(self, name: str) -> Path:
        """A file written beside the table (``--out``), so a device call brings it back."""
        return self.out_folder / name
