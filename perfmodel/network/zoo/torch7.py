"""GoogLeNet v1 and BVLC AlexNet as Lua Torch7 ran them in jcjohnson/cnn-benchmarks (2016-2017).

Both differ from torchvision's ``googlenet`` / ``alexnet`` of the zoo, so they are models of their
own; both have cross-channel LRN layers (:meth:`~perfmodel.network.builder.NetBuilder.lrn`).

* ``googlenet_v1``: soumith/inception.torch ``googlenet.lua`` @ 1c8f2080 (the benchmark's README:
  "the Torch implementation of Inception-V1 from soumith/inception.torch"), Google's Inception-5h
  network: convolutions with biases and no batch norm; ``SpatialCrossMapLRN(11, 0.0011, 0.5, 2)``
  after the stem's first max-pool and after its third convolution; real 5x5 convolutions in the
  third branch; inception 4a's 3x3 has 204 filters (so 4b reads 508 channels); Torch's pools in
  floor mode (stage 4 at 13x13, which the ``View(1024)`` after the 7x7 average pool requires); a
  1008-way classifier narrowed to 1000 classes, then a softmax; no dropout (commented out).
* ``alexnet_bvlc``: the BVLC AlexNet of Caffe (``models/bvlc_alexnet/deploy.prototxt``) that the
  benchmark loaded with loadcaffe: 96-256-384-384-256 filters, two groups in conv2, conv4 and conv5,
  ``LRN(5, 1e-4, 0.75)`` after relu1 and relu2 (before the pools), Caffe's ceil-mode pools (the
  6x6x256 input of fc6 requires them at 224), dropout 0.5 after fc6 and fc7, softmax.
"""

from __future__ import annotations

from ...errors import UsageError
from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["googlenet_v1", "alexnet_bvlc", "ENTRIES"]

GOOGLENET_SOURCE = ("soumith/inception.torch googlenet.lua @ 1c8f2080 (Inception-5h: no batch norm, two LRN, "
                    "5x5 branches, 4a 3x3 = 204, floor-mode pools), as jcjohnson/cnn-benchmarks ran it")
ALEXNET_SOURCE = ("BVLC AlexNet, Caffe models/bvlc_alexnet/deploy.prototxt (two groups in conv2/4/5, LRN after "
                  "conv1/conv2, ceil-mode pools), loaded by loadcaffe as jcjohnson/cnn-benchmarks ran it")

#: module -> (input channels, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection): googlenet.lua
_INCEPTION = {
    "3a": (192, 64, 96, 128, 16, 32, 32),
    "3b": (256, 128, 128, 192, 32, 96, 64),
    "4a": (480, 192, 96, 204, 16, 48, 64),
    "4b": (508, 160, 112, 224, 24, 64, 64),
    "4c": (512, 128, 128, 256, 24, 64, 64),
    "4d": (512, 112, 144, 288, 32, 64, 64),
    "4e": (528, 256, 160, 320, 32, 128, 128),
    "5a": (832, 256, 160, 320, 48, 128, 128),
    "5b": (832, 384, 192, 384, 48, 128, 128),
}
#: googlenet.lua's LRN: SpatialCrossMapLRN(size, alpha, beta, k)
_GOOGLENET_LRN = (11, 0.00109999999404, 0.5, 2.0)


def _conv_relu(b: NetBuilder, x: str, c: int, k: int, name: str, stride: int = 1, padding: int = 0,
               groups: int = 1) -> str:
    y = b.conv(x, c, k, stride=stride, padding=padding, groups=groups, name=name)
    return b.act(y, "relu", inplace=True, name=f"{name}.relu")


def _inception(b: NetBuilder, x: str, name: str) -> str:
    _, c1, c3r, c3, c5r, c5, cp = _INCEPTION[name]
    p = f"mixed{name}"
    b1 = _conv_relu(b, x, c1, 1, f"{p}_1x1")
    b2 = _conv_relu(b, _conv_relu(b, x, c3r, 1, f"{p}_3x3_bottleneck"), c3, 3, f"{p}_3x3", padding=1)
    b3 = _conv_relu(b, _conv_relu(b, x, c5r, 1, f"{p}_5x5_bottleneck"), c5, 5, f"{p}_5x5", padding=2)
    b4 = _conv_relu(b, b.maxpool(x, 3, 1, padding=1, name=f"{p}_pool"), cp, 1, f"{p}_pool_reduce")
    return b.concat([b1, b2, b3, b4], name=f"{p}.cat")


def _fixed_extent(b: NetBuilder, x: str, expected: tuple[int, ...], image_size: int, valid: str) -> None:
    """The Lua definitions hard-code their classifier's input (``View(1024)``, fc6's 9216)."""
    if b.shape(x) != expected:
        raise UsageError(f"{b.name}: a {image_size}x{image_size} input gives {b.shape(x)} before the classifier, "
                           f"not the {expected} the definition requires (valid image sizes: {valid})")


def googlenet_v1(image_size: int = 224) -> Network:
    """Stem with two LRN layers, nine inception modules, 7x7 average pool, 1008-way classifier."""
    b = NetBuilder("googlenet_v1", (3, image_size, image_size), source=GOOGLENET_SOURCE)
    with b.block("stem"):
        x = _conv_relu(b, "input", 64, 7, "conv2d0", stride=2, padding=3)
        x = b.lrn(b.maxpool(x, 3, 2, padding=1, name="pool0"), *_GOOGLENET_LRN, name="lrn0")
        x = _conv_relu(b, x, 64, 1, "conv2d1")
        x = b.lrn(_conv_relu(b, x, 192, 3, "conv2d2", padding=1), *_GOOGLENET_LRN, name="lrn1")
        x = b.maxpool(x, 3, 2, padding=1, name="pool1")
    for name in _INCEPTION:
        with b.block(f"mixed{name}"):
            x = _inception(b, x, name)
        if name == "3b":
            x = b.maxpool(x, 3, 2, name="pool2")
        elif name == "4e":
            x = b.maxpool(x, 3, 2, padding=1, name="pool3")
    with b.block("head"):
        x = b.avgpool(x, 7, 1, name="avgpool")
        _fixed_extent(b, x, (1024, 1, 1), image_size, "209 to 240")
        x = b.flatten(x, name="view")
        x = b.view(b.linear(x, 1008, name="softmax2"), (1000,), name="narrow")
        b.softmax(x, name="softmax")
    return b.build()


def alexnet_bvlc(image_size: int = 224) -> Network:
    """Five convolutions (three grouped), two LRN layers, three ceil-mode max-pools, 3-layer classifier."""
    b = NetBuilder("alexnet_bvlc", (3, image_size, image_size), source=ALEXNET_SOURCE)
    with b.block("conv1"):
        x = b.lrn(_conv_relu(b, "input", 96, 11, "conv1", stride=4), 5, name="norm1")
        x = b.maxpool(x, 3, 2, ceil_mode=True, name="pool1")
    with b.block("conv2"):
        x = b.lrn(_conv_relu(b, x, 256, 5, "conv2", padding=2, groups=2), 5, name="norm2")
        x = b.maxpool(x, 3, 2, ceil_mode=True, name="pool2")
    for name, c, g in (("conv3", 384, 1), ("conv4", 384, 2), ("conv5", 256, 2)):
        with b.block(name):
            x = _conv_relu(b, x, c, 3, name, padding=1, groups=g)
    with b.block("head"):
        x = b.maxpool(x, 3, 2, ceil_mode=True, name="pool5")
        _fixed_extent(b, x, (256, 6, 6), image_size, "199 to 230")
        x = b.flatten(x, name="flatten")
        x = b.dropout(_fc_relu(b, x, "fc6"), 0.5, name="drop6")
        x = b.dropout(_fc_relu(b, x, "fc7"), 0.5, name="drop7")
        b.softmax(b.linear(x, 1000, name="fc8"), name="prob")
    return b.build()


def _fc_relu(b: NetBuilder, x: str, name: str) -> str:
    """A 4096-wide fully connected layer and its in-place ReLU."""
    return b.act(b.linear(x, 4096, name=name), "relu", inplace=True, name=f"{name}.relu")


ENTRIES = (
    ModelEntry("googlenet_v1", googlenet_v1, 224, GOOGLENET_SOURCE, min_image_size=209),
    ModelEntry("alexnet_bvlc", alexnet_bvlc, 224, ALEXNET_SOURCE, min_image_size=199),
)
