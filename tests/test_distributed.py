"""Data-parallel training and reading under torchrun (2 ranks, gloo, CPU): the ranks train as one
process over the same global batch, rank 0 alone writes, checkpoints move between world sizes, and a
rank killed mid-run is restarted by the launcher and resumes to the uninterrupted losses."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ifqa import distributed
from ifqa.devices import pick_device
from ifqa.distributed import World
from ifqa.errors import IfqaError
from ifqa.models import load_weights
from ifqa.training.loop import STATE, TRAINER
from ifqa.training.recipes import FiDRecipe
from tests.readers.test_fid import TOY

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

LAUNCH_ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_NODEID",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPU_BIND",
    "MASTER_ADDR",
    "MASTER_PORT",
    "IFQA_DIST_TIMEOUT",
    "TORCHELASTIC_USE_AGENT_STORE",
)


def torchrun(*args, ranks: int = 2, launcher: tuple = (), timeout: int = 300, background: bool = False):
    """``torchrun --standalone --nproc_per_node RANKS -m ifqa -- ARGS``, as the docs write it."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(ranks),
        *launcher,
        "-m",
        "ifqa",
        "--",
        *map(str, args),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "IFQA_DIST_TIMEOUT": "30", "PYTHONWARNINGS": "ignore"}
    if background:
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def no_launcher(monkeypatch):
    for name in LAUNCH_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_world_is_read_from_torchrun_or_srun(no_launcher):
    assert distributed.launched() == World() and not World().active and World().main
    no_launcher.setenv("SLURM_PROCID", "3")
    no_launcher.setenv("SLURM_STEP_NUM_TASKS", "1")  # a batch script's own shell: one task
    assert distributed.launched() == World()
    no_launcher.setenv("SLURM_STEP_NUM_TASKS", "8")
    no_launcher.setenv("SLURM_LOCALID", "1")
    assert distributed.launched() == World(3, 8, 1)
    for name, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")):
        no_launcher.setenv(name, value)
    assert distributed.launched() == World(1, 2, 1) and not World(1, 2, 1).main
    assert distributed.first_host("gpu[03-05,9],cpu1") == "gpu03" and distributed.first_host("node7,node8") == "node7"


def test_shares_of_a_global_batch():
    assert World(1, 2).share(list("abcd")) == ["c", "d"] and World().share("abc") == ["a", "b", "c"]
    with pytest.raises(IfqaError, match="--batch-size 3 is a global batch: 2 ranks need a multiple of 2"):
        World(0, 2).share(range(3))
    assert [World(r, 2).blocks(5, 2) for r in range(2)] == [range(0, 2), range(2, 5)]  # whole batches per rank
    assert [World(r, 4).blocks(3, 2) for r in range(4)] == [range(0, 0), range(0, 2), range(2, 2), range(2, 3)]


def test_launch_settings_that_cannot_work_are_one_line_before_any_work(no_launcher, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks a machine without CUDA")
    for name, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")):
        no_launcher.setenv(name, value)
    with pytest.raises(IfqaError, match="--device cuda: rank 1 sees no GPU"):
        pick_device("cuda", distributed.launched())
    assert pick_device(None, distributed.launched()) == "cpu"
    no_launcher.setenv(distributed.BACKEND_ENV, "nccl")
    with pytest.raises(IfqaError, match="nccl needs a CUDA device on every rank"):
        distributed.start("cpu")
    from ifqa.training import fid as fid_train

    with pytest.raises(IfqaError, match="--batch-size 3 is a global batch"):
        fid_train.train(tmp_path / "none.jsonl", None, tmp_path / "out", FiDRecipe(batch_size=3), "cpu")
    assert not (tmp_path / "out").exists()
    from ifqa.registry import TRAINABLE
    from ifqa.training.jobs import check_before_mining
    from ifqa.training.recipes import RerankerRecipe

    with pytest.raises(IfqaError, match="--questions-per-step 3 is a global batch: 2 ranks need a multiple of 2"):
        check_before_mining(TRAINABLE.get("reranker"), RerankerRecipe(questions_per_step=3), 100, tmp_path, "cpu")


LAUNCH_SHAPES = {
    "torchrun on 8 visible GPUs": ({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "5", "LOCAL_WORLD_SIZE": "8"}, 8),
    "torchrun on the 4 GPUs CUDA_VISIBLE_DEVICES shows": (
        {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"},
        4,
    ),
    "srun: 8 tasks sharing a node's GPUs": (
        {"SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "5", "SLURM_LOCALID": "5", "SLURM_STEP_TASKS_PER_NODE": "8"},
        8,
    ),
    "srun --gpus-per-task=1, 2 nodes of 4 tasks": (
        {
            "SLURM_STEP_NUM_TASKS": "8",
            "SLURM_PROCID": "6",
            "SLURM_LOCALID": "2",
            "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
            "SLURM_NODEID": "1",
            "SLURM_GPUS_PER_TASK": "1",
        },
        1,
    ),
    "srun --gpu-bind: each task sees its own GPU": (
        {"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "3", "SLURM_GPU_BIND": "map_gpu:0,1,2,3"},
        1,
    ),
}


@pytest.mark.parametrize("shape", LAUNCH_SHAPES)
def test_every_rank_of_a_launch_shape_gets_a_gpu_of_its_own(no_launcher, monkeypatch, shape):
    """A rank's GPU is its local rank among the GPUs it sees: ``cuda:LOCAL_RANK`` where the node's ranks
    share the GPUs, ``cuda:0`` where the scheduler gave each task its own (SLURM_LOCALID still counts
    0..N-1 there, and putting those ranks on the CPU left NCCL unable to form the group)."""
    from tests.fake_cuda import FakeCuda

    env, visible = LAUNCH_SHAPES[shape]
    FakeCuda(count=visible).install(monkeypatch)
    for name, value in env.items():
        no_launcher.setenv(name, value)
    world = distributed.launched()
    device = pick_device(None, world)
    expected = 0 if world.gpus_per_task else world.local_rank
    assert device == f"cuda:{expected}" and int(device.split(":")[1]) < visible
    assert pick_device("cuda", world) == device


def test_ranks_that_would_land_on_different_kinds_of_device_are_one_line(no_launcher, monkeypatch):
    from tests.fake_cuda import FakeCuda

    FakeCuda(count=4).install(monkeypatch)
    for name, value in {"SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "6", "SLURM_LOCALID": "6"}.items():
        no_launcher.setenv(name, value)
    no_launcher.setenv("SLURM_STEP_TASKS_PER_NODE", "8")
    with pytest.raises(IfqaError, match="8 ranks on this node share 4 visible GPU\\(s\\): rank 6 would have none"):
        pick_device(None, distributed.launched())
    with pytest.raises(IfqaError, match="--device cpu, but the launcher gave rank 6 a GPU"):
        pick_device("cpu", distributed.launched())


BAD_LAUNCHES = {
    "WORLD_SIZE alone": ({"WORLD_SIZE": "2"}, "WORLD_SIZE is set but RANK is not"),
    "RANK alone": ({"RANK": "0"}, "RANK is set but WORLD_SIZE is not"),
    "WORLD_SIZE=two": ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer of at least 1"),
    "RANK=3 of 2": ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK=3 is not below WORLD_SIZE=2"),
    "RANK=-1": ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK='-1' is not an integer of at least 0"),
    "LOCAL_RANK beyond the node": (
        {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
        "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2",
    ),
    "SLURM_PROCID beyond the step": (
        {"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "2"},
        "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2",
    ),
    **{
        f"IFQA_DIST_TIMEOUT={value}": (
            {"RANK": "0", "WORLD_SIZE": "2", "IFQA_DIST_TIMEOUT": value},
            f"IFQA_DIST_TIMEOUT='{value}': give a positive number of seconds",
        )
        for value in ("abc", "nan", "0", "-5", "inf")
    },
    "MASTER_PORT=http": (
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "http"},
        "MASTER_PORT='http' is not an integer",
    ),
    "MASTER_PORT out of range": (
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "70000"},
        "MASTER_PORT='70000' is not a port",
    ),
}


@pytest.mark.parametrize("case", BAD_LAUNCHES)
def test_a_launch_environment_that_cannot_work_is_one_line_and_writes_nothing(
    no_launcher, bert_without_dropout, tmp_path, cli, case
):
    """Read in one place (``distributed.launched``), refused before any work: no traceback, no
    ``groups.json`` in the output folder, and never a silent one-process run for a half-set world."""
    env, message = BAD_LAUNCHES[case]
    result = cli(*_train_reranker(bert_without_dropout, tmp_path / "out"), env={**os.environ, **env})
    assert result.returncode == 1, result.stderr[-2000:]
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_a_peer_that_never_comes_and_a_taken_port_are_one_line_and_write_nothing(
    no_launcher, bert_without_dropout, tmp_path, cli
):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "IFQA_DIST_TIMEOUT": "2"}
        result = cli(*_train_reranker(bert_without_dropout, tmp_path / "taken"), env={**env, "MASTER_PORT": str(port)})
    assert result.returncode == 1 and "could not form the process group" in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "taken").exists()
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = time.time()
    result = cli(*_train_reranker(bert_without_dropout, tmp_path / "alone"), env={**env, "MASTER_PORT": str(port)})
    assert result.returncode == 1 and "rank 0 of 2 could not form the process group" in result.stderr
    assert "within 2 s" in result.stderr and time.time() - started < 60
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "alone").exists()


def _train_reranker(model, output) -> list:
    return [
        "train",
        "reranker",
        "--index",
        "demo:bm25",
        "--setting",
        "demo",
        "--model",
        model,
        "--max-length",
        "64",
        "--questions-per-step",
        "4",
        "--no-progress",
        "-o",
        output,
    ]


SLOW_SAVE_RANK = """
import json, os, sys, time
from pathlib import Path
import torch
from ifqa import distributed
from ifqa.training.loop import LoopSettings, Trainee, run_loop

real_save = torch.save
def slow_save(*args, **kwargs):  # a checkpoint on a slow network filesystem
    time.sleep(float(os.environ["SAVE_SECONDS"]))
    return real_save(*args, **kwargs)
torch.save = slow_save
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
batches = [[torch.randn(4) for _ in range(2)] for _ in range(3)]
loss_of = lambda rows, forward: forward(torch.stack(rows)).pow(2).mean()
settings = LoopSettings(steps=3, lr=0.1, save_every=2, precision="fp32")
world = distributed.launched()
trainee = Trainee(model=model, parameters=list(model.parameters()), batches=batches, loss=loss_of)
result = run_loop(trainee, Path(sys.argv[1]), settings, "cpu", False, None, world)
print(json.dumps({"rank": world.rank, "step": result["step"]}))
"""


def test_a_save_longer_than_the_collective_timeout_completes(no_launcher, tmp_path):
    """Rank 0 saves for 5 s under a 3 s collective timeout while rank 1 goes on to the next step's
    all-reduce: rank 1 waits for the save on the store (``distributed.one_writer``), not at a
    collective, and both finish (two gloo ranks with a 2 s timeout and a 6 s save died at step 1)."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {
        **os.environ,
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "IFQA_DIST_TIMEOUT": "3",
        "SAVE_SECONDS": "2.5",  # per file: 5 s for the state's two
        "OMP_NUM_THREADS": "1",
    }
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", SLOW_SAVE_RANK, str(tmp_path / "out")],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [rank.communicate(timeout=120) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [err[-2000:] for _, err in outputs]
    assert [json.loads(out)["step"] for out, _ in outputs] == [3, 3]


@pytest.fixture(scope="module")
def fid_setup(tmp_path_factory):
    """A tiny T5 without dropout (ranks and one process draw no masks to compare), a 4-question run and
    its questions."""
    from transformers import AutoTokenizer

    from ifqa.readers.fid.model import FiDT5
    from tests.readers.tiny_models import tiny_t5

    root = tmp_path_factory.mktemp("fid-dist")
    tiny_t5(root / "t5-dropout")
    model = FiDT5.from_pretrained(str(root / "t5-dropout"))
    model.config.dropout_rate = 0.0
    model.save_pretrained(root / "t5")
    AutoTokenizer.from_pretrained(str(root / "t5-dropout")).save_pretrained(root / "t5")
    run = root / "toy.jsonl"
    run.write_text(
        "".join(
            json.dumps(
                {
                    "qid": str(i),
                    "question": q,
                    "answers": [a],
                    "ctxs": [
                        {
                            "id": f"{i}-{j}",
                            "title": f"T{j}",
                            "text": f"{a} is mentioned in passage {j}" if j == i % 2 else "unrelated",
                        }
                        for j in range(2)
                    ],
                }
            )
            + "\n"
            for i, (q, a) in enumerate(TOY)
        )
    )
    questions = root / "toy-questions.json"
    questions.write_text(
        json.dumps([{"idx": i, "question": q, "answers": [a], "context": []} for i, (q, a) in enumerate(TOY)])
    )
    return root, run, questions


FID_ARGS = (
    "--steps",
    "4",
    "--batch-size",
    "2",
    "--warmup-steps",
    "0",
    "--n-context",
    "2",
    "--text-maxlength",
    "32",
    "--answer-maxlength",
    "8",
    "--lr",
    "1e-3",
    "--no-progress",
)


def saved_state(output: Path) -> dict:
    """The step and log of the training state saved in ``output``."""
    saved = load_weights(output / STATE / TRAINER)
    return {"step": saved["step"], "log": json.loads(saved["log"])}


def train_fid_on_ranks(root: Path, run: Path, output: Path, *extra, steps: int = 4, **launch):
    """``ifqa train fid`` on the toy T5 with FID_ARGS (``steps`` of them) under ``torchrun``."""
    args = [*FID_ARGS[:1], str(steps), *FID_ARGS[2:]]
    return torchrun(
        "train", "fid", "--run", run, "--model", root / "t5", "-o", output, *args, *extra, "--device", "cpu", **launch
    )  # fmt: skip


def _fid_config(root: Path, **extra) -> FiDRecipe:
    settings = dict(
        model=str(root / "t5"),
        steps=4,
        batch_size=2,
        warmup_steps=0,
        n_context=2,
        text_maxlength=32,
        answer_maxlength=8,
        lr=1e-3,
    )
    return FiDRecipe(**{**settings, **extra})


def _losses(folder: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (folder / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.heavy  # real two-rank gloo runs; the save-timeout run and the simulated launches run by default
def test_fid_on_two_ranks_trains_as_one_process_and_hands_over_to_one(fid_setup, tmp_path, no_launcher):
    """2 ranks x 1 question = one process x 2 questions: the same losses per step; the checkpoint the
    ranks wrote after 2 steps resumes in one process to the uninterrupted run's losses, and the ranks
    wrote what one process writes, no more."""
    from ifqa.training import fid as fid_train

    root, run, questions = fid_setup
    alone = fid_train.train(run, None, tmp_path / "alone", _fid_config(root), "cpu", progress=False)
    result = train_fid_on_ranks(root, run, tmp_path / "ranks", "--stop-after", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("step 2") == 1  # rank 0 alone reports
    state = saved_state(tmp_path / "ranks")
    assert [e["loss"] for e in state["log"]] == pytest.approx([e["loss"] for e in alone["log"][:2]], abs=1e-5)
    resumed = fid_train.train(run, None, tmp_path / "ranks", _fid_config(root), "cpu", progress=False)
    assert [e["loss"] for e in resumed["log"]] == pytest.approx(_losses(tmp_path / "alone"), abs=1e-5)
    assert sorted(p.relative_to(tmp_path / "ranks").as_posix() for p in (tmp_path / "ranks").rglob("*")) == sorted(
        p.relative_to(tmp_path / "alone").as_posix() for p in (tmp_path / "alone").rglob("*")
    )

    # reading: each rank its whole batches, rank 0 one file in question order, byte for byte one process's
    one = tmp_path / "one.jsonl"
    from ifqa.api import load_questions
    from ifqa.readers.fid.predict import read_to_file

    read_to_file(
        tmp_path / "alone", load_questions(path=questions), run, one, batch_size=1, device="cpu", progress=False
    )
    result = torchrun(
        "read",
        "fid",
        "--checkpoint",
        tmp_path / "alone",
        "--run",
        run,
        "--questions",
        questions,
        "--batch-size",
        "1",
        "--device",
        "cpu",
        "-o",
        tmp_path / "two.jsonl",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "two.jsonl").read_bytes() == one.read_bytes()


def _parent(pid: int) -> int:
    return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])


def _rank_pid(launcher_pid: int, rank: str) -> int | None:
    """The worker process of ``rank`` started by the torchrun process ``launcher_pid``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == launcher_pid:
            continue
        try:
            pid = int(entry.name)
            ancestor = pid
            while ancestor > 1 and ancestor != launcher_pid:
                ancestor = _parent(ancestor)
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ancestor == launcher_pid and f"RANK={rank}".encode() in environ and f"LOCAL_RANK={rank}".encode() in environ:
            return pid
    return None


@pytest.mark.heavy  # real two-rank gloo runs; the save-timeout run and the simulated launches run by default
def test_a_rank_killed_mid_run_is_restarted_and_resumes_to_the_uninterrupted_losses(fid_setup, tmp_path, no_launcher):
    from ifqa.training import fid as fid_train

    root, run, _ = fid_setup
    alone = fid_train.train(run, None, tmp_path / "alone", _fid_config(root, steps=6), "cpu", progress=False)
    job = train_fid_on_ranks(
        root, run, tmp_path / "ranks", "--save-every", "1", steps=6, launcher=("--max-restarts", "1"), background=True
    )
    state = tmp_path / "ranks" / STATE / TRAINER
    deadline = time.time() + 240
    while not state.exists() and time.time() < deadline and job.poll() is None:
        time.sleep(0.2)
    victim = _rank_pid(job.pid, "1")
    assert victim, "rank 1 was not found running"
    os.kill(victim, signal.SIGKILL)
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0, err[-3000:]
    assert _losses(tmp_path / "ranks") == pytest.approx([e["loss"] for e in alone["log"]], abs=1e-5)


@pytest.fixture(scope="module")
def bert_without_dropout(tmp_path_factory):
    from transformers import AutoConfig, BertModel

    from tests.training.tiny import tiny_bert

    root = tmp_path_factory.mktemp("bert-dist")
    tiny_bert(root / "with-dropout")
    config = AutoConfig.from_pretrained(
        root / "with-dropout", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    BertModel.from_pretrained(root / "with-dropout", config=config).save_pretrained(root / "bert")
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(root / "with-dropout").save_pretrained(root / "bert")
    return root / "bert"


@pytest.mark.heavy  # real two-rank gloo runs
@pytest.mark.parametrize(
    "kind, recipe",
    [
        pytest.param(  # also under narrower instruction sets: the case an AMX machine failed
            "reranker",
            ["--group-size", "4", "--questions-per-step", "4", "--attention-dropout", "0"],
            marks=pytest.mark.numerics,
        ),
        ("retriever", ["--hard-negatives", "1", "--questions-per-step", "4"]),
    ],
)
def test_rerankers_and_retrievers_on_two_ranks_train_as_one_process(bert_without_dropout, tmp_path, kind, recipe, cli):
    """Each rank scores its 2 of the 4 questions; the retriever's in-batch negatives come from both ranks
    (gathered, gradients back to their own rank): every step's loss is one process's."""
    common = [
        "--index",
        "demo:bm25",
        "--setting",
        "demo",
        "--epochs",
        "1",
        "--max-length",
        "64",
        "--hard-depth",
        "10",
        "--model",
        bert_without_dropout,
        "--no-progress",
        "--device",
        "cpu",
        "--precision",
        "fp32",  # pinned: one process and two ranks then round alike on any CPU (bf16 would not)
        *recipe,
    ]
    alone = cli("train", kind, *common, "-o", tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr[-3000:]
    ranks = torchrun("train", kind, *common, "-o", tmp_path / "ranks")
    assert ranks.returncode == 0, ranks.stderr[-3000:]
    assert ranks.stdout.count("trained in") == 1
    assert _losses(tmp_path / "ranks") == pytest.approx(_losses(tmp_path / "alone"), abs=1e-5)
    assert len(_losses(tmp_path / "alone")) == 3  # 12 demo questions, 4 a step


@pytest.mark.heavy  # real two-rank gloo runs; the save-timeout run and the simulated launches run by default
def test_a_one_process_checkpoint_resumes_on_two_ranks_with_dev_em_shared(fid_setup, tmp_path, no_launcher):
    """The other way round: one process trains 2 steps, 2 ranks finish the run; the dev EM inside
    training is computed on each rank's share of the dev questions and gathered: the losses and
    dev EMs of the uninterrupted single-process run."""
    from ifqa.training import fid as fid_train

    root, run, _ = fid_setup
    dev = tmp_path / "dev.jsonl"  # the same passages asked otherwise: training never scores its own questions
    records = [json.loads(line) for line in run.read_text().splitlines()]
    dev.write_text("".join(json.dumps({**r, "question": f"As asked on dev: {r['question']}"}) + "\n" for r in records))
    config = _fid_config(root, eval_every=2, eval_batch_size=1)
    alone = fid_train.train(run, dev, tmp_path / "alone", config, "cpu", progress=False)
    fid_train.train(run, dev, tmp_path / "split", config, "cpu", progress=False, stop_after=2)
    result = train_fid_on_ranks(
        root, run, tmp_path / "split", "--dev-run", dev, "--eval-every", "2", "--eval-batch-size", "1"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "split" / "train_log.jsonl").read_text().splitlines()]
    assert [e["loss"] for e in log] == pytest.approx([e["loss"] for e in alone["log"]], abs=1e-5)
    assert [e.get("dev_em") for e in log] == [e.get("dev_em") for e in alone["log"]]
    assert [e.get("dev_em") for e in log][1::2] != [None, None]


@pytest.mark.heavy  # real two-rank gloo runs; the save-timeout run and the simulated launches run by default
def test_ctrl_c_on_the_launcher_stops_every_rank_after_one_saved_step(fid_setup, tmp_path, no_launcher):
    from ifqa.training import fid as fid_train

    root, run, _ = fid_setup
    job = train_fid_on_ranks(root, run, tmp_path / "ranks", steps=400, background=True)
    deadline = time.time() + 240
    while not (tmp_path / "ranks" / "train_config.json").exists() and time.time() < deadline and job.poll() is None:
        time.sleep(0.1)
    time.sleep(3)  # some steps in
    assert job.poll() is None, "finished before it could be interrupted"
    os.killpg(job.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches the launcher and its ranks
    _, err = job.communicate(timeout=120)
    assert job.returncode != 0
    assert "interrupted; rerun the same command to resume" in err
    state = saved_state(tmp_path / "ranks")
    assert 0 < state["step"] < 400
    saved = [e["loss"] for e in state["log"]]
    shutil.copytree(tmp_path / "ranks", tmp_path / "again")  # the same saved state, resumed a second time
    config = _fid_config(root, steps=400)
    resumed = fid_train.train(run, None, tmp_path / "ranks", config, "cpu", progress=False, stop_after=3)
    again = fid_train.train(run, None, tmp_path / "again", config, "cpu", progress=False, stop_after=3)
    first = min(state["step"], 10)
    alone = fid_train.train(run, None, tmp_path / "alone", config, "cpu", progress=False, stop_after=first)
    losses = [e["loss"] for e in resumed["log"]]
    assert len(losses) == state["step"] + 3 and losses[: state["step"]] == saved  # every saved step, once
    # fp32 on a CPU. A resume takes the path the saved state sets: the same steps each time, to rounding
    assert losses[state["step"] :] == pytest.approx([e["loss"] for e in again["log"]][state["step"] :], abs=1e-5)
    # two ranks sum gradients in another order than one process (~1e-7 a step, growing over hundreds of
    # steps by as much as the interrupt's timing allows): compared only over steps too few for it to grow
    assert losses[:first] == pytest.approx([e["loss"] for e in alone["log"]], abs=1e-5)
