"""Help pages that read like a manual, rendered by rich-click (imported only for help): every command's
options grouped by what they are for, decided here by option name (a new option joins its group
without a new line anywhere else), one default style, and one example per command."""

from __future__ import annotations

import functools

import click

from ifqa.choices import subcommands

#: Group titles in the order a page shows them; an option none of the rules claims goes to ``OTHER``
#: (never rich-click's own "Options" panel, which would then collect every option a second time).
GROUPS = ("Server", "Input", "Retrieval", "Model", "Training", "Output", "Runtime")
OTHER = "More options"
_RULES = {
    "Server": ("host", "port", "concurrency", "max_k", "cache", "no_cache"),  # in this order
    "Input": {
        "questions", "setting", "split", "splits", "data_dir", "run_option", "run_argument", "run_path", "corpus",
        "predictions", "compare", "config", "inputs", "query", "dev_run", "train", "from_", "url", "settings",
        "passages", "words", "judgments", "twins", "twin_predictions",
    },
    "Retrieval": {
        "index", "indexes", "k", "query_mode", "fusion", "weights", "depth", "rerank", "rerank_depth", "k1", "b",
        "index_type", "verify_corpus", "selection",
    },
    "Model": {
        "model", "encoder", "query_encoder", "checkpoint", "api_key", "base_url", "max_length", "temperature", "mode",
        "demos", "cot", "samples", "max_tokens", "max_prompt_tokens", "prompts_dir", "beams", "completions",
        "no_titles", "text_maxlength", "answer_maxlength", "n_context", "retries", "timeout", "thinking",
        "thinking_budget", "reasoning_effort", "protocol", "max_steps", "template", "context_window", "gguf_weights",
        "dtype",
    },
    "Training": {
        "steps", "epochs", "lr", "warmup_steps", "weight_decay", "max_grad_norm", "accumulation", "eval_every",
        "seed", "group_size", "hard_depth", "hard_negatives", "other_gold", "other_gold_from", "questions_per_step",
        "question_side_only", "attention_dropout", "weight",
    },
    "Output": {"output", "index_dir", "as_json", "format_", "to", "no_progress", "force", "tag"},
    "Runtime": {
        "device", "threads", "batch_size", "eval_batch_size", "workers", "precision", "backend", "quantize",
        "max_memory", "ray_address", "ray_workers", "shard", "chunk_size", "chunk_docs", "compile", "no_compile",
        "gradient_checkpointing", "fp32", "stop_after", "save_every", "model_threads",
    },
}  # fmt: skip
_PREFIXES = {"rerank_": "Retrieval", "rewrite_": "Model"}

#: One example per command, as a user would type it (tests/cli/test_help.py keeps the list complete).
EXAMPLES = {
    "ifqa analyze premise": "ifqa analyze premise --predictions runs/dev-llm-qa.jsonl -o runs/premise-qa",
    "ifqa classify causal": "ifqa classify causal --questions dev.json -o causal.jsonl",
    "ifqa convert": "ifqa convert --run runs/dev.jsonl --to trec -o runs/dev.trec",
    "ifqa corpus build": "ifqa corpus build enwiki-latest-pages-articles.xml.bz2 -o passages.jsonl",
    "ifqa data download": "ifqa data download --setting supervised",
    "ifqa data stats": "ifqa data stats --setting supervised --split dev",
    "ifqa evaluate": "ifqa evaluate --run runs/dev.jsonl",
    "ifqa experiment run": "ifqa experiment run experiments/demo.yaml",
    "ifqa judge": "ifqa judge --predictions runs/dev-llm.jsonl --model MODEL --base-url URL -o runs/dev-judged.jsonl",
    "ifqa index bm25": "ifqa index bm25 --corpus passages.jsonl -o indexes/bm25",
    "ifqa index dense": "ifqa index dense --corpus passages.jsonl -o indexes/dense --runtime auto --quantize int8",
    "ifqa read fid": "ifqa read fid --checkpoint fid/best --run runs/dev.jsonl -o runs/fid.jsonl",
    "ifqa read iterative": "ifqa read iterative --model MODEL --base-url URL --index demo:bm25 --k 3 --max-steps 5",
    "ifqa read llm": "ifqa read llm --mode cot --demos 4 --model MODEL --base-url URL --run runs/dev.jsonl",
    "ifqa read majority": "ifqa read majority -o runs/majority.jsonl",
    "ifqa rerank": "ifqa rerank --run runs/dev.jsonl --model rerankers/ifqa/model -o runs/dev-reranked.jsonl",
    "ifqa retrieve": "ifqa retrieve --k 20 --query-mode clean -o runs/dev.jsonl",
    "ifqa serve": "ifqa serve --port 8000 --index demo:bm25",
    "ifqa train control": "ifqa train control --index demo:bm25 -o rerankers/control",
    "ifqa train fid": "torchrun --nproc_per_node 8 -m ifqa -- train fid --run runs/train.jsonl -o fid",
    "ifqa train llm": "ifqa train llm --model demo:smollm2 --run runs/train-k5.jsonl --dev-run runs/dev-k5.jsonl "
    "--passages 2 --precision bf16 -o readers/smollm2-open",
    "ifqa train reranker": "ifqa train reranker --index indexes/bm25 --dev-run runs/dev.jsonl -o rerankers/ifqa",
    "ifqa train retriever": "ifqa train retriever --index indexes/bm25 -o retrievers/ifqa",
}


def group_of(param: click.Parameter) -> str:
    """The group an option belongs to, by its name."""
    name = param.name or ""
    for group in GROUPS:
        if name in _RULES[group]:
            return group
    return next((group for prefix, group in _PREFIXES.items() if name.startswith(prefix)), OTHER)


def leaf_commands(group: click.Group, path: str = "ifqa"):
    """``(path, command)`` for every command under ``group`` (groups walked, not yielded)."""
    for name, command in sorted(subcommands(group).items()):
        if isinstance(command, click.Group):
            yield from leaf_commands(command, f"{path} {name}")
        else:
            yield f"{path} {name}", command


def option_groups(command: click.Command) -> list[dict]:
    """rich-click's ``OPTION_GROUPS`` entry of a command: its options by group, groups in ``GROUPS``' order."""
    grouped: dict[str, list[str]] = {}
    server = _RULES["Server"]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    for param in sorted(options, key=lambda p: server.index(p.name) if p.name in server else len(server)):
        grouped.setdefault(group_of(param), []).append(param.opts[0])
    return [{"name": group, "options": grouped[group]} for group in (*GROUPS, OTHER) if group in grouped]


def use_rich_help(root: click.Group, asked: list[str]) -> None:
    """Render help with rich-click from here on (called when help was asked for): the command named by
    ``asked`` (its names under ``root``) and the groups above it, so a page imports only those."""
    import rich_click
    from rich_click import RichCommand, RichGroup

    config = rich_click.rich_click
    config.SHOW_ARGUMENTS = True
    config.STYLE_OPTIONS_TABLE_BOX = "SIMPLE"
    config.MAX_WIDTH = 110
    # an option's type goes into its help, so its whole name fits the first column on an 80-column terminal
    config.OPTIONS_TABLE_COLUMN_TYPES = ["required", "opt_short", "opt_long", "help"]
    config.OPTIONS_TABLE_HELP_SECTIONS = ["metavar", "help", "deprecated", "envvar", "default", "required"]
    groups, target, path = [root], root, "ifqa"
    for name in asked:
        target, path = target.get_command(None, name), f"{path} {name}"
        if isinstance(target, click.Group):
            groups.append(target)
    if isinstance(target, click.Group):
        shown = list(leaf_commands(target, path)) if asked else []
    else:
        shown = [(path, target)]
    for path, command in shown:
        config.OPTION_GROUPS[path] = option_groups(command)
        example = EXAMPLES.get(path)
        if example and "Example:" not in (command.epilog or ""):
            command.epilog = f"Example: {example}"
        for param in command.params:  # one default style: shown wherever there is a default to show
            if isinstance(param, click.Option) and not param.is_flag and param.default not in (None, (), []):
                param.show_default = True
        _adopt(command, RichCommand)
    for group in groups:
        _adopt(group, RichGroup)


def _adopt(command: click.Command, rich: type) -> None:
    """``command`` rendered by ``rich`` from now on: its class swapped, and the attributes rich-click's
    constructors would have set given their empty values (no aliases or panels of its own)."""
    command.__class__ = _rich(command.__class__, rich)
    empty = {"panel": None, "panels": [], "aliases": [], "_help_option": None}
    if isinstance(command, click.Group):
        empty.update(_alias_mapping={}, _panel_command_mapping={})
    for name, value in empty.items():
        command.__dict__.setdefault(name, value)


@functools.cache
def _rich(cls: type, rich: type) -> type:
    """``cls`` with rich-click's help rendering (a subclass of both, made once per class)."""
    return cls if issubclass(cls, rich) else type(f"Rich{cls.__name__}", (rich, cls), {})
