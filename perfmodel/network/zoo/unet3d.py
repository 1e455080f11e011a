"""The 3-D U-Net NVIDIA's nnU-Net example trains on BraTS volumes (MONAI's DynUNet, 128^3 patches)."""

from __future__ import annotations

from ...errors import UsageError
from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["unet3d", "unet3d_tf", "levels", "valid_size", "ENTRIES", "SOURCE", "TF_SOURCE", "IN_CHANNELS", "CLASSES"]

# NVIDIA/DeepLearningExamples @ 4da7bf28b66c6f5bb9f8755ca24fd27a605b96af (2022-12-05),
# PyTorch/Segmentation/nnUNet: nnunet/nn_unet.py (get_unet_params, build_nnunet),
# data_preprocessing/configs.py (task 01: patch 128x128x128, spacing 1 mm on every axis),
# utils/args.py (depth 5, min_fmap 4, no deep supervision, no residual blocks, filters unset),
# and the Dockerfile's monai==1.0.0: monai/networks/nets/dynunet.py and blocks/dynunet_block.py
# at Project-MONAI/MONAI tag 1.0.0 (0f5fd621d04f88026fe5543a78e14fb3ee540bb1).
SOURCE = (
    "NVIDIA DeepLearningExamples PyTorch/Segmentation/nnUNet @ 4da7bf28 (nnunet/nn_unet.py, task 01"
    " BraTS: 4 MRI modalities, 4 label classes, 128^3 patches, isotropic spacing) building MONAI 1.0.0's"
    " DynUNet (networks/nets/dynunet.py, blocks/dynunet_block.py): filters 32-64-128-256-320-320,"
    " 3x3x3 convolutions without bias, stride-2 convolutions down, 2x2x2 stride-2 transposed"
    " convolutions with bias up, affine instance norm (a group norm of one channel per group),"
    " LeakyReLU(0.01) not in place, no deep supervision"
)
# The TensorFlow 1 example of the same repository, TensorFlow/Segmentation/UNet_3D_Medical @
# 729963dd (model/unet3d.py, model/layers.py, model/model_fn.py, runtime/arguments.py): the same
# encoder and decoder (32-64-128-256-320-320, 'same'-padded 3x3x3 convolutions without bias before
# a norm, stride-2 convolutions down, 2x2x2 stride-2 transposed convolutions with bias up, the
# upsampled tensor concatenated before the skip), tf.contrib.layers.instance_norm (center and
# scale), leaky ReLU 0.01, but its output layer is a 3x3x3 convolution with bias and a softmax.
TF_SOURCE = (
    "NVIDIA DeepLearningExamples TensorFlow/Segmentation/UNet_3D_Medical @ 729963dd (model/unet3d.py,"
    " model/layers.py; --normalization instancenorm, the default): the encoder and decoder of"
    " nnU-Net's DynUNet for 4 x 128^3 BraTS crops, with a 3x3x3 output convolution (bias) and a softmax"
    " over the 4 classes; 'same' padding of the stride-2 convolutions is one voxel after (TensorFlow)"
    " where the zoo pads one on each side: the same output shapes and FLOPs"
)
#: Task 01 (MSD BrainTumour): FLAIR, T1w, T1gd, T2w in; background and three tumour labels out
#: (preprocess.py without --ohe: in_channels = modalities; n_class = labels).
IN_CHANNELS = 4
CLASSES = 4
#: utils/args.py defaults: at most ``DEPTH`` stride-2 levels, none that would leave a feature map
#: under ``MIN_FMAP`` voxels a side; DynUNet's default filters double from 32 up to 320 (3-D).
DEPTH = 5
MIN_FMAP = 4
MAX_FILTERS = 320


def levels(size: int) -> int:
    """The stride-2 levels ``get_unet_params`` gives a cube of ``size`` voxels at isotropic spacing:
    one per halving while the map keeps at least ``2 * MIN_FMAP`` voxels a side, at most ``DEPTH``."""
    n = 0
    while n < DEPTH and size >= 2 * MIN_FMAP:
        size //= 2  # the source halves in floats; x >= 8 exactly when floor(x) >= 8
        n += 1
    return n


def valid_size(size: int) -> bool:
    """Whether DynUNet builds on a cube of ``size`` voxels: at least two levels, whose strides divide it."""
    n = levels(size)
    return n >= 2 and size % 2**n == 0


def _block(b: NetBuilder, x: str, channels: int, stride: int, prefix: str) -> str:
    """UnetBasicBlock: conv (stride) -> instance norm -> LeakyReLU -> conv -> instance norm -> LeakyReLU."""
    for i, s in enumerate((stride, 1), start=1):
        x = b.conv(x, channels, 3, stride=s, padding=1, bias=False, name=f"{prefix}.conv{i}")
        x = b.norm(x, "groupnorm", 2 * channels, groups=channels, name=f"{prefix}.norm{i}")
        x = b.act(x, "leaky_relu", name=f"{prefix}.lrelu{i}")
    return x


def unet3d(image_size: int = 128, tensorflow: bool = False) -> Network:
    """DynUNet on a 4 x S x S x S patch: an input block, one stride-2 block per level (the last is
    the bottleneck), per level up a transposed convolution, a concatenation with the skip and a
    block, and a 1x1x1 convolution to the 4 classes; ``tensorflow``: the TensorFlow example's
    network (``unet3d_tf``), whose output is a 3x3x3 convolution and a softmax."""
    name = "unet3d_tf" if tensorflow else "unet3d"
    n = levels(image_size)
    if not valid_size(image_size):
        lower = next((s for s in range(image_size, 0, -1) if valid_size(s)), None)
        upper = next(s for s in range(image_size, 4 * image_size + 64) if valid_size(s))
        closest = f"{lower} or {upper}" if lower is not None else str(upper)
        raise UsageError(
            f"{name}: patch size {image_size} must be a multiple of {2**max(n, 2)} (it gets {n} stride-2"
            " levels; DynUNet needs its strides to divide the patch, and at least two levels);"
            f" closest valid sizes: {closest}"
        )
    filters = [min(2 ** (5 + i), MAX_FILTERS) for i in range(n + 1)]
    b = NetBuilder(name, (IN_CHANNELS, image_size, image_size, image_size),
                   source=TF_SOURCE if tensorflow else SOURCE)
    with b.block("input_block"):
        x = _block(b, "input", filters[0], 1, "input_block")
    skips = [x]
    for i in range(1, n + 1):
        name = "bottleneck" if i == n else f"downsamples.{i - 1}"
        with b.block(name):
            x = _block(b, x, filters[i], 2, name)
        skips.append(x)
    for j, i in enumerate(reversed(range(n))):
        name = f"upsamples.{j}"
        with b.block(name):
            x = b.conv_transpose(x, filters[i], 2, stride=2, bias=True, name=f"{name}.transp_conv")
            x = b.concat([x, skips[i]], name=f"{name}.cat")
            x = _block(b, x, filters[i], 1, f"{name}.conv_block")
    if tensorflow:
        x = b.conv(x, CLASSES, 3, padding=1, bias=True, name="output_block.conv")
        b.softmax(x, name="output_block.softmax")
    else:
        b.conv(x, CLASSES, 1, bias=True, name="output_block.conv")
    return b.build()


def unet3d_tf(image_size: int = 128) -> Network:
    """The TensorFlow UNet_3D_Medical network (:func:`unet3d` with ``tensorflow=True``)."""
    return unet3d(image_size, tensorflow=True)


ENTRIES = (
    ModelEntry("unet3d", unet3d, 128, SOURCE, min_image_size=16),
    ModelEntry("unet3d_tf", unet3d_tf, 128, TF_SOURCE, min_image_size=16),
)
