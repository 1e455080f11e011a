"""DenseNet-121 and DenseNet-161 as torchvision defines them (Huang et al. 2017)."""

from __future__ import annotations

from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["densenet", "densenet121", "densenet161", "ENTRIES"]

SOURCE = "torchvision.models.densenet121 (torchvision 0.29), Huang et al. 2017"
#: torchvision's ``densenet161``: growth rate 48, blocks (6, 12, 36, 24), 96 initial features,
#: bottleneck 4 x growth (torchvision/models/densenet.py, ``densenet161``; the paper's DenseNet-161
#: with k = 48, Huang et al. 2017, Table 1 and its ImageNet models)
SOURCE_161 = "torchvision.models.densenet161 (torchvision 0.28), Huang et al. 2017"


def _dense_layer(b: NetBuilder, features: list[str], growth: int, bn_size: int, prefix: str) -> str:
    """Concatenate the earlier feature maps, BN-ReLU-conv1x1, BN-ReLU-conv3x3 to ``growth``."""
    x = b.concat(features, name=f"{prefix}.cat")
    x = b.act(b.bn(x, name=f"{prefix}.norm1"), "relu", inplace=True, name=f"{prefix}.relu1")
    x = b.conv(x, bn_size * growth, 1, bias=False, name=f"{prefix}.conv1")
    x = b.act(b.bn(x, name=f"{prefix}.norm2"), "relu", inplace=True, name=f"{prefix}.relu2")
    return b.conv(x, growth, 3, padding=1, bias=False, name=f"{prefix}.conv2")


def densenet(
    name: str,
    block_config: tuple[int, ...],
    growth: int = 32,
    init_features: int = 64,
    bn_size: int = 4,
    image_size: int = 224,
    source: str = SOURCE,
) -> Network:
    """Stem, dense blocks joined by transitions (BN-ReLU-conv1x1-avgpool halving channels), head."""
    b = NetBuilder(name, (3, image_size, image_size), source=source)
    with b.block("stem"):
        x = b.conv("input", init_features, 7, stride=2, padding=3, bias=False,
                   name="features.conv0")
        x = b.act(b.bn(x, name="features.norm0"), "relu", inplace=True, name="features.relu0")
        x = b.maxpool(x, 3, 2, padding=1, name="features.pool0")
    for i, n in enumerate(block_config):
        blk = f"features.denseblock{i + 1}"
        with b.block(blk):
            features = [x]
            for j in range(n):
                y = _dense_layer(b, features, growth, bn_size, f"{blk}.denselayer{j + 1}")
                features.append(y)
            x = b.concat(features, name=f"{blk}.cat")
        if i != len(block_config) - 1:
            tr = f"features.transition{i + 1}"
            with b.block(tr):
                x = b.act(b.bn(x, name=f"{tr}.norm"), "relu", inplace=True, name=f"{tr}.relu")
                x = b.conv(x, b.shape(x)[0] // 2, 1, bias=False, name=f"{tr}.conv")
                x = b.avgpool(x, 2, 2, name=f"{tr}.pool")
    with b.block("head"):
        x = b.bn(x, name="features.norm5")
        x = b.act(x, "relu", inplace=True, name="relu")
        x = b.flatten(b.adaptive_avgpool(x, 1, name="avgpool"), name="flatten")
        b.linear(x, 1000, name="classifier")
    return b.build()


def densenet121(image_size: int = 224) -> Network:
    """DenseNet-121: dense blocks of 6, 12, 24 and 16 layers."""
    return densenet("densenet121", (6, 12, 24, 16), image_size=image_size)


def densenet161(image_size: int = 224) -> Network:
    """DenseNet-161: growth 48, 96 initial features, dense blocks of 6, 12, 36 and 24 layers."""
    return densenet("densenet161", (6, 12, 36, 24), growth=48, init_features=96, image_size=image_size,
                    source=SOURCE_161)


ENTRIES = (ModelEntry("densenet121", densenet121, 224, SOURCE, min_image_size=32),
           ModelEntry("densenet161", densenet161, 224, SOURCE_161, min_image_size=32))
