"""CosmoFlow, the 3-D CNN ParaDL evaluates: seven 3-D convolutions with pooling, three FC layers."""

from __future__ import annotations

import math

from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["cosmoflow", "ENTRIES", "SOURCE"]

# The layer tables of ParaDL's oracle (Kahira et al., "An Oracle for Guiding Large-Scale
# Model/Hybrid Parallel Training of Convolutional Neural Networks", HPDC 2021), files
# model/COSMOFLOW.net (512^3) and model/COSMOFLOW.net_256 (256^3) of its analysis code
# (github.com/TruongThaoNguyen/paraDL-analysis); the network is CosmoFlow (Mathuriya et al.,
# "CosmoFlow: Using Deep Learning to Learn the Universe at Scale", SC 2018) on 4-channel
# volumes of 512^3, 256^3 or 128^3 voxels, 2.13M parameters.
SOURCE = (
    "ParaDL (Kahira et al., HPDC 2021) oracle layer tables model/COSMOFLOW.net (512^3) and"
    " COSMOFLOW.net_256 (paraDL-analysis); CosmoFlow, Mathuriya et al., SC 2018"
)

#: (output channels, kernel) of the seven convolutions; an average pooling (2, stride 2)
#: follows each of the first six.
CONVS = ((16, 3), (32, 3), (64, 3), (128, 3), (256, 2), (256, 2), (128, 2))
#: The fully connected layers after the convolutions (the last one regresses 4 parameters).
FCS = (2048, 256, 4)


def _strides(size: int) -> tuple[int, ...]:
    """Per convolution: its stride. ParaDL's 512^3 table strides conv3 by 2 and pads none;
    its 256^3 table pads every 'same' and strides conv4. Other sizes follow the 256^3 table
    with one stride-2 convolution per doubling above 128 (conv4, then conv3, conv2, conv1)."""
    if size == 512:
        return (1, 1, 2, 1, 1, 1, 1)
    doublings = min(4, max(0, int(math.log2(size / 128))))
    strided = (3, 2, 1, 0)[:doublings]
    return tuple(2 if i in strided else 1 for i in range(len(CONVS)))


def cosmoflow(image_size: int = 512) -> Network:
    """CosmoFlow on a 4 x S x S x S volume (S = ``image_size``).

    Each convolution is followed by a LeakyReLU (priced as a ReLU: one elementwise pass
    over the same tensor). At 512^3 the convolutions are unpadded, as ParaDL's table has
    them (510, 255, 253, 126, 62, 31, 29, 14, 13, 6, 5, 2, 1 voxels per side down the
    network). At other sizes the first six are padded: 3x3x3 by 1 ('same'); the 2x2x2 ones
    by 1 on both sides, one voxel more per side than the asymmetric 'same' padding of the
    256^3 table, in two layers doing under 1% of the FLOPs. The last convolution is
    unpadded and brings the volume to 1 voxel for power-of-two sizes.
    """
    s = image_size
    b = NetBuilder("cosmoflow", (4, s, s, s), source=SOURCE)
    strides = _strides(s)
    x = "input"
    for i, ((channels, kernel), stride) in enumerate(zip(CONVS, strides, strict=True)):
        last = i == len(CONVS) - 1
        padding = 0 if (s == 512 or last) else 1
        with b.block(f"conv{i + 1}"):
            x = b.conv(x, channels, kernel, stride=stride, padding=padding, name=f"conv{i + 1}")
            x = b.act(x, "relu", name=f"act{i + 1}")
            if not last:
                x = b.avgpool(x, 2, name=f"pool{i + 1}")
    with b.block("head"):
        x = b.flatten(x, name="flatten")
        for j, features in enumerate(FCS):
            x = b.linear(x, features, name=f"fc{j + 1}")
            if j < len(FCS) - 1:
                x = b.act(x, "relu", name=f"fc_act{j + 1}")
    return b.build()


ENTRIES = (ModelEntry("cosmoflow", cosmoflow, 512, SOURCE, min_image_size=128),)
