"""The change's claims, tested on one arm's plugin settings (against the stand-ins shaped like
vLLM's ROCm SWA builder): what `e2e unit` runs once per arm and per mutant.

The arm comes from ``E2E_UNIT_SETTINGS`` (the JSON `e2e unit` writes; `E2E_UNIT_ARM` names
it); run plainly, the file tests the default config's ``pr`` arm. On ``main`` most of these
fail by design (main is the engine without the change), on ``flag-off`` the flag test fails,
on ``pr`` none does; a mutant (a setting forced off, a function made a no-op) should make at
least one fail.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

import e2e.plugin.rocm as rocm
from e2e.kernels.reference import reference_ragged
from e2e.arm_settings import PluginSettings
from standins import vllm033_rocm as standin


def arm_settings() -> PluginSettings:
    raw = os.environ.get("E2E_UNIT_SETTINGS")
    if raw is None:
        from e2e.config import load_experiment

        raw = json.dumps(load_experiment().arms["pr"].plugin)
    return PluginSettings.parse(raw)[0]


@pytest.fixture
def built(monkeypatch):
    module = standin.make_module("deepseek_v41")
    rocm.patch_rocm_module(module, arm_settings(), lambda where, what: None)
    calls = {"scratch": 0, "copy": 0}
    real_pack, real_copy = module.build_ragged_indices_from_dense, module._copy_ragged_to_graph_buffers

    def pack(*a, **k):
        calls["scratch"] += 1
        return real_pack(*a, **k)

    def copy(*a, **k):
        calls["copy"] += 1
        return real_copy(*a, **k)

    monkeypatch.setattr(module, "build_ragged_indices_from_dense", pack)
    monkeypatch.setattr(module, "_copy_ragged_to_graph_buffers", copy)
    builder = module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder(
        standin.kv_cache_spec(), ["l"], standin.vllm_config(), torch.device("cpu"))
    return module, builder, calls


def ragged(metadata):
    indptr = metadata.decode_swa_ragged_indptr
    return metadata.decode_swa_ragged_indices[: int(indptr[-1])], indptr


def test_decode_packing_matches_the_reference(built):
    _, builder, _ = built
    metadata = builder.build(0, standin.decode_batch([5, 300, 129, 1]))
    n = metadata.num_decode_tokens
    want = reference_ragged(metadata.decode_swa_indices.reshape(n, -1), metadata.decode_swa_lens)
    got = ragged(metadata)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_build_packs_without_scratch_or_copy(built):
    _, builder, calls = built
    builder.build(0, standin.decode_batch([5, 300, 129]))
    assert calls == {"scratch": 0, "copy": 0}


def test_draft_steps_may_update_the_metadata_in_place(built):
    module, builder, _ = built
    assert module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder.supports_draft_decode_metadata_update
    assert builder.supports_draft_decode_metadata_update


def test_draft_update_refreshes_the_graph_buffers(built):
    _, builder, _ = built
    batch = standin.decode_batch([9, 200, 130])
    metadata = builder.build(0, batch)
    batch.seq_lens += 1
    builder.update_draft_decode_metadata(metadata)
    n = metadata.num_decode_tokens
    want = reference_ragged(metadata.decode_swa_indices.reshape(n, -1), metadata.decode_swa_lens)
    got = ragged(metadata)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
