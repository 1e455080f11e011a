"""The simplified U-Net(B, C) of torchgpipe's benchmarks (Kim et al. 2020), with long skips."""

from __future__ import annotations

from ...errors import UsageError
from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["unet", "unet_5_64", "ENTRIES"]

SOURCE = (
    "kakaobrain/torchgpipe benchmarks/models/unet (unet(depth=5, num_convs=5, base_channels=64),"
    " as benchmarks/unet-speed uses it, input 3x192x192); InstanceNorm2d (no affine) is modelled"
    " as a batch norm without parameters; the IR has no leaky ReLU, so LeakyReLU(0.01) stands as a"
    " ReLU6 not in place, which like it saves its input for backward and costs 2 FLOPs an element"
)


def _cell(b: NetBuilder, x: str, mid: int, out: int, num_convs: int, prefix: str) -> str:
    """``num_convs`` units of conv3x3 (no bias) -> Dropout2d(0.1) -> InstanceNorm -> LeakyReLU."""
    for i in range(num_convs):
        c = out if i == num_convs - 1 else mid
        p = f"{prefix}.{i}"
        x = b.conv(x, c, 3, padding=1, bias=False, name=f"{p}.conv")
        x = b.dropout(x, 0.1, name=f"{p}.dropout", channelwise=True)  # nn.Dropout2d
        x = b.bn(x, affine=False, name=f"{p}.norm")
        x = b.act(x, "relu6", name=f"{p}.leaky_relu")  # LeakyReLU's stand-in, see SOURCE
    return x


def unet(
    depth: int = 5,
    num_convs: int = 5,
    base_channels: int = 64,
    image_size: int = 192,
    input_channels: int = 3,
    output_channels: int = 1,
) -> Network:
    """Encoder levels (cell, stash, 2x2 max-pool), a bottleneck cell, decoder levels (nearest 2x
    upsample, concatenation with the stashed encoder output, cell) and a 1x1 segmentation conv."""
    if image_size % 2**depth:
        raise UsageError(
            f"unet: image size {image_size} must be a multiple of {2**depth}"
            " (else the skips would need padding)"
        )
    default = (depth, num_convs, base_channels) == (5, 5, 64)
    name = "unet" if default else f"unet_d{depth}_b{num_convs}_c{base_channels}"
    b = NetBuilder(name, (input_channels, image_size, image_size), source=SOURCE)
    c = base_channels
    x = "input"
    skips: list[str] = []
    for i in range(depth):
        with b.block(f"encoder.{i}"):
            x = _cell(b, x, c * 2**i, c * 2**i, num_convs, f"encoder.{i}.encode")
            skips.append(x)
            x = b.maxpool(x, 2, 2, name=f"encoder.{i}.down")
    with b.block("bottleneck"):
        x = _cell(b, x, c * 2**depth, c * 2 ** (depth - 1), num_convs, "bottleneck")
    for i in reversed(range(depth)):
        level = f"decoder.{depth - 1 - i}"
        with b.block(level):
            x = b.upsample(x, 2, name=f"{level}.up")
            x = b.concat([x, skips[i]], name=f"{level}.skip")
            out = c * 2**i // 2
            x = _cell(b, x, out, out, num_convs, f"{level}.decode")
    b.conv(x, output_channels, 1, bias=False, name="segment")
    return b.build()


def unet_5_64(image_size: int = 192) -> Network:
    """U-Net(B=5, C=64): depth 5, five convolutions per cell, 64 base channels."""
    return unet(5, 5, 64, image_size)


ENTRIES = (ModelEntry("unet", unet_5_64, 192, SOURCE, min_image_size=32),)
