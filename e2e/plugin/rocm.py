"""ROCm mode: patch vLLM's DeepSeek-V4/V4.1 ROCm sparse SWA metadata builders.

The class patched, in ``vllm.models.deepseek_v4.amd.rocm`` and
``vllm.models.deepseek_v41.amd.rocm``, is ``DeepseekV4ROCMAiterSparseSWAMetadataBuilder``.
In vLLM 0.32 (the wheel e2e pins; tests/test_rocm_real.py runs the real classes) its
``build()`` packs the decode SWA indices with ``build_ragged_indices_from_dense`` into fresh
scratch and copies them into ``decode_swa_ragged_indices_buffer`` /
``decode_swa_ragged_indptr_buffer`` with ``_copy_ragged_to_graph_buffers``; its
``supports_draft_decode_metadata_update`` is False.

- ``main``: untouched (only ``__init__`` is wrapped, to log the applied line).
- ``pr`` (packing inplace|fused|torch, draft_update true): ``build()`` packs with e2e's path
  straight into the two graph buffers; ``update_draft_decode_metadata()`` is the parent's
  plus e2e's ``refresh_decode_swa_ragged`` into the same buffers; the flag is True.
- ``flag-off``: as ``pr`` with the flag False.
- ``mono`` (packing meta): decode batches that ``e2e.kernels.swa_meta.covers`` (up to 32
  rows) are built by one launch of ``swa_decode_meta`` (validity, token → request map, the
  dense window rows and lengths, zero lengths after the batch, the ragged rows and indptr);
  every other batch takes ``pr``'s path. The draft refresh packs with the fused path.

Everything else ``build()`` does (the parent's build, the aiter prefill ragged indices) is
kept; the returned metadata holds views of the graph buffers exactly as
``_copy_ragged_to_graph_buffers`` returns them (``indices[:max(N * W, 1)]``, on gfx950
narrowed to the scratch's ``N * W`` as vLLM narrows it, and ``indptr[:N + 1]``).
"""

from __future__ import annotations

import dataclasses
import sys
from types import ModuleType

from e2e.kernels import PATHS
from e2e.kernels import refresh_decode_swa_ragged as _refresh_triton
from e2e.kernels import swa_meta
from e2e.arm_settings import PluginSettings

__all__ = ["ROCM_MODULES", "BUILDER", "patch_rocm_module", "refresh_decode_swa_ragged"]

ROCM_MODULES = ("vllm.models.deepseek_v4.amd.rocm", "vllm.models.deepseek_v41.amd.rocm")
BUILDER = "DeepseekV4ROCMAiterSparseSWAMetadataBuilder"
_METADATA = "DeepseekV4ROCMAiterSparseSWAMetadata"


def refresh_decode_swa_ragged(indices, lengths, indices_out, indptr_out, *, path: str) -> None:
    """e2e's draft refresh with the arm's path (the Triton refresh for inplace/fused; meta
    refreshes with the fused path)."""
    if path == "meta":
        path = "fused"
    if path in ("inplace", "fused"):
        _refresh_triton(indices, lengths, indices_out, indptr_out, path=path)
    else:
        PATHS[path](indices, lengths, indices_out, indptr_out)


def describe(settings: PluginSettings) -> str:
    if settings.packing == "main":
        return ("mode=rocm packing=main: builders untouched (build_ragged_indices_from_dense "
                "into scratch + _copy_ragged_to_graph_buffers); "
                "supports_draft_decode_metadata_update unchanged (False)")
    if settings.packing == "meta":
        return (f"mode=rocm packing=meta: build() takes one swa_decode_meta launch for decode "
                f"batches of 1..{swa_meta.MAX_ROWS} rows (validity, token map, window rows and "
                f"lengths, ragged rows straight into decode_swa_ragged_indices_buffer/"
                f"decode_swa_ragged_indptr_buffer), others pack with e2e's inplace path "
                f"(no scratch, no copy); update_draft_decode_metadata = parent + e2e "
                f"refresh_decode_swa_ragged (fused); "
                f"supports_draft_decode_metadata_update={settings.draft_update}")
    return (f"mode=rocm packing={settings.packing}: build() packs with e2e's "
            f"{settings.packing} path straight into decode_swa_ragged_indices_buffer/"
            f"decode_swa_ragged_indptr_buffer (no scratch, no copy); "
            f"update_draft_decode_metadata = parent + e2e refresh_decode_swa_ragged; "
            f"supports_draft_decode_metadata_update={settings.draft_update}")


def patch_rocm_module(module: ModuleType, settings: PluginSettings, applied) -> bool:
    """Patch ``module``'s SWA builder for ``settings``. ``applied(where, text)`` is called
    once per process when a patched builder is first constructed (only workers build
    attention metadata). Returns False if the module lacks the builder or was patched."""
    cls = getattr(module, BUILDER, None)
    if cls is None or cls.__dict__.get("_e2e_patched"):
        return False
    short = module.__name__.split(".")[-3]  # deepseek_v4 | deepseek_v41
    text = describe(settings)
    original_init = cls.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not cls.__dict__.get("_e2e_announced"):
            cls._e2e_announced = True
            applied(f"{short} {BUILDER}", text)

    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    cls.__init__ = __init__
    cls._e2e_patched = True
    if settings.packing == "main":
        return True

    parent = cls.__mro__[1]
    metadata_cls = getattr(module, _METADATA)
    field_names = {f.name for f in dataclasses.fields(metadata_cls)}
    pack_name = "inplace" if settings.packing == "meta" else settings.packing
    one_launch = _one_launch_build(cls) if settings.packing == "meta" else None

    def graph_views(self, num_rows: int, width: int):
        """The views ``_copy_ragged_to_graph_buffers`` returns (its scratch is N * W)."""
        entries = max(num_rows * width, 1)
        ragged = self.decode_swa_ragged_indices_buffer[:entries]
        if getattr(module, "_ON_GFX950", False):
            ragged = ragged[: max(num_rows * width, 1)]  # vLLM's gfx950 narrowing
        return ragged, self.decode_swa_ragged_indptr_buffer[: num_rows + 1]

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False, **kwargs):
        if one_launch is not None:
            built = one_launch(self, common_attn_metadata, kwargs.get("replay_start"))
            if built is not None:
                base, width = built
                ragged_indices, ragged_indptr = graph_views(self, base.num_decode_tokens, width)
                extra = ({"prefill_swa_ragged_indices": None, "prefill_swa_ragged_indptr": None}
                         if "prefill_swa_ragged_indices" in field_names else {})
                return metadata_cls(**vars(base), decode_swa_ragged_indices=ragged_indices,
                                    decode_swa_ragged_indptr=ragged_indptr, **extra)
        base = parent.build(self, common_prefix_len=common_prefix_len,
                            common_attn_metadata=common_attn_metadata,
                            fast_build=fast_build, **kwargs)
        extra = {}
        if "prefill_swa_ragged_indices" in field_names:
            prefill_indices = prefill_indptr = None
            if (getattr(self, "_use_aiter_sparse_mla", False)
                    and base.num_prefill_tokens > 0
                    and base.prefill_swa_indices is not None
                    and base.prefill_swa_lens is not None):
                prefill_indices, prefill_indptr = module.build_ragged_indices_from_dense(
                    base.prefill_swa_indices.reshape(base.num_prefill_tokens, -1),
                    base.prefill_swa_lens)
            extra = {"prefill_swa_ragged_indices": prefill_indices,
                     "prefill_swa_ragged_indptr": prefill_indptr}
        ragged_indices = ragged_indptr = None
        num_rows = base.num_decode_tokens
        if num_rows > 0 and base.decode_swa_indices is not None \
                and base.decode_swa_lens is not None:
            dense = base.decode_swa_indices.reshape(num_rows, -1)
            PATHS[pack_name](dense, base.decode_swa_lens,
                             self.decode_swa_ragged_indices_buffer,
                             self.decode_swa_ragged_indptr_buffer)
            ragged_indices, ragged_indptr = graph_views(self, num_rows, dense.shape[1])
        return metadata_cls(**vars(base), decode_swa_ragged_indices=ragged_indices,
                            decode_swa_ragged_indptr=ragged_indptr, **extra)

    original_update = cls.update_draft_decode_metadata

    def update_draft_decode_metadata(self, metadata) -> None:
        original_update(self, metadata)
        num_rows = metadata.num_decode_tokens
        if num_rows == 0 or metadata.decode_swa_indices is None \
                or metadata.decode_swa_lens is None:
            return
        refresh_decode_swa_ragged(metadata.decode_swa_indices.reshape(num_rows, -1),
                                  metadata.decode_swa_lens,
                                  self.decode_swa_ragged_indices_buffer,
                                  self.decode_swa_ragged_indptr_buffer,
                                  path=settings.packing)

    build.__wrapped__ = cls.build  # type: ignore[attr-defined]
    update_draft_decode_metadata.__wrapped__ = original_update  # type: ignore[attr-defined]
    cls.build = build
    cls.update_draft_decode_metadata = update_draft_decode_metadata
    cls.supports_draft_decode_metadata_update = settings.draft_update
    return True


def _one_launch_build(cls: type):
    """``fn(builder, common_attn_metadata, replay_start) -> (DeepseekSparseSWAMetadata, width)
    | None``: the shared SWA builder's ``build()`` for a decode batch that one
    ``swa_decode_meta`` launch covers, the same fields it returns (None: not covered; the
    caller takes the rest of ``build()``). None when the builder's ``build()`` is not vLLM's
    shared one (then nothing is replaced)."""
    owner = next((k for k in cls.__mro__[1:] if "build" in k.__dict__), None)
    if owner is None or owner.__name__ != "DeepseekSparseSWAMetadataBuilder":
        return None
    swa = sys.modules[owner.__module__]

    def one_launch(self, cm, replay_start):
        if self.max_image_tokens > 0 and cm.mm_req_doc_ranges:
            return None
        num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens = \
            swa.split_decodes_and_prefills(cm, decode_threshold=self.decode_threshold)
        num_tokens = cm.num_actual_tokens
        noncausal = not cm.causal
        if num_prefill_tokens or num_decode_tokens != num_tokens or (noncausal
                                                                    and not self.is_dspark):
            return None
        width = self.noncausal_index_width if noncausal else self.window_size
        slot_mapping = cm.slot_mapping
        if (not swa_meta.covers(num_tokens, width) or slot_mapping.shape[0] < num_tokens
                or int(cm.query_start_loc_cpu[-1]) > num_tokens
                or cm.block_table_tensor.stride(-1) != 1):
            return None
        if noncausal:
            if self.decode_swa_indices_noncausal is None:
                self.decode_swa_indices_noncausal = swa.torch.zeros(
                    self._max_tokens, 1, self.noncausal_index_width, dtype=swa.torch.int32,
                    device=self.device)
            dense = self.decode_swa_indices_noncausal
        else:
            dense = self.decode_swa_indices
        cached = cm._token_to_req_indices_cache
        token_to_req = cached if cached is not None else self.token_to_req_indices
        is_valid_token = self.is_valid_token[: slot_mapping.shape[0]]
        if replay_start is None:
            replay_start = self.no_replay_start
        swa_meta.swa_decode_meta(
            slot_mapping=slot_mapping, is_valid_token=is_valid_token,
            query_start_loc=cm.query_start_loc, seq_lens=cm.seq_lens,
            block_table=cm.block_table_tensor,
            replay_start=None if noncausal else replay_start, token_to_req=token_to_req,
            indices_out=dense, lens_out=self.decode_swa_lens,
            ragged_out=self.decode_swa_ragged_indices_buffer,
            indptr_out=self.decode_swa_ragged_indptr_buffer, num_tokens=num_tokens,
            window=self.window_size, block_size=self.block_size, noncausal=noncausal)
        if cached is None:
            cm._token_to_req_indices_cache = token_to_req[:num_tokens]
        tile_sched = self.build_tile_scheduler(num_decode_tokens)
        fields = self._build_deepseek_v4_metadata(
            num_decodes, num_prefills, cm.seq_lens, cm.seq_lens_cpu_upper_bound,
            cm.query_start_loc, cm.query_start_loc_cpu, replay_start)
        base = swa.DeepseekSparseSWAMetadata(
            seq_lens=cm.seq_lens, query_start_loc=cm.query_start_loc,
            query_start_loc_cpu=cm.query_start_loc_cpu, block_table=cm.block_table_tensor,
            slot_mapping=slot_mapping, is_valid_token=is_valid_token,
            token_to_req_indices=token_to_req[:num_tokens],
            decode_swa_indices=dense[:num_decode_tokens],
            decode_swa_lens=self.decode_swa_lens[:num_decode_tokens],
            decode_swa_width=width, prefill_swa_indices=None, prefill_swa_lens=None,
            prefill_left_visible=None, prefill_right_visible=None,
            replay_start=replay_start, block_size=self.block_size, num_decodes=num_decodes,
            num_prefills=num_prefills, num_decode_tokens=num_decode_tokens,
            num_prefill_tokens=num_prefill_tokens,
            max_decode_query_len=min(cm.max_query_len, self.decode_threshold),
            tile_sched_swaonly=tile_sched[swa._LAYER_TYPE_SWAONLY],
            tile_sched_c4a=tile_sched[swa._LAYER_TYPE_C4A],
            tile_sched_c128a=tile_sched[swa._LAYER_TYPE_C128A],
            tile_sched_c1a=tile_sched[swa._LAYER_TYPE_C1A],
            tile_sched_c2a=tile_sched[swa._LAYER_TYPE_C2A],
            **fields)
        return base, width

    return one_launch
