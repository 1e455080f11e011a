"""Torch definitions the import tests trace: zoo architectures written as torchvision writes them,
a ConvNeXt block, a small ViT, a U-Net, and the oracles (FlopCounterMode, saved-tensor hooks, the
ATen ops a forward dispatches)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.nn import functional as F  # noqa: N812
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from perfmodel.validation.autograd_saved import saved_storages


class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck (stride on the 3x3)."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != width * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (3, 4, 6, 3)) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        self.relu, self.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, n in enumerate(layers):
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(cin, 64 * 2**i, 2 if i and not j else 1))
                cin = 256 * 2**i
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(2048, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50() -> nn.Module:
    return ResNet((3, 4, 6, 3))


def resnet152() -> nn.Module:
    return ResNet((3, 8, 36, 3))


def vgg16() -> nn.Module:
    layers: list[nn.Module] = []
    cin = 3
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, int(v), 3, padding=1), nn.ReLU(inplace=True)]
            cin = int(v)
    return nn.Sequential(
        nn.Sequential(*layers), nn.AdaptiveAvgPool2d(7), nn.Flatten(),
        nn.Linear(25088, 4096), nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
        nn.Linear(4096, 1000),
    )


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2 block."""

    def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
        super().__init__()
        mid = cin * t
        layers: list[nn.Module] = []
        if t != 1:
            layers += [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(inplace=True)]
        layers += [nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
                   nn.ReLU6(inplace=True), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


def mobilenet_v2() -> nn.Module:
    feats: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32),
                                            nn.ReLU6(inplace=True))]
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            feats.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    feats.append(nn.Sequential(nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(inplace=True)))
    return nn.Sequential(nn.Sequential(*feats), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                         nn.Linear(1280, 1000))


def stochastic_depth(x: torch.Tensor, p: float, mode: str, training: bool = True) -> torch.Tensor:
    """torchvision.ops.stochastic_depth ("row" mode): drop each sample's branch with probability p."""
    if not training or p == 0.0:
        return x
    noise = torch.empty((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype, device=x.device)
    return x * noise.bernoulli_(1.0 - p).div_(1.0 - p)


torch.fx.wrap("stochastic_depth")  # a leaf of the trace, as torchvision declares it


class CNBlock(nn.Module):
    """torchvision's ConvNeXt block: 7x7 depthwise, channels-last LayerNorm, MLP, layer scale."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1, self.act, self.pw2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * 1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(self.act(self.pw1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + stochastic_depth(self.layer_scale * y, 0.1, "row", self.training)


class ConvNeXtTiny(nn.Module):
    def __init__(self, dims: tuple[int, ...] = (32, 64), depth: int = 2) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), nn.GroupNorm(1, dims[0]))
        stages: list[nn.Module] = []
        for i, d in enumerate(dims):
            if i:
                stages.append(nn.Sequential(nn.GroupNorm(1, dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2)))
            stages.append(nn.Sequential(*(CNBlock(d) for _ in range(depth))))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(dims[-1], 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)).mean((2, 3)))


def shifted_window_attention(x: torch.Tensor, qkv_weight: torch.Tensor, proj_weight: torch.Tensor,
                             relative_position_bias: torch.Tensor, window_size: list[int], num_heads: int,
                             shift_size: list[int], attention_dropout: float = 0.0, dropout: float = 0.0,
                             qkv_bias: torch.Tensor | None = None, proj_bias: torch.Tensor | None = None,
                             logit_scale: torch.Tensor | None = None, training: bool = True) -> torch.Tensor:
    """torchvision's Swin window attention (v1, without the shift), with its signature and leaf name."""
    b, h, w, c = x.shape
    ws0, ws1 = window_size
    nw = (h // ws0) * (w // ws1)
    t = x.view(b, h // ws0, ws0, w // ws1, ws1, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, ws0 * ws1, c)
    qkv = F.linear(t, qkv_weight, qkv_bias).reshape(t.size(0), t.size(1), 3, num_heads, c // num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    attn = (q * (c // num_heads) ** -0.5).matmul(k.transpose(-2, -1)) + relative_position_bias
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    y = F.linear(attn.matmul(v).transpose(1, 2).reshape(t.size(0), t.size(1), c), proj_weight, proj_bias)
    y = y.view(b, h // ws0, w // ws1, ws0, ws1, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
    return y.contiguous()


torch.fx.wrap("shifted_window_attention")


class SwinBlock(nn.Module):
    """A Swin block on a channels-last map: norm, window attention with a learned bias, MLP."""

    def __init__(self, dim: int, heads: int, window: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.zeros(heads, window * window, window * window))
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.heads, self.window = heads, window

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = shifted_window_attention(self.norm1(x), self.qkv.weight, self.proj.weight, self.bias_table.unsqueeze(0),
                                     [self.window, self.window], self.heads, [0, 0], 0.1, 0.0,
                                     self.qkv.bias, self.proj.bias, training=self.training)
        x = x + y
        return x + self.mlp(self.norm2(x))


class Swin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, 32, 4, 4)
        self.blocks = nn.Sequential(SwinBlock(32, 2, 4), SwinBlock(32, 2, 4))
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.embed(x).permute(0, 2, 3, 1))
        return self.head(x.mean((1, 2)))


class EncoderBlock(nn.Module):
    """torchvision's ViT encoder block (nn.MultiheadAttention without weights)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class SdpaBlock(nn.Module):
    """A timm-style attention block: one qkv projection, reshape, F.scaled_dot_product_attention."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(self.norm(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj(y.transpose(1, 2).reshape(b, n, c))


class ViT(nn.Module):
    def __init__(self, size: int = 64, patch: int = 16, dim: int = 96, heads: int = 4, depth: int = 2,
                 sdpa: bool = False) -> None:
        super().__init__()
        self.conv_proj = nn.Conv2d(3, dim, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.zeros(1, (size // patch) ** 2 + 1, dim))
        block = SdpaBlock if sdpa else EncoderBlock
        self.layers = nn.Sequential(*(block(dim, heads) for _ in range(depth)))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        return self.head(self.ln(self.layers(x))[:, 0])


class UNet(nn.Module):
    """A two-level U-Net: the encoder's outputs are concatenated into the decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.enc0 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True))
        self.enc1 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True))
        self.mid = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True))
        self.up1 = nn.ConvTranspose2d(32, 32, 2, 2)
        self.dec1 = nn.Sequential(nn.Conv2d(64, 16, 3, padding=1), nn.ReLU(inplace=True))
        self.up0 = nn.Upsample(scale_factor=2)
        self.dec0 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.out = nn.Conv2d(8, 1, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = self.enc0(x)
        s1 = self.enc1(self.pool(s0))
        y = self.mid(self.pool(s1))
        y = self.dec1(torch.cat([self.up1(y), s1], 1))
        y = self.dec0(torch.cat([self.up0(y), s0], 1))
        return self.out(y)


class Odds(nn.Module):
    """1-D and 3-D convolutions, a dilated transposed convolution, group norm, hard-swish, max pools."""

    def __init__(self) -> None:
        super().__init__()
        self.c3 = nn.Conv3d(2, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)
        self.act = nn.Hardswish()
        self.t3 = nn.ConvTranspose3d(8, 4, 3, stride=2, padding=1, output_padding=1, dilation=1)
        self.pool = nn.AdaptiveMaxPool3d(2)
        self.c1 = nn.Conv1d(4, 6, 3, dilation=2)
        self.inorm = nn.InstanceNorm1d(6, affine=True)
        self.fc = nn.Linear(6 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.t3(self.act(self.gn(self.c3(x)))))  # (4, 2, 2, 2)
        y = F.leaky_relu(self.c1(y.reshape(y.shape[0], 4, 8)))
        return self.fc(F.softmax(self.inorm(y), dim=-1).flatten(1))


def torch_flops(model: nn.Module, shape: tuple[int, ...], batch: int = 2) -> float:
    """Forward matmul FLOPs per sample by torch.utils.flop_counter (training mode)."""
    model.train()
    # the math backend spells attention out as two batched products, which the counter sees
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        model(torch.randn(batch, *shape))
    return fc.get_total_flops() / batch


def torch_saved(model: nn.Module, shape: tuple[int, ...], batch: int = 2) -> float:
    """Float elements per sample of the distinct storages autograd saves (parameters, input excluded)."""
    return saved_storages(model, shape, batch).float_elements


def torch_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class DispatchedOps(TorchDispatchMode):  # type: ignore[misc]
    """Counts the ATen ops eager PyTorch dispatches inside it, by op name (the kernels' oracle)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def read_kernels(net: Any, kinds: dict[str, str], keys: set[str]) -> Counter[str]:
    """The imported ``net``'s layers counted by ``kinds`` (layer kind -> the eager oracle's name;
    a view that copies counts as ``copy``), every one of ``keys`` present: what
    :class:`DispatchedOps` counts of eager PyTorch, read off the IR."""
    c: Counter[str] = Counter({k: 0 for k in keys})
    for la in net.layers:
        kind = "copy" if la.kind == "view" and la.attr("copy") else kinds.get(la.kind)
        if kind:
            c[kind] += 1
    return c
