"""The 3-D U-Net of NVIDIA's nnU-Net example (zoo ``unet3d``) against a torch replica of MONAI's DynUNet."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import UsageError
from perfmodel.network import compile_counts, get_model
from perfmodel.network.zoo.unet3d import levels, unet3d, unet3d_tf

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from torch_nets import torch_params, torch_saved  # noqa: E402

#: ``sum(p.numel() for p in model.parameters())`` and forward FLOPs (torch.utils.flop_counter,
#: batch 1, 128^3) of MONAI 1.0.0's own ``DynUNet`` (pip install monai==1.0.0, torch 2.13 CPU),
#: built with the arguments nnunet/nn_unet.py passes for task 01 at DeepLearningExamples 4da7bf28:
#: DynUNet(3, 4, 4, kernels [3]*6, strides [1, 2, 2, 2, 2, 2], upsample kernels [2]*5, norm
#: INSTANCE affine, LeakyReLU 0.01 not in place, trans_bias=True). The replica below is written
#: from that definition and must give the same numbers.
MONAI_PARAMS = 31_192_868
MONAI_FWD_FLOPS = 965_603_229_696


class Block(nn.Module):
    """MONAI's UnetBasicBlock: two (conv without bias -> affine instance norm -> LeakyReLU)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv3d(cout, cout, 3, 1, 1, bias=False)
        self.norm1 = nn.InstanceNorm3d(cout, affine=True)
        self.norm2 = nn.InstanceNorm3d(cout, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.leaky_relu(self.norm1(self.conv1(x)), 0.01)
        return nn.functional.leaky_relu(self.norm2(self.conv2(x)), 0.01)


class DynUNetReplica(nn.Module):
    """Filters 32, 64, ... capped at 320; stride-2 blocks down; 2x2x2 transposed convolutions with
    bias, a concatenation with the skip (transposed output first) and a block up; 1x1x1 out conv."""

    def __init__(self, depth: int, cin: int = 4, classes: int = 4, out_kernel: int = 1) -> None:
        super().__init__()
        f = [min(2 ** (5 + i), 320) for i in range(depth + 1)]
        self.down = nn.ModuleList([Block(cin, f[0], 1)] + [Block(f[i - 1], f[i], 2) for i in range(1, depth + 1)])
        self.trans = nn.ModuleList([nn.ConvTranspose3d(f[i + 1], f[i], 2, 2) for i in reversed(range(depth))])
        self.up = nn.ModuleList([Block(2 * f[i], f[i], 1) for i in reversed(range(depth))])
        self.out = nn.Conv3d(f[0], classes, out_kernel, padding=out_kernel // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
        skips.pop()  # the bottleneck's output feeds the first transposed convolution only
        for trans, block in zip(self.trans, self.up, strict=True):
            x = block(torch.cat((trans(x), skips.pop()), 1))
        return self.out(x)


def meta_flops(model: nn.Module, size: int) -> int:
    """Forward FLOPs of one 4 x size^3 sample, counted on the meta device (no arithmetic runs)."""
    model = model.to("meta")
    with FlopCounterMode(display=False) as fc:
        model(torch.empty(1, 4, size, size, size, device="meta"))
    return int(fc.get_total_flops())


def test_default_is_the_dynunet_nnunet_builds_for_brats() -> None:
    net = get_model("unet3d")
    assert net.image_size == 128 and net.input_shape == (4, 128, 128, 128)
    assert net.params == MONAI_PARAMS == torch_params(DynUNetReplica(5))
    assert net.layers[-1].out_shape == (4, 128, 128, 128)
    bottom = [layer for layer in net.layers if layer.name.startswith("bottleneck.conv")]
    assert [layer.out_shape for layer in bottom] == [(320, 4, 4, 4)] * 2
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("conv") == 23 and kinds.count("conv_transpose") == 5 and kinds.count("groupnorm") == 22
    assert all(layer.fn == "leaky_relu" and not layer.inplace for layer in net.layers if layer.kind == "act")


def test_forward_flops_equal_monai_and_the_replica() -> None:
    flops = compile_counts(get_model("unet3d")).total("fwd_matmul_flops")
    assert flops == MONAI_FWD_FLOPS == meta_flops(DynUNetReplica(5), 128)


def test_tensorflow_variant_ends_in_a_3x3x3_convolution_and_a_softmax() -> None:
    """UNet_3D_Medical's output_layer: convolution(kernel_size=3, normalization='none') -> bias, then
    softmax; everything before it is the PyTorch example's network."""
    net, ref = get_model("unet3d_tf"), get_model("unet3d")
    assert net.params - ref.params == (4 * 32 * 27 + 4) - (4 * 32 + 4)
    assert net.params == torch_params(DynUNetReplica(5, out_kernel=3))
    assert compile_counts(net).total("fwd_matmul_flops") == meta_flops(DynUNetReplica(5, out_kernel=3), 128)
    assert [layer.kind for layer in net.layers[-2:]] == ["conv", "softmax"]
    assert net.layers[-2].kernel == (3, 3, 3) and net.layers[-1].out_shape == (4, 128, 128, 128)
    assert [layer.out_shape for layer in net.layers[:-2]] == [layer.out_shape for layer in ref.layers[:-1]]
    assert unet3d_tf(32).params == torch_params(DynUNetReplica(3, out_kernel=3))


@pytest.mark.parametrize("size,depth", [(16, 2), (32, 3), (64, 4), (96, 4), (256, 5)])
def test_other_patch_sizes_match_the_replica(size: int, depth: int) -> None:
    """get_unet_params stops halving before a map would drop under 2 * min_fmap (8) voxels a side,
    and after depth (5) levels."""
    assert levels(size) == depth
    net = unet3d(size)
    replica = DynUNetReplica(depth)
    assert net.params == torch_params(replica)
    assert compile_counts(net).total("fwd_matmul_flops") == meta_flops(replica, size)


def test_saved_activations_match_autograd() -> None:
    """At 16^3 (two levels), against the storages autograd keeps for backward; instance norm as a
    group norm keeps x and per-(sample, channel) statistics, as PyTorch's batch norm over N*C does."""
    saved = compile_counts(unet3d(16)).total("saved_elems")
    assert saved == pytest.approx(torch_saved(DynUNetReplica(2), (4, 16, 16, 16)), rel=0.01)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(min_value=16, max_value=600))
def test_every_patch_size_is_built_or_refused_with_its_multiple(size: int) -> None:
    """A patch is built exactly when 2**levels divides it; then the bottleneck keeps 4 to 7 voxels a
    side (or sits 5 levels down) and the output has the patch's shape, 4 classes."""
    n = levels(size)
    if n < 2 or size % 2**n:
        with pytest.raises(UsageError, match="must be a multiple of"):
            unet3d(size)
        return
    net = unet3d(size)
    side = net.layers[net.index["bottleneck.conv2"]].out_shape[1]
    assert side == size // 2**n and side >= 4 and (side < 8 or n == 5)
    assert net.layers[-1].out_shape == (4, size, size, size)


@pytest.mark.parametrize("size", [100, 72, 50])
def test_patch_sizes_the_strides_do_not_divide_are_refused(size: int) -> None:
    with pytest.raises(UsageError, match="must be a multiple of"):
        unet3d(size)


def test_too_small_a_patch_is_refused() -> None:
    with pytest.raises(UsageError, match="too small"):
        get_model("unet3d", 15)


@pytest.mark.parametrize("size", [17, 36, 100, 129, 300])
def test_a_refused_patch_names_the_closest_sizes_that_build(size: int) -> None:
    """The sizes the refusal names build, and no size strictly between them and the patch does
    (brute force over the builder itself, not over the rule the message uses)."""
    with pytest.raises(UsageError, match="closest valid sizes: ") as info:
        unet3d(size)
    lower, upper = (int(v) for v in str(info.value).rsplit(": ", 1)[1].split(" or "))
    assert lower < size < upper
    for ok in (lower, upper):
        unet3d(ok)
    for between in [*range(lower + 1, size), *range(size + 1, upper)]:
        with pytest.raises(UsageError):
            unet3d(between)
