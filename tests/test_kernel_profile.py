"""Kernel profiles of whole training steps (perfmodel/validation/kernel_profile.py) and the campaign's
``profile`` step: kernel names as cuDNN, cuBLAS, PyTorch and NCCL spell them, and a CPU run."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from cli_helpers import load_file

from perfmodel.errors import DataError, UsageError
from perfmodel.validation.kernel_profile import KERNEL_CLASSES, KernelTime, class_totals, classify

campaign = load_file("scripts/measure_campaign.py", "measure_campaign")

# kernel names as profilers print them (pytorch/pytorch issue #81940's TF32 NCHW convolution;
# perfmodel/data/KERNELS.md's Volta kernels; PyTorch's and NCCL's kernel templates)
NAMED = [
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>", "transpose"),
    ("void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>", "transpose"),
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1"
     "_tensor16x8x8_kernel", "convolution"),
    ("volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1", "convolution"),
    ("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*)", "convolution"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__half, float, 512, true, 1>(cudnnTensorStruct)", "batch_norm"),
    ("void at::native::batch_norm_collect_statistics_kernel<at::native::InvStd, float, float, float, int>",
     "batch_norm"),
    ("ampere_sgemm_128x64_nn", "gemm"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
     "TensorListMetadata<3>>", "optimizer"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)", "pooling"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>", "softmax"),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4>",
     "dropout"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>",
     "reduction"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)",
     "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>", "elementwise"),
    ("aten::mkldnn_convolution", "convolution"),
    ("aten::native_batch_norm_backward", "batch_norm"),
    ("aten::addmm", "gemm"),
    ("aten::clamp_min", "elementwise"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "gemm"),  # Hopper cuBLAS
    ("splitKreduce_kernel", "gemm"),
    ("void cudnn::engines_precompiled::nhwcAddPaddingKernel<__half, __half, float, true>", "transpose"),
    ("void cudnn::ops::nhwcToFoldedNhwcKernel<__half>", "transpose"),
    ("aten::slow_conv_transpose2d", "convolution"),
    ("aten::im2col", "convolution"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>>", "attention"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", "attention"),
    ("something_new_kernel", "other"),
]


@pytest.mark.parametrize(("name", "kind"), NAMED)
def test_kernel_names_fall_in_their_class(name: str, kind: str) -> None:
    assert classify(name) == kind


def test_every_class_is_reachable() -> None:
    assert {k for _, k in NAMED} == {k for k, _ in KERNEL_CLASSES} | {"other"}


def test_class_totals_add_up_and_come_largest_first() -> None:
    rows = [KernelTime("a", "convolution", 2, 3e-3), KernelTime("b", "transpose", 4, 1e-3),
            KernelTime("c", "convolution", 1, 1e-3)]
    totals = class_totals(rows)
    assert list(totals) == ["convolution", "transpose"]
    assert totals["convolution"] == pytest.approx((4e-3, 0.8))
    assert sum(share for _, share in totals.values()) == pytest.approx(1.0)
    for calls, secs in ((-1, 0.0), (1, float("nan"))):
        with pytest.raises(DataError, match="must be finite and >= 0"):
            KernelTime("d", "other", calls, secs)


def test_profile_on_the_cpu_writes_kernels_and_classes(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    campaign.run_profiles((("tiny_cnn", "fp32", "nchw"), ("tiny_cnn", "fp32", "nhwc")), 2, tmp_path, "cpu")
    with (tmp_path / "kernels.csv").open() as fh:
        kernels = list(csv.DictReader(fh))
    with (tmp_path / "kernel_classes.csv").open() as fh:
        classes = list(csv.DictReader(fh))
    keys = {"tiny_cnn/2/fp32/nchw/profile", "tiny_cnn/2/fp32/nhwc/profile"}
    assert {r["key"] for r in kernels} == keys == {r["key"] for r in classes}
    for key in keys:
        mine = [r for r in classes if r["key"] == key]
        assert sum(float(r["share"]) for r in mine) == pytest.approx(1.0, abs=1e-4)
        assert "convolution" in {r["class"] for r in mine}
        secs = [float(r["seconds_per_step"]) for r in kernels if r["key"] == key]
        assert secs == sorted(secs, reverse=True) and secs[0] > 0
    assert torch.__version__ in (tmp_path / "environment.json").read_text()


def test_bad_profile_requests_are_usage_errors() -> None:
    pytest.importorskip("torch")
    from perfmodel.validation.kernel_profile import profile_step

    with pytest.raises(UsageError, match=r"steps \(0\)"):
        profile_step("tiny_cnn", 2, "fp32", device="cpu", steps=0)
    with pytest.raises(UsageError, match="amp needs --device cuda"):
        profile_step("tiny_cnn", 2, "amp", device="cpu")
    with pytest.raises(UsageError, match=r"unknown device 'meta' \(valid: cpu, cuda\)"):
        profile_step("tiny_cnn", 2, "fp32", device="meta")


def test_gpu_events_count_kernels_not_annotations() -> None:
    """torch 2.13 puts user annotations (the optimizer's ``Optimizer.step#SGD.step`` range) on the
    GPU's timeline beside the kernels they enclose: only the kernels count."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from perfmodel.validation import kernel_profile as kp

    def ev(name: str, us: float, annotation: bool = False, cuda: bool = True) -> SimpleNamespace:
        kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
        return SimpleNamespace(name=name, device_type=kind, is_user_annotation=annotation,
                               time_range=SimpleNamespace(elapsed_us=lambda: us))

    prof = SimpleNamespace(events=lambda: [ev("multi_tensor_apply_kernel", 100.0),
                                           ev("Optimizer.step#SGD.step", 110.0, annotation=True),
                                           ev("aten::add_", 50.0, cuda=False)])
    rows = kp._per_step(kp.kernel_events(torch, prof, "cuda"), 1)
    assert [(r.name, r.kind) for r in rows] == [("multi_tensor_apply_kernel", "optimizer")]
    assert rows[0].seconds == pytest.approx(100e-6)


def test_a_failed_profile_is_said_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    failed = campaign.run_profiles((("no_such_model", "fp32", "nchw"),), 2, tmp_path, "cpu")
    assert failed == 1 and "no_such_model/2/fp32/nchw/profile: failed" in capsys.readouterr().out
    assert (tmp_path / "failed.csv").exists()
