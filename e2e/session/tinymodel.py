"""The embedded default's model: a tiny random-weight Llama built offline, byte for byte the
same on every machine.

The tokenizer is a byte-level BPE trained by ``tokenizers`` on a corpus generated here from a
fixed word list and seed; the weights come from numpy's PCG64 generator with a fixed seed and
are written with safetensors. No torch, no transformers, no hub.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np

from e2e.errors import BuildError
from e2e.paths import atomic_dir, e2e_home, tree_hash

__all__ = ["TINY_LLAMA", "TinyLlamaSpec", "build_tiny_llama", "tiny_llama_dir", "model_path",
           "resolve_model"]

SPECIALS = ["<s>", "</s>", "<unk>"]

# Words of grade-school arithmetic problems and everyday English: the corpus the BPE learns
# from. Changing this list changes the tokenizer (and the model's hash in every run.json).
_WORDS = """
the a an and or but if then so of to in on at by for with from into over under after before
is are was were be been has have had do does did will would can could should may might must
he she it they we you i his her its their our your my him them us me who what which when where
how many much more less most least each every all some any no not only also than as per
total number left remaining twice half third quarter times plus minus equal equals cost costs
price dollars cents money pay paid buy bought sell sold spend spent earn earned save saved
day days week weeks month months year years hour hours minute minutes second seconds
apple apples orange oranges book books pencil pencils cookie cookies candy candies cake cakes
car cars bus train ticket tickets box boxes bag bags bottle bottles cup cups egg eggs
dog dogs cat cats bird birds fish chicken chickens cow cows horse horses sheep
man woman boy girl friend friends mother father brother sister family class student students
teacher school store shop farm garden house room table chair page pages game games
john mary james sarah tom anna peter lisa mark emma david sophia michael olivia
first second third fourth fifth one two three four five six seven eight nine ten eleven
twelve twenty thirty forty fifty hundred thousand million percent percentage rate
how much does did will answer question problem step solve find calculate therefore
mile miles meter meters foot feet inch inches pound pounds gallon gallons liter liters
water milk juice bread pizza sandwich lunch dinner breakfast morning afternoon evening night
red blue green yellow white black big small large long short tall new old young
walk walks walked run runs ran drive drives drove read reads write writes wrote make makes made
give gives gave take takes took get gets got put puts keep keeps kept need needs want wants
""".split()


class TinyLlamaSpec:
    """The shape of the tiny model. The CPU attention needs head_dim >= 32 (head_dim 16 fails
    at the first request: ``Unsupported CPU attention configuration``)."""

    name = "tiny-llama"
    vocab_target = 4096
    hidden = 128
    intermediate = 256
    heads = 2
    kv_heads = 1
    layers = 2
    max_positions = 4096
    seed = 1234
    corpus_sentences = 40000

    @classmethod
    def fingerprint(cls) -> str:
        parts = [cls.name, cls.vocab_target, cls.hidden, cls.intermediate, cls.heads,
                 cls.kv_heads, cls.layers, cls.max_positions, cls.seed, cls.corpus_sentences,
                 " ".join(_WORDS), "v1"]
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


TINY_LLAMA = "e2e:tiny-llama"


def _corpus(spec: type[TinyLlamaSpec]) -> list[str]:
    rng = random.Random(spec.seed)
    lines = []
    for _ in range(spec.corpus_sentences):
        words = []
        for _ in range(rng.randint(6, 18)):
            if rng.random() < 0.2:
                words.append(str(rng.randint(0, 4999)))
            else:
                word = rng.choice(_WORDS)
                words.append(word.capitalize() if rng.random() < 0.1 else word)
        lines.append(" ".join(words) + rng.choice([".", "?", ",", "!", ":", " ="]))
    return lines


def _train_tokenizer(spec: type[TinyLlamaSpec], out: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_target,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(spec), trainer=trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": spec.max_positions,
        "clean_up_tokenization_spaces": False,
    }, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, indent=2) + "\n")
    return tokenizer.get_vocab_size()


def _write_weights(spec: type[TinyLlamaSpec], vocab: int, out: Path) -> None:
    from safetensors.numpy import save_file

    rng = np.random.Generator(np.random.PCG64(spec.seed))
    head_dim = spec.hidden // spec.heads

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    tensors: dict[str, np.ndarray] = {"model.embed_tokens.weight": normal(vocab, spec.hidden)}
    for i in range(spec.layers):
        p = f"model.layers.{i}."
        tensors[p + "self_attn.q_proj.weight"] = normal(spec.heads * head_dim, spec.hidden)
        tensors[p + "self_attn.k_proj.weight"] = normal(spec.kv_heads * head_dim, spec.hidden)
        tensors[p + "self_attn.v_proj.weight"] = normal(spec.kv_heads * head_dim, spec.hidden)
        tensors[p + "self_attn.o_proj.weight"] = normal(spec.hidden, spec.heads * head_dim)
        tensors[p + "mlp.gate_proj.weight"] = normal(spec.intermediate, spec.hidden)
        tensors[p + "mlp.up_proj.weight"] = normal(spec.intermediate, spec.hidden)
        tensors[p + "mlp.down_proj.weight"] = normal(spec.hidden, spec.intermediate)
        tensors[p + "input_layernorm.weight"] = np.ones(spec.hidden, dtype=np.float32)
        tensors[p + "post_attention_layernorm.weight"] = np.ones(spec.hidden, dtype=np.float32)
    tensors["model.norm.weight"] = np.ones(spec.hidden, dtype=np.float32)
    tensors["lm_head.weight"] = normal(vocab, spec.hidden)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": spec.hidden,
        "intermediate_size": spec.intermediate,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": head_dim,
        "num_hidden_layers": spec.layers,
        "max_position_embeddings": spec.max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": SPECIALS.index("<s>"),
        "eos_token_id": SPECIALS.index("</s>"),
        "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def tiny_llama_dir(root: Path | None = None, spec: type[TinyLlamaSpec] = TinyLlamaSpec) -> Path:
    root = Path(root) if root is not None else e2e_home() / "models"
    return root / f"{spec.name}-{spec.fingerprint()}"


def build_tiny_llama(root: Path | None = None, spec: type[TinyLlamaSpec] = TinyLlamaSpec) -> Path:
    """Build (once) and return the tiny model's folder under ``$E2E_HOME/models``."""
    final = tiny_llama_dir(root, spec)
    root = final.parent
    if (final / "config.json").exists():
        return final
    try:
        with atomic_dir(final) as tmp:
            vocab = _train_tokenizer(spec, tmp)
            _write_weights(spec, vocab, tmp)
            (tmp / "e2e-model.json").write_text(json.dumps(
                {"built_by": "e2e", "spec": spec.fingerprint(), "vocab": vocab}) + "\n")
    except FileExistsError:  # built concurrently by another e2e
        pass
    except OSError as exc:
        if not (final / "config.json").exists():
            raise BuildError(f"cannot build the tiny model under {root}: {exc}") from exc
    return final


def special_token_ids() -> list[int]:
    return list(range(len(SPECIALS)))


def model_path(model: str) -> str:
    """What ``--model`` gets, without building anything."""
    if model == TINY_LLAMA:
        return str(tiny_llama_dir())
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else model


def resolve_model(model: str) -> tuple[str, str | None]:
    """Map a config's ``server.model`` to what ``--model`` gets, and a content hash when the
    model is a local folder (recorded in run.json)."""
    if model == TINY_LLAMA:
        path = build_tiny_llama()
        return str(path), tree_hash(path)
    if model.startswith("e2e:"):
        raise BuildError(f"unknown built-in model {model!r}; the only one is {TINY_LLAMA!r}")
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve()), None
    return model, None
