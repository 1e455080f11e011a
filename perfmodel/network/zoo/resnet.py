"""ResNet, ResNeXt, Wide ResNet as torchvision has them; NVIDIA's (SE-)ResNeXt101-32x4d."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..builder import NetBuilder
from ..graph import Network
from ._common import conv_bn_act
from .entry import ModelEntry

__all__ = [
    "ResNetSpec",
    "resnet",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnext50_32x4d",
    "resnext101_32x8d",
    "wide_resnet50_2",
    "resnext101_32x4d",
    "se_resnext101_32x4d",
    "ENTRIES",
]

TV_SOURCE = "torchvision.models.resnet (torchvision 0.29), He et al. 2016 (v1.5: stride in the 3x3)"
RESNEXT_SOURCE = "torchvision.models.resnet (torchvision 0.29), Xie et al. 2017 (ResNeXt)"
WIDE_SOURCE = "torchvision.models.resnet (torchvision 0.29), Zagoruyko & Komodakis 2016"
NV_SOURCE = (
    "NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets"
    " image_classification/models/resnet.py (ResNeXt, Xie et al. 2017)"
)
NV_SE_SOURCE = (
    "NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets"
    " image_classification/models/resnet.py (SE-ResNeXt, Hu et al. 2018; its SE block squeezes"
    " to a fixed 16 channels and is fused into addcmul)"
)


@dataclass(frozen=True)
class ResNetSpec:
    """A ResNet family member: blocks per stage, block type and the 3x3 conv's groups and width."""

    layers: tuple[int, int, int, int]
    bottleneck: bool = True
    groups: int = 1
    width_per_group: int = 64
    se_channels: int = 0  # squeeze-and-excitation bottleneck channels (0: no SE)


def _basic_block(b: NetBuilder, x: str, planes: int, stride: int, prefix: str) -> str:
    cin = b.shape(x)[0]
    y = b.conv(x, planes, 3, stride=stride, padding=1, bias=False, name=f"{prefix}.conv1")
    y = b.act(b.bn(y, name=f"{prefix}.bn1"), "relu", inplace=True, name=f"{prefix}.relu1")
    y = b.conv(y, planes, 3, padding=1, bias=False, name=f"{prefix}.conv2")
    y = b.bn(y, name=f"{prefix}.bn2")
    identity = x
    if stride != 1 or cin != planes:
        identity = conv_bn_act(b, x, planes, 1, f"{prefix}.downsample", stride=stride, act=None,
                               names=("0", "1", ""))
    y = b.add(y, identity, inplace=True, name=f"{prefix}.add")
    return b.act(y, "relu", inplace=True, name=f"{prefix}.relu2")


def _bottleneck(
    b: NetBuilder, x: str, planes: int, stride: int, spec: ResNetSpec, prefix: str
) -> str:
    cin = b.shape(x)[0]
    width = int(planes * (spec.width_per_group / 64.0)) * spec.groups
    cout = planes * 4
    y = b.conv(x, width, 1, bias=False, name=f"{prefix}.conv1")
    y = b.act(b.bn(y, name=f"{prefix}.bn1"), "relu", inplace=True, name=f"{prefix}.relu1")
    y = b.conv(y, width, 3, stride=stride, padding=1, groups=spec.groups, bias=False,
               name=f"{prefix}.conv2")
    y = b.act(b.bn(y, name=f"{prefix}.bn2"), "relu", inplace=True, name=f"{prefix}.relu2")
    y = b.conv(y, cout, 1, bias=False, name=f"{prefix}.conv3")
    y = b.bn(y, name=f"{prefix}.bn3")
    identity = x
    if stride != 1 or cin != cout:
        identity = conv_bn_act(b, x, cout, 1, f"{prefix}.downsample", stride=stride, act=None,
                               names=("0", "1", ""))
    if spec.se_channels:
        # NVIDIA's SqueezeAndExcitation: pool, 1x1 conv to se_channels, ReLU, 1x1 conv, sigmoid;
        # then ``addcmul(residual, out, se(out))``: a broadcast multiply and an add into its result.
        s = b.adaptive_avgpool(y, 1, name=f"{prefix}.squeeze.pooling")
        s = b.conv(s, spec.se_channels, 1, name=f"{prefix}.squeeze.squeeze")
        s = b.act(s, "relu", inplace=True, name=f"{prefix}.squeeze.activation")
        s = b.conv(s, cout, 1, name=f"{prefix}.squeeze.expand")
        s = b.act(s, "sigmoid", name=f"{prefix}.squeeze.sigmoid")
        y = b.mul(y, s, name=f"{prefix}.scale", fused_add=True)
    y = b.add(y, identity, inplace=True, name=f"{prefix}.add")
    return b.act(y, "relu", inplace=True, name=f"{prefix}.relu3")


def resnet(name: str, spec: ResNetSpec, image_size: int = 224, source: str = TV_SOURCE) -> Network:
    """Stem (7x7 conv, BN, ReLU, max-pool), four stages of residual blocks, pool and fc."""
    b = NetBuilder(name, (3, image_size, image_size), source=source)
    with b.block("stem"):
        x = conv_bn_act(b, "input", 64, 7, "", stride=2, padding=3, names=("conv1", "bn1", "relu"))
        x = b.maxpool(x, 3, 2, padding=1, name="maxpool")
    for stage, n in enumerate(spec.layers):
        planes = 64 * 2**stage
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            prefix = f"layer{stage + 1}.{i}"
            with b.block(prefix):
                if spec.bottleneck:
                    x = _bottleneck(b, x, planes, stride, spec, prefix)
                else:
                    x = _basic_block(b, x, planes, stride, prefix)
    with b.block("head"):
        x = b.flatten(b.adaptive_avgpool(x, 1, name="avgpool"), name="flatten")
        b.linear(x, 1000, name="fc")
    return b.build()


#: name -> (spec, source)
SPECS: dict[str, tuple[ResNetSpec, str]] = {
    "resnet18": (ResNetSpec((2, 2, 2, 2), bottleneck=False), TV_SOURCE),
    "resnet34": (ResNetSpec((3, 4, 6, 3), bottleneck=False), TV_SOURCE),
    "resnet50": (ResNetSpec((3, 4, 6, 3)), TV_SOURCE),
    "resnet101": (ResNetSpec((3, 4, 23, 3)), TV_SOURCE),
    "resnet152": (ResNetSpec((3, 8, 36, 3)), TV_SOURCE),
    "resnext50_32x4d": (ResNetSpec((3, 4, 6, 3), groups=32, width_per_group=4), RESNEXT_SOURCE),
    "resnext101_32x8d": (ResNetSpec((3, 4, 23, 3), groups=32, width_per_group=8), RESNEXT_SOURCE),
    "wide_resnet50_2": (ResNetSpec((3, 4, 6, 3), width_per_group=128), WIDE_SOURCE),
    "resnext101_32x4d": (ResNetSpec((3, 4, 23, 3), groups=32, width_per_group=4), NV_SOURCE),
    "se_resnext101_32x4d": (
        ResNetSpec((3, 4, 23, 3), groups=32, width_per_group=4, se_channels=16),
        NV_SE_SOURCE,
    ),
}


def _builder(name: str) -> Callable[[int], Network]:
    spec, source = SPECS[name]

    def build(image_size: int = 224) -> Network:
        return resnet(name, spec, image_size, source)

    build.__name__ = name
    build.__doc__ = f"{name} ({source})."
    return build


resnet18 = _builder("resnet18")
resnet34 = _builder("resnet34")
resnet50 = _builder("resnet50")
resnet101 = _builder("resnet101")
resnet152 = _builder("resnet152")
resnext50_32x4d = _builder("resnext50_32x4d")
resnext101_32x8d = _builder("resnext101_32x8d")
wide_resnet50_2 = _builder("wide_resnet50_2")
resnext101_32x4d = _builder("resnext101_32x4d")
se_resnext101_32x4d = _builder("se_resnext101_32x4d")

ENTRIES = tuple(
    ModelEntry(name, _builder(name), 224, source, min_image_size=32)
    for name, (_, source) in SPECS.items()
)
