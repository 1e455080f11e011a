"""googlenet_v1 and alexnet_bvlc (perfmodel/network/zoo/torch7.py) against torch replicas of their
Lua / Caffe definitions: parameters, forward matmul FLOPs, saved activations, LRN pricing.

Oracle: the two networks written here in plain torch straight from soumith/inception.torch's
``googlenet.lua`` @ 1c8f2080 and Caffe's ``models/bvlc_alexnet/deploy.prototxt`` (Torch's floor-mode
pools are PyTorch's default; Caffe's ceil-mode pools ``ceil_mode=True``; Torch's
``SpatialCrossMapLRN`` and Caffe's LRN are ``nn.LocalResponseNorm``), not from perfmodel's builder.
"""

from __future__ import annotations

import pytest

from perfmodel.cost.kernels import network_kernels
from perfmodel.errors import UsageError
from perfmodel.network import compile_counts, get_model

torch = pytest.importorskip("torch")
nn = torch.nn

# (input channels, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection): googlenet.lua's calls
LUA_INCEPTION = [(192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64),
                 (480, 192, 96, 204, 16, 48, 64), (508, 160, 112, 224, 24, 64, 64),
                 (512, 128, 128, 256, 24, 64, 64), (512, 112, 144, 288, 32, 64, 64),
                 (528, 256, 160, 320, 32, 128, 128), (832, 256, 160, 320, 48, 128, 128),
                 (832, 384, 192, 384, 48, 128, 128)]


def _cr(cin: int, cout: int, k: int, pad: int = 0, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, pad, groups=groups), nn.ReLU(inplace=True)]


class Inception(nn.Module):
    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, cp: int) -> None:
        super().__init__()
        self.b1 = nn.Sequential(*_cr(cin, c1, 1))
        self.b2 = nn.Sequential(*_cr(cin, c3r, 1), *_cr(c3r, c3, 3, 1))
        self.b3 = nn.Sequential(*_cr(cin, c5r, 1), *_cr(c5r, c5, 5, 2))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), *_cr(cin, cp, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


def lua_googlenet() -> nn.Module:
    lrn = (11, 0.00109999999404, 0.5, 2.0)
    mods: list[nn.Module] = [*_cr(3, 64, 7, 3, 2), nn.MaxPool2d(3, 2, 1), nn.LocalResponseNorm(*lrn),
                             *_cr(64, 64, 1), *_cr(64, 192, 3, 1), nn.LocalResponseNorm(*lrn), nn.MaxPool2d(3, 2, 1)]
    for i, cfg in enumerate(LUA_INCEPTION):
        mods.append(Inception(*cfg))
        if i == 1:
            mods.append(nn.MaxPool2d(3, 2))
        elif i == 6:
            mods.append(nn.MaxPool2d(3, 2, 1))
    mods += [nn.AvgPool2d(7, 1), nn.Flatten(), nn.Linear(1024, 1008)]
    return nn.Sequential(*mods)


def caffe_alexnet() -> nn.Module:
    return nn.Sequential(
        *_cr(3, 96, 11, 0, 4), nn.LocalResponseNorm(5, 1e-4, 0.75), nn.MaxPool2d(3, 2, ceil_mode=True),
        *_cr(96, 256, 5, 2, groups=2), nn.LocalResponseNorm(5, 1e-4, 0.75), nn.MaxPool2d(3, 2, ceil_mode=True),
        *_cr(256, 384, 3, 1), *_cr(384, 384, 3, 1, groups=2), *_cr(384, 256, 3, 1, groups=2),
        nn.MaxPool2d(3, 2, ceil_mode=True), nn.Flatten(),
        nn.Linear(9216, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5), nn.Linear(4096, 1000))


REPLICAS = {"googlenet_v1": lua_googlenet, "alexnet_bvlc": caffe_alexnet}


class _KeepsInputAndOutput(torch.autograd.Function):
    """LRN whose backward keeps what cuDNN's does: ``cudnnLRNCrossChannelBackward`` reads x, y and
    dy. (PyTorch's own ``local_response_norm`` is a chain of ops that saves several intermediates;
    the priced runs are Torch7 on cuDNN.)"""

    @staticmethod
    def forward(ctx, x, size):  # type: ignore[no-untyped-def]
        y = nn.functional.local_response_norm(x, size)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, dy):  # type: ignore[no-untyped-def]
        return dy, None


class CudnnLRN(nn.Module):
    def __init__(self, lrn: nn.LocalResponseNorm) -> None:
        super().__init__()
        self.size = lrn.size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _KeepsInputAndOutput.apply(x, self.size)


def with_cudnn_lrn(model: nn.Module) -> nn.Module:
    for i, m in enumerate(model):
        if isinstance(m, nn.LocalResponseNorm):
            model[i] = CudnnLRN(m)
    return model


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_parameters_and_forward_flops_equal_the_replica(name: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    model = REPLICAS[name]()
    net = get_model(name)
    assert net.params == sum(p.numel() for p in model.parameters())
    with FlopCounterMode(display=False) as fc:
        model(torch.randn(1, 3, 224, 224))
    assert compile_counts(net).total("fwd_matmul_flops") == pytest.approx(fc.get_total_flops(), rel=1e-9)


def test_published_parameter_count_of_bvlc_alexnet() -> None:
    # BVLC AlexNet's 60,965,224 weights and biases (Caffe's bvlc_alexnet.caffemodel, as counted by
    # the replica above; torchvision's one-GPU variant has 61,100,840)
    assert get_model("alexnet_bvlc").params == 60_965_224


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_saved_activations_match_autograd(name: str) -> None:
    from perfmodel.validation.autograd_saved import saved_storages

    saved = saved_storages(with_cudnn_lrn(REPLICAS[name]()), (3, 224, 224)).float_elements
    assert compile_counts(get_model(name)).total("saved_elems") == pytest.approx(saved, rel=0.15)


def test_lrn_layers_and_their_traffic() -> None:
    net = get_model("googlenet_v1")
    lrn = [la for la in net.layers if la.kind == "lrn"]
    assert [la.out_shape for la in lrn] == [(64, 56, 56), (192, 56, 56)]
    assert all(la.attr("size") == 11 and la.params == 0 for la in lrn)
    lk = network_kernels(net)
    for la in lrn:
        i = net.layers.index(la)
        n = la.out_elems
        assert (lk.mem_elems_fwd[i], lk.mem_elems_bwd[i]) == (2 * n, 4 * n)  # x -> y; x, y, dy -> dx
    assert net.shape_of("mixed4a.cat") == (508, 13, 13)  # 204 filters in 4a's 3x3, floor-mode pools


def test_fixed_classifier_inputs_refuse_other_sizes() -> None:
    with pytest.raises(UsageError, match=r"valid image sizes: 209 to 240"):
        get_model("googlenet_v1", 256)
    with pytest.raises(UsageError, match=r"valid image sizes: 199 to 230"):
        get_model("alexnet_bvlc", 240)
