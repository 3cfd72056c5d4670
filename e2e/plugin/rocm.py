"""ROCm mode: patch vLLM 0.33's DeepSeek-V4/V4.1 ROCm sparse SWA metadata builders.

The class patched, in ``vllm.models.deepseek_v4.amd.rocm`` and
``vllm.models.deepseek_v41.amd.rocm``, is ``DeepseekV4ROCMAiterSparseSWAMetadataBuilder``.
In vLLM 0.33 its ``build()`` packs the decode SWA indices with
``build_ragged_indices_from_dense`` into fresh scratch and copies them into
``decode_swa_ragged_indices_buffer`` / ``decode_swa_ragged_indptr_buffer`` with
``_copy_ragged_to_graph_buffers``; its ``supports_draft_decode_metadata_update`` is False.

- ``main``: untouched (only ``__init__`` is wrapped, to log the applied line).
- ``pr`` (packing inplace|fused|torch, draft_update true): ``build()`` packs with e2e's path
  straight into the two graph buffers; ``update_draft_decode_metadata()`` is the parent's
  plus e2e's ``refresh_decode_swa_ragged`` into the same buffers; the flag is True.
- ``flag-off``: as ``pr`` with the flag False.

Everything else ``build()`` does in vLLM 0.33 (the parent's build, the aiter prefill ragged
indices on V4.1) is kept; the returned metadata holds views of the graph buffers exactly
as ``_copy_ragged_to_graph_buffers`` returns them (``indices[:max(N * W, 1)]``,
``indptr[:N + 1]``).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType

from e2e.kernels import PATHS
from e2e.kernels import refresh_decode_swa_ragged as _refresh_triton
from e2e.plugin.settings import PluginSettings

__all__ = ["ROCM_MODULES", "BUILDER", "patch_rocm_module", "refresh_decode_swa_ragged"]

ROCM_MODULES = ("vllm.models.deepseek_v4.amd.rocm", "vllm.models.deepseek_v41.amd.rocm")
BUILDER = "DeepseekV4ROCMAiterSparseSWAMetadataBuilder"
_METADATA = "DeepseekV4ROCMAiterSparseSWAMetadata"


def refresh_decode_swa_ragged(indices, lengths, indices_out, indptr_out, *, path: str) -> None:
    """e2e's draft refresh with the arm's path (the Triton refresh for inplace/fused)."""
    if path in ("inplace", "fused"):
        _refresh_triton(indices, lengths, indices_out, indptr_out, path=path)
    else:
        PATHS[path](indices, lengths, indices_out, indptr_out)


def describe(settings: PluginSettings) -> str:
    if settings.packing == "main":
        return ("mode=rocm packing=main: builders untouched (build_ragged_indices_from_dense "
                "into scratch + _copy_ragged_to_graph_buffers); "
                "supports_draft_decode_metadata_update unchanged (False)")
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
    pack_name = settings.packing

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False, **kwargs):
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
            ragged_indices = self.decode_swa_ragged_indices_buffer[
                : max(num_rows * dense.shape[1], 1)]
            ragged_indptr = self.decode_swa_ragged_indptr_buffer[: num_rows + 1]
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
                                  self.decode_swa_ragged_indptr_buffer, path=pack_name)

    build.__wrapped__ = cls.build  # type: ignore[attr-defined]
    update_draft_decode_metadata.__wrapped__ = original_update  # type: ignore[attr-defined]
    cls.build = build
    cls.update_draft_decode_metadata = update_draft_decode_metadata
    cls.supports_draft_decode_metadata_update = settings.draft_update
    return True
