"""A trained reader's GGUF form: a LoRA adapter llama.cpp applies to the base file it was trained on, merged
alike by ``--backend hf``, and every mismatch between the adapter, its card and its base refused in one line
before any model answers."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from ifqa.datasets.demo import load_demo
from ifqa.errors import IfqaError
from ifqa.llm import gguf_forms
from ifqa.llm.local_models import whole_digest
from ifqa.llm.trained import KIND, base_digest, trained_reader
from tests.llm.test_llamacpp import SMOLLM2, needs_model
from tests.readers.tiny_models import tiny_llama

READER = {"mode": "open", "passages": 1, "demos": 0, "selection": "random", "template": None, "prompts_dir": None}
READER |= {"max_prompt_tokens": 256, "seed": 0}


def random_pairs(shapes: dict[str, tuple[int, int]], rank: int, scale: float, seed: int = 0) -> dict:
    """LoRA factors for layers of the given (outputs, inputs), large enough to change what a model says."""
    generator = np.random.default_rng(seed)
    return {
        name: (generator.normal(0, 1, (rank, n_in)).astype(np.float32), generator.normal(0, scale, (n_out, rank)))
        for name, (n_out, n_in) in shapes.items()
    }


SMOLLM2_LAYERS = {  # SmolLM2-135M's shapes: a query (interleaved rows), a key (3 kv heads) and an MLP layer
    "model.layers.0.self_attn.q_proj": (576, 576),
    "model.layers.1.self_attn.k_proj": (192, 576),
    "model.layers.2.mlp.down_proj": (576, 1536),
}


def trained_folder(folder: Path, base: Path, digest: str, pairs: dict, alpha: float = 4.0) -> Path:
    """A folder as ifqa train llm writes one for a LoRA run on a GGUF base."""
    folder.mkdir(parents=True)
    gguf_forms.write_adapter(folder / gguf_forms.ADAPTER, base, digest, alpha, pairs)
    card = {"kind": KIND, "base_model": str(base), "base_digest": digest, "reader": READER, "steps": 1}
    card["adapter"] = {"file": gguf_forms.ADAPTER, "digest": whole_digest(folder / gguf_forms.ADAPTER), "alpha": alpha}
    (folder / "ifqa_card.json").write_text(json.dumps(card))
    return folder


def tiny_base(path: Path, model, weights: bool = False) -> Path:
    """A GGUF file of a tiny transformers llama's shapes and metadata (what an adapter is written against):
    its linear layers' weights in llama.cpp's row order with ``weights``, else zeros."""
    import gguf

    config = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    heads = (config.num_attention_heads, config.num_key_value_heads)
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and names.get_name(name):
            tensor = f"{names.get_name(name)}.weight"
            values = module.weight.detach().numpy() if weights else np.zeros(tuple(module.weight.shape), np.float32)
            writer.add_tensor(tensor, gguf_forms._reordered(tensor, values, "llama", heads).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_rows_are_put_in_the_order_transformers_gguf_loader_undoes():
    """The query/key row order is pinned to transformers' own reader of GGUF llama files: what
    ``interleave`` writes, its loader takes back to the original rows."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rows = np.arange(12 * 4 * 3, dtype=np.float32).reshape(12 * 4, 3)
    for heads, kv in ((4, 4), (4, 2)):
        undone = LlamaTensorProcessor({})._reverse_permute_weights(gguf_forms.interleave(rows[: 12 * kv], kv), 4, kv)
        assert np.array_equal(undone, rows[: 12 * kv])
        assert np.array_equal(gguf_forms.deinterleave(gguf_forms.interleave(rows, heads), heads), rows)


@pytest.mark.numerics
def test_a_merged_adapter_is_the_peft_model_it_was_written_from(tmp_path):
    """Written from a peft model and merged back into its base, the adapter gives the peft model's
    logits: equal up to the float16 its factors are stored in (a relative 2^-11 on each factor)."""
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from ifqa.training.llm import lora_pairs

    folder = tiny_llama(tmp_path / "llama")
    torch.manual_seed(0)
    adapted = peft.get_peft_model(
        AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0),
    ).eval()
    for name, parameter in adapted.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0, 0.5)
    base = tiny_base(tmp_path / "base.gguf", AutoModelForCausalLM.from_pretrained(str(folder)))
    gguf_forms.write_adapter(tmp_path / "adapter.gguf", base, "d", 8.0, lora_pairs(adapted))
    merged = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    assert gguf_forms.merge_adapter(merged, tmp_path / "adapter.gguf") == 2 * 7  # every linear layer of 2 blocks
    ids = torch.tensor([[3, 17, 42, 99, 7, 250, 18]])
    with torch.no_grad():
        expected, got = adapted(input_ids=ids).logits, merged(input_ids=ids).logits
        plain = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)(input_ids=ids).logits
    assert (expected - plain).abs().max() > 0.1  # the adapter changes what the model says
    assert torch.allclose(got, expected, atol=4 * 2**-11 * float(expected.abs().max()), rtol=0)


@pytest.mark.numerics
def test_the_merged_copy_is_the_base_plus_each_update_as_backend_hf_merges_it(tmp_path):
    """``write_merged`` (numpy, in llama.cpp's row order) and ``merge_adapter`` (torch, in transformers')
    add the same updates to the same weights: every merged tensor, its rows taken back to transformers'
    order, is the hf merge rounded once to float16 (at most one float16 step apart: the two sums may round
    float32 differently), and the file says nothing else than its base."""
    import gguf
    import peft
    from transformers import AutoModelForCausalLM

    from ifqa.training.llm import lora_pairs

    folder = tiny_llama(tmp_path / "llama")
    torch.manual_seed(0)
    adapted = peft.get_peft_model(
        AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0),
    )
    for name, parameter in adapted.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0, 0.5)
    base = tiny_base(tmp_path / "base.gguf", AutoModelForCausalLM.from_pretrained(str(folder)), weights=True)
    gguf_forms.write_adapter(tmp_path / "adapter.gguf", base, "d", 8.0, lora_pairs(adapted))
    gguf_forms.write_merged(tmp_path / "merged.gguf", base, tmp_path / "adapter.gguf")
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    gguf_forms.merge_adapter(hf, tmp_path / "adapter.gguf")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, hf.config.num_hidden_layers)
    expected = {
        f"{names.get_name(n)}.weight": m.weight.detach().numpy() for n, m in hf.named_modules() if names.get_name(n)
    }
    written = gguf.GGUFReader(str(tmp_path / "merged.gguf"))
    assert {t.name for t in written.tensors} == {t.name for t in gguf.GGUFReader(str(base)).tensors}
    for tensor in written.tensors:
        got = gguf_forms._reordered(tensor.name, np.asarray(tensor.data, np.float32), "llama", (4, 2), back=True)
        want = expected[tensor.name]
        assert tensor.tensor_type == gguf.GGMLQuantizationType.F16
        step = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0**-14))) - 10)  # float16's spacing at each value
        assert np.all(np.abs(got - want) <= step), tensor.name


def _adapted_and_base(tmp_path, monkeypatch) -> tuple[Path, list[str], list[str], list[str]]:
    """A random adapter for SmolLM2 on llama.cpp: (its folder, the prompts, what the adapted model and the
    base say)."""
    from ifqa.llm.llamacpp_backend import LlamaCppBackend
    from ifqa.llm.protocol import BackendOptions, GenerationParams

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    pairs = random_pairs(SMOLLM2_LAYERS, rank=2, scale=0.05)
    folder = trained_folder(tmp_path / "reader", SMOLLM2, base_digest(str(SMOLLM2)), pairs)
    prompts = [e.question for e in load_demo("dev")[:4]]
    params = GenerationParams(max_tokens=6, temperature=0.0)
    options = BackendOptions(model_threads=2, batch_size=4, gguf_weights="f16")
    adapted = [c.text for c in LlamaCppBackend(str(folder), options).complete(prompts, params)]
    base = [c.text for c in LlamaCppBackend(str(SMOLLM2), options).complete(prompts, params)]
    return folder, prompts, adapted, base


@needs_model
def test_llamacpp_applies_a_trained_readers_adapter(tmp_path, monkeypatch):
    """The adapter file is applied: the adapted model says something else than its base."""
    _, _, adapted, base = _adapted_and_base(tmp_path, monkeypatch)
    assert adapted != base


@needs_model
@pytest.mark.heavy  # transformers dequantizes the 135M base (a minute here); the merge: test_a_merged_adapter_is_the_peft_model...
def test_an_adapter_reads_alike_on_llamacpp_and_hf(tmp_path, monkeypatch):
    """The same adapter file, applied by llama.cpp to the base file and merged by --backend hf into the
    dequantized base, makes both say the same."""
    from ifqa.llm.hf_backend import HFBackend
    from ifqa.llm.protocol import GenerationParams

    folder, prompts, adapted, _ = _adapted_and_base(tmp_path, monkeypatch)
    params = GenerationParams(max_tokens=6, temperature=0.0)
    merged = [c.text for c in HFBackend(str(folder), "cpu", 4, dtype="float32").complete(prompts, params)]
    assert sum(a == m for a, m in zip(adapted, merged)) >= 3, (adapted, merged)


@needs_model
def test_a_converted_model_is_the_base_file_when_its_weights_are_the_bases(tmp_path, monkeypatch):
    """``write_model`` from the base file's own weights, taken to transformers' order and back: every
    tensor equals the base's F16 copy that llama.cpp makes itself, and llama.cpp reads the two alike."""
    import gguf

    from ifqa.llm.llamacpp_backend import LlamaCppBackend
    from ifqa.llm.local_models import f16_copy
    from ifqa.llm.protocol import BackendOptions, GenerationParams

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    reader = gguf.GGUFReader(str(SMOLLM2))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 30)
    hf_names = {f"{names.get_name(m)}.weight": f"{m}.weight" for m in _hf_modules(30)}
    weights = {}
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(
            [int(n) for n in reversed(tensor.shape)]
        )
        values = gguf_forms._reordered(tensor.name, values, "llama", (9, 3), back=True)
        weights[hf_names[tensor.name]] = torch.from_numpy(values.copy())
    converted = tmp_path / "converted.gguf"
    gguf_forms.write_model(converted, SMOLLM2, weights)
    copy = gguf.GGUFReader(str(f16_copy(SMOLLM2)))
    ours = {t.name: t for t in gguf.GGUFReader(str(converted)).tensors}
    assert set(ours) == {t.name for t in copy.tensors}
    for tensor in copy.tensors:
        assert np.array_equal(np.asarray(ours[tensor.name].data), np.asarray(tensor.data)), tensor.name
    prompts, params = [e.question for e in load_demo("dev")[:2]], GenerationParams(max_tokens=6, temperature=0.0)
    options = BackendOptions(model_threads=2, batch_size=2)
    read = [[c.text for c in LlamaCppBackend(str(m), options).complete(prompts, params)] for m in (converted, SMOLLM2)]
    assert read[0] == read[1]


def _hf_modules(blocks: int) -> list[str]:
    """The transformers names of a llama model's weights (SmolLM2's: no separate output head)."""
    layer = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj"]
    layer += ["mlp.up_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm"]
    return ["model.embed_tokens", "model.norm"] + [f"model.layers.{i}.{m}" for i in range(blocks) for m in layer]


@needs_model
@pytest.mark.heavy  # the 135M model dequantized, saved and converted (over a minute): the test above covers write_model
def test_a_full_fine_tune_is_converted_once_and_reads_as_on_hf(tmp_path, monkeypatch):
    """A transformers folder fine-tuned from a GGUF base reads on llama.cpp through a GGUF conversion made
    once in the cache from the base file's metadata (a query weight changed: its rows go in llama.cpp's
    order), and says what --backend hf says of the same folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ifqa.llm.hf_backend import HFBackend
    from ifqa.llm.llamacpp_backend import LlamaCppBackend
    from ifqa.llm.protocol import BackendOptions, GenerationParams

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    source = {"pretrained_model_name_or_path": str(SMOLLM2.parent), "gguf_file": SMOLLM2.name}
    model = AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32)
    model.hf_quantizer, model.is_quantized = None, False
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # each query row scaled on its own: rows in the wrong order would attend elsewhere
        for layer in model.model.layers[:6]:
            layer.self_attn.q_proj.weight.mul_(1 + 2 * torch.rand(576, 1, generator=generator))
    folder = tmp_path / "full"
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(**source).save_pretrained(folder)
    card = {"kind": KIND, "base_model": "demo:smollm2", "base_digest": base_digest("demo:smollm2"), "reader": READER}
    (folder / "ifqa_card.json").write_text(json.dumps(card))
    prompts = [e.question for e in load_demo("dev")[:4]]
    params = GenerationParams(max_tokens=6, temperature=0.0)
    options = BackendOptions(model_threads=2, batch_size=4)
    converted = [c.text for c in LlamaCppBackend(str(folder), options).complete(prompts, params)]
    base = [c.text for c in LlamaCppBackend("demo:smollm2", options).complete(prompts, params)]
    merged = [c.text for c in HFBackend(str(folder), "cpu", 4, dtype="float32").complete(prompts, params)]
    assert converted != base
    assert sum(a == m for a, m in zip(converted, merged)) >= 3, (converted, merged)
    assert len(list((tmp_path / "cache" / "gguf").glob("trained-*.gguf"))) == 1
    LlamaCppBackend(str(folder), options)  # found again, not made again
    assert len(list((tmp_path / "cache" / "gguf").glob("*.gguf"))) == 2  # the conversion and the base's F16 copy


@needs_model
def test_every_mismatch_of_adapter_card_and_base_is_one_line(cli, tmp_path):
    """Another base, a damaged or cut adapter, another architecture's adapter, a card cut short or lacking
    a reader setting, and a transformers-only folder on llama.cpp: one line each, exit 1, nothing written."""
    import gguf

    digest = base_digest(str(SMOLLM2))
    pairs = random_pairs(SMOLLM2_LAYERS, rank=2, scale=0.01)
    good = trained_folder(tmp_path / "good", SMOLLM2, digest, pairs)
    cases = {}

    def case(name: str, expected: str, edit) -> None:
        folder = tmp_path / name
        folder.mkdir()
        for file in good.iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
        edit(folder)
        cases[name] = (folder, expected)

    def card(folder: Path, **changes) -> None:
        path = folder / "ifqa_card.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))

    def flip(folder: Path) -> None:
        data = bytearray((folder / gguf_forms.ADAPTER).read_bytes())
        data[-100] ^= 0xFF
        (folder / gguf_forms.ADAPTER).write_bytes(bytes(data))

    def other_architecture(folder: Path) -> None:
        writer = gguf.GGUFWriter(str(folder / gguf_forms.ADAPTER), "qwen2")
        writer.add_type("adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_string(gguf_forms.BASE_DIGEST, digest)
        writer.add_tensor("blk.0.attn_q.weight.lora_a", np.zeros((2, 576), np.float16))
        writer.add_tensor("blk.0.attn_q.weight.lora_b", np.zeros((576, 2), np.float16))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        card(folder, adapter={"file": gguf_forms.ADAPTER, "digest": whole_digest(folder / gguf_forms.ADAPTER)})

    case("another-base", "digests to", lambda f: card(f, base_digest="0123456789abcdef"))
    case("flipped", "damaged", flip)
    case("cut", "damaged", lambda f: (f / gguf_forms.ADAPTER).write_bytes((f / gguf_forms.ADAPTER).read_bytes()[:4000]))
    case("qwen2", "qwen2", other_architecture)
    case("card-cut", "not a whole JSON card", lambda f: (f / "ifqa_card.json").write_text('{"kind": "llm-rea'))
    case("no-mode", "reader.mode", lambda f: card(f, reader={k: v for k, v in READER.items() if k != "mode"}))
    case(
        "transformers",
        "no GGUF form",
        lambda f: ((f / gguf_forms.ADAPTER).unlink(), (f / "config.json").write_text("{}"), card(f, base_model="x/y")),
    )
    question = {"qid": "1", "question": "If the sea rose, what would flood?", "answers": ["the coast"]}
    run = tmp_path / "run.jsonl"
    run.write_text(json.dumps({**question, "ctxs": [{"id": "p", "title": "Sea", "text": "The sea is wide."}]}) + "\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"idx": "1", **{k: question[k] for k in ("question", "answers")}}) + "\n")
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    for name, (folder, expected) in cases.items():
        out = tmp_path / f"{name}.jsonl"
        result = cli("read", "llm", "--model", folder, "--backend", "llamacpp", "--run", run, "--questions", questions,
                     "-o", out, "--no-progress", env=env)  # fmt: skip
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 1 and len(lines) == 1 and expected in lines[0], (name, result.stderr)
        assert not out.exists()
    with pytest.raises(IfqaError, match="digests to"):  # --backend hf checks the same before it loads a weight
        from ifqa.llm.hf_backend import HFBackend

        HFBackend(str(cases["another-base"][0]), "cpu")


def test_a_demo_reader_that_is_not_installed_is_one_line(monkeypatch, tmp_path):
    import ifqa.llm.trained as trained

    monkeypatch.setattr(trained, "demo_reader_folder", lambda model: tmp_path / "absent")
    with pytest.raises(IfqaError, match="not in this installation"):
        trained_reader("demo:smollm2-ifqa")


@needs_model
def test_the_shipped_reader_is_whole_and_says_what_it_was_trained_on(monkeypatch, tmp_path):
    """``demo:smollm2-ifqa``: its adapter the bytes its card records, written for the base the install
    carries; the card says where the weights come from, how to remake them and what they score."""
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    shipped = trained_reader("demo:smollm2-ifqa")
    base, adapter = shipped.checked_adapter()
    assert base == SMOLLM2 and adapter.stat().st_size <= 12 * 2**20  # the bound on the package
    facts = shipped.card["shipped"]
    assert "no IfQA text" in facts["trained_on"] and facts["reproduce"].startswith("ifqa train llm ")
    assert facts["dev"]["n"] >= 200 and 0 < facts["dev"]["em"] <= 100 and len(facts["commit"]) == 40  # IfQA dev, 200+


@needs_model
def test_a_trained_readers_default_output_is_named_by_the_mode_it_reads_in(tmp_path):
    """Its card's mode, not the reader's default, names the predictions file a read writes by default."""
    from ifqa.readers.llm.config import LLMReaderConfig
    from ifqa.registry import READERS

    folder = trained_folder(
        tmp_path / "reader", SMOLLM2, base_digest(str(SMOLLM2)), random_pairs(SMOLLM2_LAYERS, 1, 0.01)
    )
    name = READERS.get("llm").settled(LLMReaderConfig(model=str(folder))).output_name("demo-dev")
    assert "-llm-open-" in name, name


def test_a_trained_readers_card_is_followed_once(tmp_path, caplog):
    """Settling takes the card's prompt settings where an option is left at its default and warns once
    for one given otherwise; the settled config is settled already (the read, the reader and the output
    name each settle what they are given: the same settings, the warning said once)."""
    from ifqa.readers.llm.config import LLMReaderConfig
    from ifqa.registry import READERS

    folder = trained_folder(
        tmp_path / "reader", SMOLLM2, base_digest(str(SMOLLM2)), random_pairs(SMOLLM2_LAYERS, 1, 0.01)
    )
    entry = READERS.get("llm")
    with caplog.at_level("WARNING"):
        settled = entry.settled(LLMReaderConfig(model=str(folder), demos=3))
        again = entry.settled(settled)
    assert again == settled and settled.mode == "open" and settled.demos == 3
    assert [r.getMessage() for r in caplog.records if "was trained with" in r.getMessage()] == [
        f"--demos 3: {folder} was trained with 0"
    ]


def test_an_option_given_at_its_default_is_never_replaced_by_the_card(tmp_path, caplog):
    """Every reader setting a card holds, given at the reader's default (``--passages 5``, ``--mode qa``), is
    read as given, as one given otherwise is: ``from_options`` (which builds every command's, YAML row's and
    API call's config) records it, settling keeps it with the card's warning, and the command written back
    says it. Only the options left out take the card's values."""
    from ifqa.configs import field_default, flag, from_options, to_args
    from ifqa.llm.trained import READER_SETTINGS
    from ifqa.readers.llm.config import LLMReaderConfig
    from ifqa.registry import READERS

    fields = {f.name: f for f in dataclasses.fields(LLMReaderConfig)}
    defaults = {name: field_default(fields[name]) for name in READER_SETTINGS}
    givable = sorted(name for name, value in defaults.items() if value is not None)  # None: left out, never given
    assert {"mode", "passages", "demos", "selection", "seed"} <= set(givable)
    card = {**READER, "selection": "similar", "seed": 7}  # every givable setting away from the reader's default
    folder = trained_folder(
        tmp_path / "reader", SMOLLM2, base_digest(str(SMOLLM2)), random_pairs(SMOLLM2_LAYERS, 1, 0.01)
    )
    card_file = folder / "ifqa_card.json"
    card_file.write_text(json.dumps({**json.loads(card_file.read_text()), "reader": card}))
    entry = READERS.get("llm")
    for name in givable:
        assert card[name] != defaults[name], name
        caplog.clear()
        with caplog.at_level("WARNING"):
            settled = entry.settled(from_options(LLMReaderConfig, {"model": str(folder), name: defaults[name]}))
        assert getattr(settled, name) == defaults[name], name
        assert f"{flag(fields[name])} {defaults[name]}" in " ".join(to_args(settled)), name
        assert [r.getMessage() for r in caplog.records if "was trained with" in r.getMessage()], name
        others = {other: getattr(settled, other) for other in READER_SETTINGS if other != name}
        assert others == {other: card[other] for other in others}, name
    left_out = entry.settled(from_options(LLMReaderConfig, {"model": str(folder), "passages": None}))
    assert {name: getattr(left_out, name) for name in READER_SETTINGS} == card


def test_a_bases_facts_are_read_once_per_file(tmp_path, monkeypatch):
    """What an adapter is written and checked against (architecture, counts, tensor shapes) is read from the
    base file once and kept under the digest of its bytes: the next write or check opens no reader on the
    base, a damaged record is read again rather than trusted, and a changed base is another file."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    def llama(layers: int):
        shape = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)
        return LlamaForCausalLM(LlamaConfig(num_hidden_layers=layers, **shape))

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    base = tiny_base(tmp_path / "base.gguf", llama(2))
    opened, real = [], gguf.GGUFReader
    monkeypatch.setattr(gguf, "GGUFReader", lambda path, *a, **k: opened.append(Path(path).name) or real(path, *a, **k))
    pairs = {"model.layers.1.self_attn.q_proj": (np.ones((2, 32), np.float32), np.ones((32, 2), np.float32))}
    adapter = tmp_path / "adapter.gguf"
    gguf_forms.write_adapter(adapter, base, "d", 4.0, pairs)
    gguf_forms.check_adapter(adapter, base, "d")
    gguf_forms.check_base(base)
    assert opened == ["base.gguf", "adapter.gguf"]
    [record] = (tmp_path / "cache" / "gguf").glob("*.facts.json")
    facts = json.loads(record.read_text())
    assert facts["blocks"] == 2 and facts["heads"] == [4, 2] and facts["shapes"]["blk.1.attn_q.weight"] == [32, 32]
    record.write_text('{"architecture": "llama"}')
    gguf_forms.check_adapter(adapter, base, "d")
    assert opened.count("base.gguf") == 2 and json.loads(record.read_text()) == facts
    tiny_base(base, llama(1))
    with pytest.raises(IfqaError, match="blk.1.attn_q.weight.lora_a .* fits no weight"):
        gguf_forms.check_adapter(adapter, base, "d")  # the one-block base read afresh: no block 1 to adapt
    assert opened.count("base.gguf") == 3
