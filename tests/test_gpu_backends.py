"""The GPU backends: which one runs, what happens when one fails, and that each computes what the CPU computes.

Everything not marked ``gpu`` runs on any machine: the torch backend on the CPU, and onnxruntime's GPU providers
through a stand-in that fails as a GPU build without its libraries fails. Tests marked ``gpu`` need an NVIDIA GPU
(``pytest -m gpu`` on the GPU machine) and skip elsewhere.
"""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

from tabula.engine.config import EngineConfig, NetConfig, SearchConfig
from tabula.engine.net import evaluator as evaluator_module
from tabula.engine.net import onnx_evaluator  # where OnnxEvaluator looks for a GPU
from tabula.engine.net.evaluator import (
    GPU_TOLERANCE,
    PROVIDERS,
    OnnxEvaluator,
    comparison_planes,
    outputs_difference,
    provider_options,
)
from tabula.engine.play import search_player

torch = pytest.importorskip("torch")
torch_backend = pytest.importorskip("tabula.engine.net.torch_backend")

TRT, CUDA, CPU = PROVIDERS["tensorrt"], PROVIDERS["cuda"], PROVIDERS["cpu"]
WEIGHTS = ["weights/tabula-6x64-sl.onnx", "weights/tabula-4x32-rl9d.onnx"]


def cpu_reference(path) -> OnnxEvaluator:
    return OnnxEvaluator(path, symmetry="identity", provider="cpu", log=None)


# -- the torch backend, on the CPU --------------------------------------------------------------------------------


def test_batch_buckets_cover_every_batch_up_to_the_largest():
    buckets = torch_backend.batch_buckets(256)
    assert buckets[:4] == [1, 2, 4, 8] and buckets[-1] == 256 and buckets == sorted(set(buckets))
    for smaller, larger in zip(buckets, buckets[1:]):
        assert larger <= max(2 * smaller, smaller + 8)  # padding never more than doubles a batch past 8
    assert torch_backend.batch_buckets(1) == [1]
    assert torch_backend.batch_buckets(12)[-1] == 12
    with pytest.raises(ValueError):
        torch_backend.batch_buckets(0)


def test_folding_batch_norms_changes_nothing(tiny_model):
    import copy

    planes = torch.from_numpy(comparison_planes(tiny_model.spec.board_size))
    folded = torch_backend.fold_batch_norms(copy.deepcopy(tiny_model))
    with torch.no_grad():
        (p0, v0), (p1, v1) = tiny_model(planes), folded(planes)
    assert torch.allclose(p0, p1, atol=1e-4) and torch.allclose(v0, v1, atol=1e-5)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-4), ("bf16", GPU_TOLERANCE)])
def test_the_torch_backend_computes_what_onnxruntime_computes(tiny_onnx, tiny_pooled_onnx, precision, tolerance):
    for path, sizes in ((tiny_onnx, None), (tiny_pooled_onnx, (9, 13, 19))):
        reference = cpu_reference(path)
        runner = torch_backend.TorchRunner(str(path), device="cpu", precision=precision)
        for size in sizes or reference.board_sizes:
            assert outputs_difference(reference.run, runner.run, size) <= tolerance


def test_the_shipped_networks_agree_under_the_torch_backend():
    for path in WEIGHTS:
        reference = cpu_reference(path)
        runner = torch_backend.TorchRunner(path, device="cpu", precision="fp32")
        assert outputs_difference(reference.run, runner.run, reference.board_sizes[0]) <= 1e-4


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_torch_backend_gives_the_score_and_ownership_onnxruntime_gives(tiny_aux_onnx, precision):
    """A network with score and ownership heads keeps them on the GPU: the search's score utility and the analysis's
    score lead and ownership depend on them."""
    reference = cpu_reference(tiny_aux_onnx)
    runner = torch_backend.TorchRunner(str(tiny_aux_onnx), device="cpu", precision=precision, max_batch=4)
    assert runner.aux
    planes = comparison_planes(9, count=6)  # more than the largest bucket: chunks
    expected = reference._run(planes)
    actual = runner.run(planes)
    assert len(expected) == len(actual) == 4
    for want, got in zip(expected, actual):
        assert got.shape == want.shape and got.dtype == np.float32
    tolerance = {"fp32": 1e-4, "bf16": GPU_TOLERANCE}[precision]
    assert np.abs(expected[2] - actual[2]).max() <= 20 * tolerance  # points
    assert np.abs(expected[3] - actual[3]).max() <= tolerance
    assert outputs_difference(reference._run, runner.run, 9) <= tolerance


def test_a_network_without_score_heads_gives_policy_and_value_on_the_torch_backend(tiny_onnx):
    runner = torch_backend.TorchRunner(str(tiny_onnx), device="cpu", precision="fp32")
    assert not runner.aux and len(runner.run(comparison_planes(19, count=2))) == 2


def test_outputs_difference_sees_a_wrong_score_or_ownership(tiny_aux_onnx):
    reference = cpu_reference(tiny_aux_onnx)

    def shifted(index, by):
        def run(planes):
            outputs = list(reference._run(planes))
            outputs[index] = outputs[index] + by
            return tuple(outputs)
        return run

    assert outputs_difference(reference._run, reference._run, 9) == 0.0
    assert outputs_difference(reference._run, shifted(2, 3.0), 9) > GPU_TOLERANCE  # 3 points off
    assert outputs_difference(reference._run, shifted(2, 0.5), 9) <= GPU_TOLERANCE  # half a point: agreement
    assert outputs_difference(reference._run, shifted(3, 0.2), 9) > GPU_TOLERANCE
    assert outputs_difference(reference.run, shifted(2, 3.0), 9) <= GPU_TOLERANCE  # policy and value only: not compared


def test_the_torch_backend_reads_the_network_file_once(tiny_onnx, monkeypatch):
    import onnx

    loads = []
    real_load = onnx.load
    monkeypatch.setattr(onnx, "load", lambda *args, **kwargs: loads.append(args[0]) or real_load(*args, **kwargs))
    torch_backend.TorchRunner(str(tiny_onnx), device="cpu", precision="fp32")
    assert loads == [str(tiny_onnx)]


def test_batches_beyond_the_largest_bucket_run_in_chunks(tiny_onnx):
    reference = cpu_reference(tiny_onnx)
    runner = torch_backend.TorchRunner(str(tiny_onnx), device="cpu", precision="fp32", max_batch=4)
    planes = comparison_planes(reference.board_sizes[0], count=11)
    (p0, v0), (p1, v1) = reference.run(planes), runner.run(planes)
    assert p1.shape == p0.shape and v1.shape == v0.shape == (11,)
    assert np.allclose(p0, p1, atol=1e-4) and np.allclose(v0, v1, atol=1e-5)
    assert p1.dtype == v1.dtype == np.float32


def test_preparing_graphs_on_the_cpu_changes_nothing(tiny_onnx):
    runner = torch_backend.TorchRunner(str(tiny_onnx), device="cpu", precision="fp32")
    runner.prepare([9], 8)  # no CUDA graphs on the CPU: nothing to capture
    assert runner._graphs == {}


def test_an_unknown_precision_or_a_missing_gpu_is_a_clear_error(tiny_onnx):
    with pytest.raises(ValueError, match="precision"):
        torch_backend.TorchRunner(str(tiny_onnx), device="cpu", precision="int4")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA"):
            torch_backend.TorchRunner(str(tiny_onnx), device="cuda")


# -- choosing a backend, and falling back --------------------------------------------------------------------------


class FakeOnnxruntime:
    """onnxruntime as a GPU build shows it: TensorRT and CUDA listed; by default TensorRT fails to start (its
    libraries are missing) and CUDA, like a CUDA provider without its libraries, silently runs on the CPU.

    ``trt_error = None`` lets TensorRT start; a provider in ``starting`` starts and says it runs (computing on the
    CPU underneath); one in ``run_errors`` starts and then fails its first run with that message (TensorRT building
    an engine for a shape it meets at run time, cuDNN failing to load on the first convolution)."""

    TRT_ERROR = "TensorRT EP could not be created: libnvinfer.so.10: cannot open shared file"

    def __init__(self, real, monkeypatch):
        self.real = real
        self.calls: list[tuple[list[str], list[dict]]] = []
        self.fallback: list[object] = []  # the enable_fallback each session was created with
        self.trt_error: str | None = self.TRT_ERROR
        self.starting: set[str] = set()
        self.run_errors: dict[str, str] = {}
        fake = self

        class Session(real.InferenceSession):
            def __init__(self, path, sess_options=None, providers=None, provider_options=None, **kwargs):
                providers = list(providers or [CPU])
                fake.calls.append((providers, list(provider_options or [{}] * len(providers))))
                fake.fallback.append(kwargs.get("enable_fallback", 1))
                if providers[0] == TRT and fake.trt_error is not None:
                    print("*************** EP Error ***************")  # what onnxruntime prints as it falls back
                    raise RuntimeError(fake.trt_error)
                super().__init__(path, sess_options=sess_options, providers=[CPU])
                self.fake_provider = providers[0] if providers[0] in fake.starting | set(fake.run_errors) else CPU

            def get_providers(self):
                return [self.fake_provider] + ([CPU] if self.fake_provider != CPU else [])

            def run(self, *args, **kwargs):
                if self.fake_provider in fake.run_errors:
                    raise RuntimeError(fake.run_errors[self.fake_provider])
                return super().run(*args, **kwargs)

        monkeypatch.setattr(real, "get_available_providers", lambda: [TRT, CUDA, CPU])
        monkeypatch.setattr(real, "InferenceSession", Session)


@pytest.fixture
def gpu_build(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: False)
    return FakeOnnxruntime(onnxruntime, monkeypatch)


def test_auto_tries_tensorrt_then_cuda_then_the_cpu_and_says_why_in_one_line(tiny_onnx, gpu_build, tmp_path):
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, provider="auto", log=lines.append, cache_dir=str(tmp_path), batch_hint=16)
    assert evaluator.provider == CPU
    assert len(lines) == 1
    assert f"on {CPU}" in lines[0] and f"{TRT} failed: TensorRT EP could not be created" in lines[0]
    assert f"onnxruntime could not start {CUDA}" in lines[0]
    first, second = [call for call in gpu_build.calls if call[0][0] in (TRT, CUDA)][:2]
    assert first[0] == [TRT, CUDA, CPU] and second[0] == [CUDA, CPU]
    size = evaluator.board_sizes[0]
    trt = first[1][0]
    assert trt["trt_fp16_enable"] is True and trt["trt_engine_cache_enable"] is True
    assert trt["trt_engine_cache_path"] == str(tmp_path)
    assert trt["trt_profile_min_shapes"] == f"planes:1x18x{size}x{size}"
    assert trt["trt_profile_opt_shapes"] == f"planes:16x18x{size}x{size}"
    assert trt["trt_profile_max_shapes"] == f"planes:256x18x{size}x{size}"
    assert first[1][1] == {} and first[1][2] == {}
    assert evaluator.evaluate([]).value.shape == (0,)


def test_any_gpu_provider_error_moves_on_and_nothing_reaches_stdout(tiny_onnx, gpu_build, tmp_path, capfd):
    gpu_build.trt_error = "[ONNXRuntimeError] : 1 : FAIL : std::bad_alloc"  # names no GPU word at all
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, log=lines.append, cache_dir=str(tmp_path))
    assert evaluator.provider == CPU and f"{TRT} failed: [ONNXRuntimeError]" in lines[0]
    gpu_sessions = [fallback for (providers, _), fallback in zip(gpu_build.calls, gpu_build.fallback)
                    if providers[0] != CPU]
    assert gpu_sessions and set(gpu_sessions) == {0}  # onnxruntime's own retry, which drops our options, is off
    out, err = capfd.readouterr()
    assert out == ""  # stdout is the GTP channel
    assert "EP Error" in err


def test_cuda_that_starts_runs_when_tensorrt_does_not(tiny_onnx, gpu_build, tmp_path):
    gpu_build.starting = {CUDA}
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, log=lines.append, cache_dir=str(tmp_path))
    assert evaluator.provider == CUDA and evaluator.on_gpu
    assert len(lines) == 1 and f"on {CUDA}; {TRT} failed: TensorRT EP could not be created" in lines[0]


def test_a_provider_that_starts_and_fails_its_first_run_moves_on(tiny_onnx, gpu_build, tmp_path):
    """TensorRT may build its engine only for the first batch it runs, and fail then: the next provider runs."""
    gpu_build.trt_error = None
    gpu_build.run_errors = {TRT: "TensorRT EP failed to create engine from network: out of memory"}
    gpu_build.starting = {CUDA}
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, log=lines.append, cache_dir=str(tmp_path))
    assert evaluator.provider == CUDA and len(lines) == 1
    assert f"{TRT} failed: a trial evaluation on" in lines[0] and "out of memory" in lines[0]
    assert evaluator.run(comparison_planes(evaluator.board_sizes[0]))[0].shape[0] == 16


def test_with_a_gpu_every_onnxruntime_provider_failing_leads_to_torch(tiny_onnx, gpu_build, tmp_path, monkeypatch):
    """The whole chain on a GPU machine: TensorRT fails to start, CUDA silently runs on the CPU, torch on CUDA
    runs; one line says all of it."""
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, symmetry="identity", log=lines.append, cache_dir=str(tmp_path))
    assert evaluator.provider == "torch cpu fp32" and evaluator.on_gpu and len(lines) == 1
    assert f"{TRT} failed" in lines[0] and f"onnxruntime could not start {CUDA}" in lines[0]
    reference = cpu_reference(tiny_onnx)
    assert outputs_difference(reference.run, evaluator.run, reference.board_sizes[0]) <= 1e-4


class WarningTorchRunner:
    """torch on a machine whose GPU it cannot use: a warning from torch, then the error."""

    def __init__(self, *args, **kwargs):
        warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old", UserWarning)
        raise RuntimeError("torch sees no CUDA device")


@pytest.mark.parametrize("torch_failure", ["warns", "missing"])
def test_when_no_gpu_path_works_the_cpu_runs_with_exactly_one_stderr_line(tiny_onnx, gpu_build, tmp_path,
                                                                          monkeypatch, capfd, torch_failure):
    gpu_build.trt_error = None
    gpu_build.run_errors = {TRT: "TensorRT EP execution context enqueue failed", CUDA: "CUDNN failure 4"}
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    if torch_failure == "warns":
        monkeypatch.setattr(torch_backend, "TorchRunner", WarningTorchRunner)
    else:  # no torch at all: the import inside the evaluator fails
        import tabula.engine.net as net_package

        monkeypatch.delattr(net_package, "torch_backend")
        monkeypatch.setitem(sys.modules, "tabula.engine.net.torch_backend", None)
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as warned:  # pytest would otherwise keep torch's warning from stderr
        warnings.simplefilter("always")
        evaluator = OnnxEvaluator(tiny_onnx, cache_dir=str(tmp_path))  # the default log: stderr
    assert warned == []
    assert evaluator.provider == CPU and not evaluator.on_gpu
    out, err = capfd.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("tabula: network") and f"on {CPU}" in err
    assert f"{TRT} failed: a trial evaluation" in err and f"{CUDA} failed: a trial evaluation" in err
    assert "torch on CUDA failed: " + ("torch sees no CUDA device" if torch_failure == "warns" else "") in err


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_an_int8_file_on_a_gpu_without_tensorrt_runs_its_fp32_file_beside_it(monkeypatch):
    """The shipped default is an int8 file, which the torch backend cannot rebuild: on a GPU its fp32 file beside
    it runs instead (checked against that file on the CPU), and the int8 file's metadata still rules."""
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    lines = []
    evaluator = OnnxEvaluator("weights/tabula-6x64-komi-lead-int8.onnx", symmetry="identity", log=lines.append)
    assert evaluator.on_gpu and len(lines) == 1, lines
    assert "(the fp32 weights of tabula-6x64-komi-lead.onnx)" in lines[0] and "failed" not in lines[0]
    assert evaluator.has_score_and_ownership and evaluator.metadata["precision"] == "int8"
    assert evaluator.resign_thresholds is not None
    fp32 = cpu_reference("weights/tabula-6x64-komi-lead.onnx")
    assert outputs_difference(fp32._run, evaluator._run, 19, fp32.encoding) <= 1e-4


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_the_torch_backend_prepares_the_common_board_sizes_before_the_first_move(tiny_pooled_onnx, tiny_onnx,
                                                                                  monkeypatch):
    prepared = []

    class Recording(CpuTorchRunner):
        def prepare(self, sizes, largest_batch=None):
            prepared.append((list(sizes), largest_batch))

    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", Recording)
    OnnxEvaluator(tiny_pooled_onnx, log=None, batch_hint=64)  # plays 9, 13 and 19
    OnnxEvaluator("weights/tabula-6x64-komi-lead-int8.onnx", log=None, batch_hint=64)  # plays 2 to 25
    OnnxEvaluator(tiny_onnx, log=None)  # 19 only, the default batch hint
    assert prepared == [([9, 13, 19], 64), ([9, 13, 19], 64), ([19], 64)]  # 64: ON_GPU's batch, by default


def test_an_int8_file_without_its_fp32_file_runs_on_the_cpu_and_says_why(monkeypatch, tmp_path):
    import shutil

    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    alone = tmp_path / "net-int8.onnx"
    shutil.copy("weights/tabula-6x64-anysize-int8.onnx", alone)
    lines = []
    evaluator = OnnxEvaluator(alone, log=lines.append)
    assert evaluator.provider == CPU and len(lines) == 1
    assert "torch on CUDA failed:" in lines[0] and "only fp32 files convert back" in lines[0]
    assert "no net.onnx beside it" in lines[0]
    shutil.copy("weights/tabula-6x64-sl.onnx", tmp_path / "net.onnx")  # another network: not its fp32 file
    lines = []
    assert OnnxEvaluator(alone, log=lines.append).provider == CPU
    assert "net.onnx beside it is not its fp32 file" in lines[0]


def test_a_corrupt_file_on_a_gpu_build_is_still_a_file_error(tmp_path, gpu_build):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not a model at all")
    with pytest.raises(evaluator_module.NetworkFileError, match="bad.onnx: onnxruntime cannot load it"):
        OnnxEvaluator(bad, log=None, cache_dir=str(tmp_path))
    assert [call[0][0] for call in gpu_build.calls][-3:] == [TRT, CUDA, CPU]


def test_a_provider_asked_for_by_name_that_is_missing_is_an_error(tiny_onnx):
    with pytest.raises(ValueError, match="not available"):
        OnnxEvaluator(tiny_onnx, provider="tensorrt", log=None)
    with pytest.raises(ValueError, match="provider.*tpu"):
        OnnxEvaluator(tiny_onnx, provider="tpu", log=None)
    with pytest.raises(ValueError, match="precision.*fp8"):
        OnnxEvaluator(tiny_onnx, precision="fp8", log=None)


def test_tensorrt_options_follow_the_precision_and_the_profile():
    options = provider_options(TRT, "fp32", "/cache", ((1, 9), (8, 19), (64, 19)))
    assert options["trt_fp16_enable"] is False and options["trt_timing_cache_path"] == "/cache"
    assert options["trt_profile_opt_shapes"] == "planes:8x18x19x19"
    assert "trt_profile_min_shapes" not in provider_options(TRT, "auto", "/cache", None)
    assert provider_options(CUDA, "fp16", "/cache", None) == {} == provider_options(CPU, "auto", "/c", None)
    bf16 = provider_options(TRT, "bf16", "/cache", None)
    assert bf16["trt_bf16_enable"] is True and bf16["trt_fp16_enable"] is False
    assert provider_options(TRT, "auto", "/c", None)["trt_fp16_enable"] is True
    assert "trt_bf16_enable" not in provider_options(TRT, "fp16", "/c", None)


def test_a_pooled_network_gets_a_profile_over_all_its_sizes(tiny_pooled_onnx, gpu_build, tmp_path):
    OnnxEvaluator(tiny_pooled_onnx, log=None, cache_dir=str(tmp_path))
    trt = gpu_build.calls[[c[0][0] for c in gpu_build.calls].index(TRT)][1][0]
    assert trt["trt_profile_min_shapes"] == "planes:1x18x9x9"
    assert trt["trt_profile_max_shapes"] == "planes:256x18x19x19"


class CpuTorchRunner(torch_backend.TorchRunner):
    """The torch backend as the evaluator starts it on a GPU, run on the CPU in fp32."""

    def __init__(self, path, device="cuda", precision="fp16", cuda_graphs=True, max_batch=256):
        super().__init__(path, device="cpu", precision="fp32", max_batch=max_batch)


def test_with_a_gpu_and_no_onnxruntime_gpu_provider_auto_runs_torch(tiny_onnx, monkeypatch):
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, symmetry="identity", log=lines.append)
    assert evaluator.provider == "torch cpu fp32" and "on torch cpu fp32" in lines[0] and len(lines) == 1
    assert evaluator.on_gpu and not cpu_reference(tiny_onnx).on_gpu
    reference = cpu_reference(tiny_onnx)
    assert outputs_difference(reference.run, evaluator.run, reference.board_sizes[0]) <= 1e-4


def test_on_the_torch_backend_an_aux_network_still_gives_the_search_its_score_and_ownership(tiny_aux_onnx,
                                                                                           monkeypatch):
    from tabula.engine.rules.game import GameState

    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    evaluator = OnnxEvaluator(tiny_aux_onnx, symmetry="identity", log=None)
    assert evaluator.on_gpu and evaluator.has_score_and_ownership
    evaluation = evaluator.evaluate([GameState(9)])
    expected = cpu_reference(tiny_aux_onnx).evaluate([GameState(9)])
    assert evaluation.score is not None and evaluation.ownership.shape == (1, 81)
    assert np.allclose(evaluation.score, expected.score, atol=1e-3)
    assert np.allclose(evaluation.ownership, expected.ownership, atol=1e-4)


def test_the_engine_shapes_its_search_for_a_gpu_or_the_cpu(tiny_onnx, monkeypatch):
    """Threads, batch, batches in flight and playouts a leaf in flight left at 0 become ON_GPU's (1 × 64 × 2,
    measured on an H200; 32) where the network runs on a GPU and ON_CPU's (2 × 8 × 1; 1,024) on the CPU; a value
    asked for is kept."""
    from tabula.engine.config import ON_CPU, ON_GPU

    def engine(**search):
        config = EngineConfig(net=NetConfig(weights=(str(tiny_onnx),)), search=SearchConfig(**search))
        resolved = search_player.from_config(config).config
        return {"threads": resolved.threads, "batch_size": resolved.batch_size,
                "batches_in_flight": resolved.batches_in_flight, "playouts_per_leaf": resolved.playouts_per_leaf}

    assert engine() == ON_CPU == {"threads": 2, "batch_size": 8, "batches_in_flight": 1,
                                  "playouts_per_leaf": 1024}  # this machine has no GPU
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    assert engine() == ON_GPU == {"threads": 1, "batch_size": 64, "batches_in_flight": 2, "playouts_per_leaf": 32}
    for asked in (1, 3):
        assert engine(batches_in_flight=asked)["batches_in_flight"] == asked
    assert engine(threads=3, batch_size=16, playouts_per_leaf=8) == {
        "threads": 3, "batch_size": 16, "batches_in_flight": 2, "playouts_per_leaf": 8}  # kept


def test_a_search_built_directly_resolves_its_shape_from_its_evaluator(tiny_onnx, monkeypatch):
    from tabula.engine.play.search import Search

    assert Search(cpu_reference(tiny_onnx), SearchConfig()).config.batch_size == 8
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", CpuTorchRunner)
    on_gpu = OnnxEvaluator(tiny_onnx, log=None)
    assert Search(on_gpu, SearchConfig()).config.threads == 1
    assert Search(evaluator_module.NetworkSet([on_gpu]), SearchConfig()).config.batch_size == 64


def test_a_torch_backend_whose_outputs_disagree_is_not_used(tiny_onnx, monkeypatch):
    class Wrong(CpuTorchRunner):
        def run(self, planes, graphs=True):
            policy, value = super().run(planes, graphs)
            return policy, -value

    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(torch_backend, "TorchRunner", Wrong)
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, log=lines.append)
    assert evaluator.provider == CPU
    assert "torch on CUDA failed: its outputs differ from onnxruntime's" in lines[0]
    with pytest.raises(ValueError, match="torch backend cannot run it"):
        OnnxEvaluator(tiny_onnx, provider="torch", log=None)


def test_with_a_gpu_that_torch_cannot_use_auto_falls_back_to_the_cpu(tiny_onnx, monkeypatch):
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: True)
    if torch.cuda.is_available():
        pytest.skip("torch can use the GPU here")
    lines = []
    evaluator = OnnxEvaluator(tiny_onnx, log=lines.append)
    assert evaluator.provider == CPU and "torch on CUDA failed: torch sees no CUDA device" in lines[0]


def test_no_gpu_is_seen_when_cuda_visible_devices_hides_them(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert evaluator_module.nvidia_gpu_present() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert evaluator_module.nvidia_gpu_present() is False


def test_the_gpu_benchmark_commands_need_neither_the_games_nor_sgfmill(tmp_path, monkeypatch, capsys):
    """The lent GPU machine has no ../shared games and no sgfmill: `export --random` and `bench net` (the first
    commands of the GPU plan in docs/BENCHMARKS.md) fall back to random positions there."""
    from tabula.tools.bench import net as bench_net
    from tabula.tools.learn import export

    monkeypatch.setitem(sys.modules, "sgfmill", None)  # `from sgfmill import sgf` now raises ImportError
    net = tmp_path / "r.onnx"
    assert export.main(["--random", "--blocks", "1", "--filters", "4", "--calibration", "16", str(net)]) == 0
    results = tmp_path / "results.jsonl"
    assert bench_net.main([str(net), "--batches", "1,4", "--threads", "1", "--paths", "onnx-fp32,torch-cuda-fp16",
                           "--seconds", "0.05", "--rounds", "1", "--accuracy-positions", "8",
                           "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "onnx-fp32" in out and "GFLOP per position" in out
    if not torch.cuda.is_available():
        assert "# torch-cuda-fp16: not available here: torch sees no CUDA device" in out
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["what"] == "net" and record["path"] == "onnx-fp32" and record["gflop_per_position"] > 0
    assert set(record["positions_per_s"]) == {"1", "4"} and record["best_batch"] in (1, 4)

# -- on a GPU ----------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("cuda_graphs", [True, False])
@pytest.mark.parametrize("path", WEIGHTS)
def test_gpu_torch_matches_the_cpu_within_half_precision(path, precision, cuda_graphs):
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU that torch can use")
    reference = cpu_reference(path)
    runner = torch_backend.TorchRunner(path, device="cuda", precision=precision, cuda_graphs=cuda_graphs,
                                       max_batch=64)
    size = reference.board_sizes[0]
    tolerance = 1e-3 if precision == "fp32" else GPU_TOLERANCE
    for count in (1, 3, 8, 64, 100):  # a bucket, padding, the largest bucket, and chunks
        planes = comparison_planes(size, count=count, seed=count)
        (p0, v0), (p1, v1) = reference.run(planes), runner.run(planes)
        everything = np.ones(p0.shape, dtype=bool)
        probabilities = evaluator_module.masked_softmax
        assert np.abs(probabilities(p0, everything) - probabilities(p1, everything)).max() <= tolerance
        assert np.abs(v0 - v1).max() <= tolerance


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp32"])
def test_gpu_torch_runs_a_pooled_network_at_every_size(tiny_pooled_onnx, precision):
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU that torch can use")
    reference = cpu_reference(tiny_pooled_onnx)
    runner = torch_backend.TorchRunner(str(tiny_pooled_onnx), device="cuda", precision=precision, max_batch=16)
    runner.prepare((9, 13, 19), 8)
    assert {(1, 9), (8, 13), (8, 19)} <= set(runner._graphs) and (16, 9) not in runner._graphs
    for size in (9, 13, 19):
        assert outputs_difference(reference.run, runner.run, size) <= (1e-3 if precision == "fp32" else GPU_TOLERANCE)


@pytest.mark.gpu
def test_gpu_auto_picks_the_gpu_and_says_so():
    if not evaluator_module.nvidia_gpu_present():
        pytest.skip("needs an NVIDIA GPU")
    lines = []
    evaluator = OnnxEvaluator(WEIGHTS[0], log=lines.append)
    assert evaluator.provider != CPU, lines
    assert len(lines) == 1 and evaluator.provider in lines[0]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cuda", "tensorrt"])
def test_gpu_onnxruntime_providers_match_the_cpu(name):
    import onnxruntime

    if PROVIDERS[name] not in onnxruntime.get_available_providers():
        pytest.skip(f"this onnxruntime has no {PROVIDERS[name]}")
    reference = cpu_reference(WEIGHTS[0])
    gpu = OnnxEvaluator(WEIGHTS[0], symmetry="identity", provider=name, log=None)
    assert gpu.provider.startswith(PROVIDERS[name])
    assert outputs_difference(reference.run, gpu.run, 19) <= GPU_TOLERANCE
