"""e2e's vLLM plugin without a server: the ROCm builder patching against stand-ins shaped
like vLLM 0.33 (tests/standins), inject mode's CPU paths and per-step work, the settings,
register()'s wiring, and plugin_check on hand-made logs."""

from __future__ import annotations

import json
import sys
import time
from types import ModuleType, SimpleNamespace

import pytest
import torch

import e2e.plugin as plugin
import e2e.plugin.rocm as rocm
from e2e.kernels.reference import reference_ragged
from e2e.plugin.inject import (CPU_PATHS, Injector, cpu_pack_inplace, cpu_pack_main,
                               swa_window_indices)
from e2e.arm_settings import PluginSettings, SettingsError
from e2e.session import plugin_check
from standins import vllm033_rocm as standin

PR = {"packing": "inplace", "draft_update": True}
FLAG_OFF = {"packing": "inplace", "draft_update": False}
MAIN = {"packing": "main"}


def settings(data: dict) -> PluginSettings:
    return PluginSettings.parse(json.dumps(data))[0]


def patched(data: dict, version: str = "deepseek_v41"):
    module = standin.make_module(version)
    lines: list[str] = []
    assert rocm.patch_rocm_module(module, settings(data),
                                  lambda where, what: lines.append(f"{where}: {what}"))
    builder = module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder(
        standin.kv_cache_spec(), ["layer.0"], standin.vllm_config(), torch.device("cpu"))
    return module, builder, lines


def ragged(metadata) -> tuple[torch.Tensor, torch.Tensor]:
    indptr = metadata.decode_swa_ragged_indptr
    return metadata.decode_swa_ragged_indices[: int(indptr[-1])], indptr


def expected(metadata) -> tuple[torch.Tensor, torch.Tensor]:
    n = metadata.num_decode_tokens
    return reference_ragged(metadata.decode_swa_indices.reshape(n, -1), metadata.decode_swa_lens)


# --- ROCm mode against the stand-ins -------------------------------------------------------

@pytest.mark.parametrize("data, flag", [(PR, True), (FLAG_OFF, False)])
@pytest.mark.parametrize("version", ["deepseek_v41", "deepseek_v4"])
def test_flag_is_set_as_the_arm_says(data, flag, version):
    module, builder, lines = patched(data, version)
    cls = module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder
    assert cls.supports_draft_decode_metadata_update is flag
    assert builder.supports_draft_decode_metadata_update is flag
    assert len(lines) == 1 and f"supports_draft_decode_metadata_update={flag}" in lines[0]
    assert lines[0].startswith(f"{version} DeepseekV4ROCMAiterSparseSWAMetadataBuilder")


def test_main_leaves_the_builder_untouched():
    module = standin.make_module()
    cls = module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder
    build, update = cls.build, cls.update_draft_decode_metadata
    _, builder, lines = None, None, []
    assert rocm.patch_rocm_module(module, settings(MAIN), lambda w, t: lines.append(t))
    assert cls.build is build and cls.update_draft_decode_metadata is update
    assert cls.supports_draft_decode_metadata_update is False
    builder = cls(standin.kv_cache_spec(), ["l"], standin.vllm_config(), torch.device("cpu"))
    assert "builders untouched" in lines[0]
    metadata = builder.build(0, standin.decode_batch([5, 300, 129]))
    got, want = ragged(metadata), expected(metadata)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("version", ["deepseek_v41", "deepseek_v4"])
def test_pr_packs_in_place_into_the_graph_buffers(version, monkeypatch):
    module, builder, _ = patched(PR, version)

    def forbidden(*args, **kwargs):
        raise AssertionError("the pr arm must not pack into scratch and copy")

    monkeypatch.setattr(module, "build_ragged_indices_from_dense", forbidden)
    monkeypatch.setattr(module, "_copy_ragged_to_graph_buffers", forbidden)
    indices_buf = builder.decode_swa_ragged_indices_buffer
    indptr_buf = builder.decode_swa_ragged_indptr_buffer
    pointers = (indices_buf.data_ptr(), indptr_buf.data_ptr())
    for seq_lens in ([5, 300, 129], [1, 2], [200] * 7):
        metadata = builder.build(0, standin.decode_batch(seq_lens))
        assert (builder.decode_swa_ragged_indices_buffer.data_ptr(),
                builder.decode_swa_ragged_indptr_buffer.data_ptr()) == pointers
        assert metadata.decode_swa_ragged_indices.data_ptr() == pointers[0]
        assert metadata.decode_swa_ragged_indptr.data_ptr() == pointers[1]
        n = len(seq_lens)
        # the same views _copy_ragged_to_graph_buffers returns
        assert metadata.decode_swa_ragged_indices.numel() == n * 128
        assert metadata.decode_swa_ragged_indptr.numel() == n + 1
        got, want = ragged(metadata), expected(metadata)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_pr_matches_main_on_the_same_batch():
    main_module = standin.make_module()
    main_builder = main_module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder(
        standin.kv_cache_spec(), ["l"], standin.vllm_config(), torch.device("cpu"))
    _, pr_builder, _ = patched(PR)
    batch = standin.decode_batch([3, 128, 129, 500], seed=3)
    a, b = main_builder.build(0, batch), pr_builder.build(0, batch)
    for x, y in zip(ragged(a), ragged(b)):
        assert torch.equal(x, y)
    assert {k for k in vars(a)} == {k for k in vars(b)}


def test_prefill_only_batch_leaves_ragged_decode_fields_empty():
    _, builder, _ = patched(PR)
    batch = SimpleNamespace(num_decode_tokens=0, num_prefills=1, num_prefill_tokens=9,
                            block_table=torch.zeros(1, 4, dtype=torch.int32),
                            seq_lens=torch.tensor([9], dtype=torch.int32))
    metadata = builder.build(0, batch)
    assert metadata.decode_swa_ragged_indices is None
    assert metadata.decode_swa_ragged_indptr is None


@pytest.mark.parametrize("data", [PR, FLAG_OFF])
def test_update_draft_decode_metadata_is_parent_plus_refresh(data, monkeypatch):
    _, builder, _ = patched(data)
    calls = []
    real = rocm.refresh_decode_swa_ragged

    def spy(indices, lengths, indices_out, indptr_out, *, path):
        calls.append((indices_out.data_ptr(), indptr_out.data_ptr(), path))
        real(indices, lengths, indices_out, indptr_out, path=path)

    monkeypatch.setattr(rocm, "refresh_decode_swa_ragged", spy)
    batch = standin.decode_batch([5, 300, 129])
    metadata = builder.build(0, batch)
    before = [t.clone() for t in ragged(metadata)]
    pointers = (builder.decode_swa_ragged_indices_buffer.data_ptr(),
                builder.decode_swa_ragged_indptr_buffer.data_ptr())
    batch.seq_lens += 1  # the next draft step: the speculator advanced the lengths
    builder.update_draft_decode_metadata(metadata)
    assert builder.parent_updates == 1
    assert calls == [(*pointers, "inplace")]
    got, want = ragged(metadata), expected(metadata)  # the metadata's views followed
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert not torch.equal(got[0], before[0][: got[0].numel()])


def test_patching_twice_is_a_no_op():
    module = standin.make_module()
    assert rocm.patch_rocm_module(module, settings(PR), lambda w, t: None)
    assert not rocm.patch_rocm_module(module, settings(FLAG_OFF), lambda w, t: None)
    assert module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder.supports_draft_decode_metadata_update


# --- inject mode ---------------------------------------------------------------------------

def dense_case(n=6, w=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, 5000, (n, w), generator=g, dtype=torch.int32)
    indices[torch.rand(n, w, generator=g) < 0.05] = -1
    lengths = torch.randint(-2, w + 3, (n,), generator=g)
    return indices, lengths


@pytest.mark.parametrize("name", sorted(CPU_PATHS))
def test_cpu_paths_match_the_reference(name):
    indices, lengths = dense_case()
    out = torch.full((indices.numel(),), -9, dtype=torch.int32)
    indptr = torch.full((indices.shape[0] + 1,), -9, dtype=torch.int32)
    CPU_PATHS[name](indices, lengths, out, indptr)
    flat, want = reference_ragged(indices, lengths)
    assert torch.equal(indptr, want)
    assert torch.equal(out[: flat.numel()], flat)


def test_cpu_inplace_writes_only_the_kept_entries_and_keeps_the_storage():
    indices, lengths = dense_case()
    out = torch.full((indices.numel() + 10,), -9, dtype=torch.int32)
    indptr = torch.full((indices.shape[0] + 3,), -9, dtype=torch.int32)
    pointers = (out.data_ptr(), indptr.data_ptr())
    cpu_pack_inplace(indices, lengths, out, indptr)
    kept = int(indptr[indices.shape[0]])
    assert (out.data_ptr(), indptr.data_ptr()) == pointers
    assert bool((out[kept:] == -9).all()) and bool((indptr[indices.shape[0] + 1:] == -9).all())
    cpu_pack_main(indices, lengths, out, indptr)  # main writes the whole N * W capacity
    assert (out.data_ptr(), indptr.data_ptr()) == pointers
    assert bool((out[indices.numel():] == -9).all())


def test_swa_window_indices_from_a_block_table():
    table = torch.tensor([[7, 3, 9, 0], [2, 5, 0, 0]], dtype=torch.int32)  # block size 4
    dense, lens = swa_window_indices(table, torch.tensor([0, 1]), torch.tensor([9, 2]),
                                     block_size=4, window=6)
    # request 0, position 9: window 4..9 -> blocks 3 (pos 4-7), 9 (pos 8-9)
    assert dense[0].tolist() == [12, 13, 14, 15, 36, 37]
    # request 1, position 2: positions 0..2 in block 2, then padding
    assert dense[1].tolist() == [8, 9, 10, -1, -1, -1]
    assert lens.tolist() == [6, 3]


def fake_runner(prompt_lens, computed, block_size=16):
    blocks = torch.arange(4 * 128, dtype=torch.int32).reshape(4, 128)
    table = SimpleNamespace(block_table=SimpleNamespace(cpu=blocks), block_size=block_size)
    n = len(prompt_lens)
    batch = SimpleNamespace(
        req_ids=[f"r{i}" for i in range(n)],
        num_computed_tokens_cpu=torch.tensor(computed).numpy(),
        num_prompt_tokens=torch.tensor(prompt_lens).numpy(),
        block_table=SimpleNamespace(block_tables=[table]))
    return SimpleNamespace(input_batch=batch)


def test_injector_packs_the_decode_rows_of_the_real_batch(monkeypatch):
    s = settings({"packing": "inplace"})
    injector = Injector(s, max_tokens=32, device=torch.device("cpu"))
    calls = []
    real = injector.pack
    injector.pack = lambda *a: (calls.append(a[0].shape), real(*a))
    runner = fake_runner(prompt_lens=[1031, 1031, 50], computed=[1040, 200, 60])
    out = SimpleNamespace(num_scheduled_tokens={"r0": 1, "r1": 512, "r2": 1})
    assert injector.on_step(runner, out) == 2  # r1 is still in prefill
    assert calls == [(2, 128)] * 7
    dense, lens = swa_window_indices(runner.input_batch.block_table.block_tables[0].block_table.cpu,
                                     torch.tensor([0, 2]), torch.tensor([1040, 60]), 16, 128)
    flat, indptr = reference_ragged(dense, lens)
    assert torch.equal(injector.indptr_buffer[:3], indptr)
    assert torch.equal(injector.indices_buffer[: flat.numel()], flat)
    assert injector.on_step(runner, SimpleNamespace(num_scheduled_tokens={"r1": 512})) == 0
    assert injector.decode_steps == 1


def test_injector_busy_waits_the_step_delay():
    """The delay is the worker's own CPU time: a step spends at least 3 ms more of this
    thread's CPU than a plain one, whatever else the host runs (a wall-clock wait would let
    the server's other processes run inside it and add less than its nominal)."""
    runner = fake_runner(prompt_lens=[10], computed=[20])
    step = SimpleNamespace(num_scheduled_tokens={"r0": 1})
    plain = Injector(settings(MAIN), max_tokens=8, device=torch.device("cpu"))
    delayed = Injector(settings({"packing": "main", "step_delay_us": 3000}), max_tokens=8,
                       device=torch.device("cpu"))

    def least(injector, clock):
        spent = []
        for _ in range(20):
            t = clock()
            injector.on_step(runner, step)
            spent.append(clock() - t)
        return min(spent)

    cpu = least(delayed, time.thread_time) - least(plain, time.thread_time)
    assert cpu >= 0.0029, cpu
    # on the wall clock it never ends early either; the upper bound only tells 3 ms from a
    # unit slip (30 ms), not from a busy host (11.5 ms seen at load average 20)
    wall = least(delayed, time.perf_counter) - least(plain, time.perf_counter)
    assert 0.0029 < wall < 0.02, wall


def test_injector_draft_steps_follow_the_flag():
    runner = fake_runner(prompt_lens=[10], computed=[20])
    step = SimpleNamespace(num_scheduled_tokens={"r0": 4},
                           scheduled_spec_decode_tokens={"r0": [1, 2, 3]})
    for data, rebuilds in ((FLAG_OFF, 3), (PR, 0)):
        injector = Injector(settings(data), max_tokens=8, device=torch.device("cpu"))
        counts = {"pack": 0, "rebuild": 0}
        pack, rebuild = injector.pack, injector.rebuild
        injector.pack = lambda *a: (counts.__setitem__("pack", counts["pack"] + 1), pack(*a))
        injector.rebuild = lambda *a: (counts.__setitem__("rebuild", counts["rebuild"] + 1),
                                       rebuild(*a))
        assert injector.on_step(runner, step) == 4
        assert counts == {"pack": 7 + 3 - rebuilds, "rebuild": rebuilds}


# --- settings and register() -----------------------------------------------------------------

@pytest.mark.parametrize("raw, words", [
    ("not json", "not JSON"),
    ("[1]", "JSON object"),
    ('{"packing": "fast"}', "packing 'fast'"),
    ('{"packing": "inplace", "draft_update": "yes"}', "true or false"),
    ('{"packing": "main", "draft_update": true}', "in-place packing path"),
    ('{"step_delay_us": -1}', "step_delay_us"),
    ('{"packs": 7}', "unknown plugin settings"),
])
def test_bad_settings_are_refused_with_a_reason(raw, words):
    with pytest.raises(SettingsError, match=words):
        PluginSettings.parse(raw)


def test_register_without_settings_applies_nothing(monkeypatch, capsys):
    monkeypatch.delenv(plugin.PLUGIN_ENV, raising=False)
    plugin.register()
    assert "e2e-plugin: nothing to apply in api-server" in capsys.readouterr().out


def test_register_with_bad_settings_says_why_and_check_reports_it(monkeypatch, capsys,
                                                                   tmp_path):
    monkeypatch.setenv(plugin.PLUGIN_ENV, '{"packing": "fast"}')
    monkeypatch.setenv(plugin.ARM_ENV, "pr")
    plugin.register()
    out = capsys.readouterr().out
    assert out.startswith("e2e-plugin: not applied in api-server")
    log = tmp_path / "server.log"
    log.write_text(out)
    reason = plugin_check(log, {"packing": "fast"})
    assert reason and "packing 'fast' is not one of" in reason


def test_register_patches_the_model_runner_of_this_process(monkeypatch, capsys, tmp_path):
    """A stand-in ``vllm.v1.worker.gpu_model_runner``: register() patches it, constructing a
    runner logs the applied line, a decode step runs the injected work."""
    module = ModuleType(plugin.RUNNER_MODULE)

    class GPUModelRunner:
        def __init__(self):
            self.device = torch.device("cpu")
            self.max_num_tokens = 16
            self.input_batch = fake_runner([10], [20]).input_batch

        def execute_model(self, scheduler_output, intermediate_tensors=None):
            return "output"

    module.GPUModelRunner = GPUModelRunner
    monkeypatch.setitem(sys.modules, plugin.RUNNER_MODULE, module)
    monkeypatch.setattr(plugin, "rocm_build", lambda: False)
    monkeypatch.setenv(plugin.PLUGIN_ENV, json.dumps(FLAG_OFF))
    monkeypatch.setenv(plugin.ARM_ENV, "flag-off")
    plugin.register()
    runner = GPUModelRunner()
    assert runner.execute_model(SimpleNamespace(num_scheduled_tokens={"r0": 1})) == "output"
    assert runner._e2e_injector.decode_steps == 1
    out = capsys.readouterr().out
    assert "e2e-plugin: applied in worker (pid" in out
    assert "arm=flag-off mode=inject packing=inplace -> cpu-inplace" in out
    assert "first decode step in worker" in out
    log = tmp_path / "server.log"
    log.write_text(out)
    assert plugin_check(log, FLAG_OFF) is None
    assert "not this arm's" in plugin_check(log, PR)


# --- plugin_check on hand-made logs -----------------------------------------------------------

def test_check_needs_the_worker_line_not_the_api_server_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text('e2e-plugin: nothing applied in api-server (pid 1): the API server runs no '
                   'model runner; arm pr\'s settings {"draft_update":true,"packing":"inplace"} '
                   'apply in the worker\nINFO something else\n')
    reason = plugin_check(log, PR)
    assert reason and "no worker process applied the settings" in reason
    assert plugin_check(log, {}) is None


def test_check_without_any_plugin_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO vLLM started\n")
    assert "logged nothing" in plugin_check(log, PR)
    assert "cannot read the server log" in plugin_check(tmp_path / "missing.log", PR)


# --- packing = "meta" (the mono arm) ---------------------------------------------------------

MONO = {"packing": "meta", "draft_update": True}


def test_meta_is_a_valid_packing_with_the_draft_update():
    s = settings(MONO)
    assert (s.packing, s.draft_update) == ("meta", True)


def test_injector_meta_builds_window_and_ragged_in_one_pass_per_build(monkeypatch):
    import e2e.plugin.inject as inject

    calls = []
    real = inject.cpu_window_and_pack
    monkeypatch.setattr(inject, "cpu_window_and_pack",
                        lambda *a: (calls.append(a[1].numel()), real(*a)))
    injector = Injector(settings(MONO), max_tokens=32, device=torch.device("cpu"))
    assert "cpu-window-and-pack" in injector.describe()
    runner = fake_runner(prompt_lens=[1031, 50], computed=[1040, 60])
    step = SimpleNamespace(num_scheduled_tokens={"r0": 1, "r1": 1},
                           scheduled_spec_decode_tokens={"r0": [1, 2]})
    assert injector.on_step(runner, step) == 2
    assert calls == [2] * (7 + 2)  # every build of the step, and one per draft step
    dense, lens = swa_window_indices(runner.input_batch.block_table.block_tables[0].block_table.cpu,
                                     torch.tensor([0, 1]), torch.tensor([1040, 60]), 16, 128)
    flat, indptr = reference_ragged(dense, lens)
    assert torch.equal(injector.indptr_buffer[:3], indptr)
    assert torch.equal(injector.indices_buffer[: flat.numel()], flat)
    assert injector.decode_steps == 1


def test_meta_on_a_builder_it_cannot_replace_packs_in_place():
    """The stand-ins' build() is not vLLM's shared one, so the one launch is not taken (the
    real classes: tests/test_rocm_real.py); the rest of build() is pr's path."""
    module, builder, lines = patched(MONO)
    assert "packing=meta" in lines[0] and "supports_draft_decode_metadata_update=True" in lines[0]
    assert module.DeepseekV4ROCMAiterSparseSWAMetadataBuilder.supports_draft_decode_metadata_update
    metadata = builder.build(0, standin.decode_batch([5, 300, 129]))
    got, want = ragged(metadata), expected(metadata)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
