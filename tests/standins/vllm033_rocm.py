"""Stand-ins for vLLM 0.33's DeepSeek-V4/V4.1 ROCm sparse SWA metadata builders, which do
not import without ROCm. Same class names, attributes and call signatures as
``vllm/models/deepseek_v41/amd/rocm.py`` (and the V4 variant in
``vllm/models/deepseek_v4/amd/rocm.py``), read from vLLM's source; the parent's SWA index
kernels are replaced by a few torch lines with the same contract (dense ``[N, W]`` slot ids,
``lens[N]``, written into the builder's persistent buffers).

``make_module("deepseek_v41")`` returns a fresh module object (fresh classes) named like
the real one, so each test patches its own copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType, SimpleNamespace

import torch

from e2e.kernels.reference import reference_ragged


@dataclass
class DeepseekSparseSWAMetadata:
    """The fields of vLLM's ``DeepseekSparseSWAMetadata`` that the ROCm builder reads."""

    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    num_prefill_tokens: int
    seq_lens: torch.Tensor | None = None
    block_table: torch.Tensor | None = None
    decode_swa_indices: torch.Tensor | None = None
    decode_swa_lens: torch.Tensor | None = None
    decode_swa_width: int = 0
    prefill_swa_indices: torch.Tensor | None = None
    prefill_swa_lens: torch.Tensor | None = None


def _swa_indices(block_table, seq_lens, block_size, window, out_indices, out_lens):
    """Decode SWA indices of the last token of each request, written in place (the role of
    vLLM's ``_COMPUTE_SWA_INDICES_AND_LENS_KERNEL``)."""
    n = seq_lens.shape[0]
    pos = seq_lens.to(torch.int64) - 1
    lens = torch.clamp(pos + 1, max=window)
    cols = torch.arange(window)
    p = (pos + 1 - lens)[:, None] + cols[None, :]
    valid = cols[None, :] < lens[:, None]
    p = torch.where(valid, p, 0)
    slots = block_table[torch.arange(n)[:, None], p // block_size].to(torch.int64) * block_size \
        + p % block_size
    out_indices[:n].copy_(torch.where(valid, slots, -1).to(torch.int32))
    out_lens[:n].copy_(lens.to(torch.int32))


class DeepseekSparseSWAMetadataBuilder:
    """vLLM's shared SWA builder: persistent decode index buffers, ``build`` and the
    in-place ``update_draft_decode_metadata`` (flag True on the shared builder)."""

    supports_draft_decode_metadata_update = True

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        self.kv_cache_spec = kv_cache_spec
        self.layer_names = layer_names
        self.vllm_config = vllm_config
        self.device = device
        self.block_size = kv_cache_spec.block_size
        self.window_size = kv_cache_spec.sliding_window
        self.noncausal_index_width = self.window_size
        max_tokens = vllm_config.scheduler_config.max_num_batched_tokens
        self.decode_swa_indices_buffer = torch.full((max_tokens, self.window_size), -1,
                                                    dtype=torch.int32, device=device)
        self.decode_swa_lens_buffer = torch.zeros(max_tokens, dtype=torch.int32, device=device)
        self.parent_updates = 0  # stand-in bookkeeping: calls of the parent's update

    def _build(self, common_attn_metadata) -> DeepseekSparseSWAMetadata:
        cm = common_attn_metadata
        n = cm.num_decode_tokens
        indices = self.decode_swa_indices_buffer[:n]
        lens = self.decode_swa_lens_buffer[:n]
        if n:
            _swa_indices(cm.block_table[:n], cm.seq_lens[:n], self.block_size, self.window_size,
                         indices, lens)
        return DeepseekSparseSWAMetadata(
            num_decodes=n, num_decode_tokens=n, num_prefills=cm.num_prefills,
            num_prefill_tokens=cm.num_prefill_tokens, seq_lens=cm.seq_lens,
            block_table=cm.block_table, decode_swa_indices=indices if n else None,
            decode_swa_lens=lens if n else None, decode_swa_width=self.window_size)

    def update_draft_decode_metadata(self, metadata: DeepseekSparseSWAMetadata) -> None:
        self.parent_updates += 1
        n = metadata.num_decode_tokens
        if n == 0:
            return
        _swa_indices(metadata.block_table[:n], metadata.seq_lens[:n], self.block_size,
                     self.window_size, metadata.decode_swa_indices, metadata.decode_swa_lens)


class DeepseekV41SparseSWAMetadataBuilder(DeepseekSparseSWAMetadataBuilder):
    def build(self, common_prefix_len, common_attn_metadata, fast_build=False,
              replay_start=None) -> DeepseekSparseSWAMetadata:
        return self._build(common_attn_metadata)


class DeepseekV4SparseSWAParent(DeepseekSparseSWAMetadataBuilder):
    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        return self._build(common_attn_metadata)


def build_ragged_indices_from_dense(indices, lengths, num_rows=None):
    """vLLM 0.33's allocating packer: ``(flat, indptr)``, ``flat`` of capacity N * W."""
    flat, indptr = reference_ragged(indices, lengths, num_rows)
    out = torch.full((indices.shape[0] * indices.shape[1],), -1, dtype=torch.int32)
    out[: flat.numel()] = flat
    return out, indptr


def _copy_ragged_to_graph_buffers(ragged_indices, ragged_indptr, ragged_indices_buffer,
                                  ragged_indptr_buffer, num_rows, max_entries_per_row):
    indptr_out = ragged_indptr_buffer[: num_rows + 1]
    indptr_out.copy_(ragged_indptr, non_blocking=True)
    max_entries = max(num_rows * max_entries_per_row, 1)
    ragged_out = ragged_indices_buffer[:max_entries]
    source_entries = ragged_indices.numel()
    if source_entries > 0:
        ragged_out[:source_entries].copy_(ragged_indices, non_blocking=True)
    return ragged_out, indptr_out


def make_module(version: str = "deepseek_v41") -> ModuleType:
    """A fresh stand-in of ``vllm.models.<version>.amd.rocm``."""
    module = ModuleType(f"vllm.models.{version}.amd.rocm")
    module.build_ragged_indices_from_dense = build_ragged_indices_from_dense
    module._copy_ragged_to_graph_buffers = _copy_ragged_to_graph_buffers
    v41 = version == "deepseek_v41"

    if v41:
        @dataclass
        class DeepseekV4ROCMAiterSparseSWAMetadata(DeepseekSparseSWAMetadata):
            decode_swa_ragged_indices: torch.Tensor | None = None
            decode_swa_ragged_indptr: torch.Tensor | None = None
            prefill_swa_ragged_indices: torch.Tensor | None = None
            prefill_swa_ragged_indptr: torch.Tensor | None = None
        parent = DeepseekV41SparseSWAMetadataBuilder
    else:
        @dataclass
        class DeepseekV4ROCMAiterSparseSWAMetadata(DeepseekSparseSWAMetadata):  # type: ignore[no-redef]
            decode_swa_ragged_indices: torch.Tensor | None = None
            decode_swa_ragged_indptr: torch.Tensor | None = None
        parent = DeepseekV4SparseSWAParent

    class DeepseekV4ROCMAiterSparseSWAMetadataBuilder(parent):
        # Keep fused multi-step decode disabled until update_draft_decode_metadata()
        # also refreshes the ROCm-specific ragged SWA indices and indptrs.
        supports_draft_decode_metadata_update = False

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            max_tokens = self.vllm_config.scheduler_config.max_num_batched_tokens
            swa_index_width = max(self.window_size, self.noncausal_index_width)
            self.decode_swa_ragged_indices_buffer = torch.empty(
                max_tokens * swa_index_width, dtype=torch.int32, device=self.device)
            self.decode_swa_ragged_indptr_buffer = torch.empty(
                max_tokens + 1, dtype=torch.int32, device=self.device)
            self._use_aiter_sparse_mla = False

        def build(self, common_prefix_len, common_attn_metadata, fast_build=False, **kw):
            base = super().build(common_prefix_len=common_prefix_len,
                                 common_attn_metadata=common_attn_metadata,
                                 fast_build=fast_build, **kw)
            ragged_indices = ragged_indptr = None
            if (base.num_decode_tokens > 0 and base.decode_swa_indices is not None
                    and base.decode_swa_lens is not None):
                ragged_indices, ragged_indptr = module.build_ragged_indices_from_dense(
                    base.decode_swa_indices.reshape(base.num_decode_tokens,
                                                    base.decode_swa_width),
                    base.decode_swa_lens)
                ragged_indices, ragged_indptr = module._copy_ragged_to_graph_buffers(
                    ragged_indices, ragged_indptr, self.decode_swa_ragged_indices_buffer,
                    self.decode_swa_ragged_indptr_buffer, base.num_decode_tokens,
                    base.decode_swa_width)
            extra = ({"prefill_swa_ragged_indices": None, "prefill_swa_ragged_indptr": None}
                     if v41 else {})
            return DeepseekV4ROCMAiterSparseSWAMetadata(
                **vars(base), decode_swa_ragged_indices=ragged_indices,
                decode_swa_ragged_indptr=ragged_indptr, **extra)

    if not v41:
        # vLLM 0.33's V4 build() takes no replay_start
        _build = DeepseekV4ROCMAiterSparseSWAMetadataBuilder.build

        def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
            return _build(self, common_prefix_len, common_attn_metadata, fast_build)

        DeepseekV4ROCMAiterSparseSWAMetadataBuilder.build = build

    module.DeepseekV4ROCMAiterSparseSWAMetadata = DeepseekV4ROCMAiterSparseSWAMetadata
    module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder = DeepseekV4ROCMAiterSparseSWAMetadataBuilder
    return module


def vllm_config(max_num_batched_tokens: int = 64):
    return SimpleNamespace(scheduler_config=SimpleNamespace(
        max_num_batched_tokens=max_num_batched_tokens), kv_transfer_config=None)


def kv_cache_spec(block_size: int = 16, sliding_window: int = 128):
    return SimpleNamespace(block_size=block_size, sliding_window=sliding_window)


def decode_batch(seq_lens: list[int], block_size: int = 16, blocks_per_req: int = 32, seed=0):
    """A decode-only ``CommonAttentionMetadata`` stand-in: random block tables, given lengths."""
    g = torch.Generator().manual_seed(seed)
    n = len(seq_lens)
    table = torch.randperm(n * blocks_per_req, generator=g).reshape(n, blocks_per_req)
    return SimpleNamespace(num_decode_tokens=n, num_prefills=0, num_prefill_tokens=0,
                           block_table=table.to(torch.int32),
                           seq_lens=torch.tensor(seq_lens, dtype=torch.int32))
