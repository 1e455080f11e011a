"""MyNet: a small image classifier to price with perfmodel (``perfmodel plan examples/mynet.py:MyNet --gpus 8``).

It has what real vision networks have: depthwise-separable convolutions, squeeze-and-excitation,
a two-branch block whose branches are concatenated, and residual connections. Plain PyTorch;
perfmodel traces it with torch.fx. ``python examples/export_onnx.py`` writes ``mynet.onnx``.
"""

from __future__ import annotations

import torch
from torch import nn


class SqueezeExcite(nn.Module):
    """Scale each channel by a gate computed from the global average (Hu et al. 2018)."""

    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, reduced, 1)
        self.act = nn.SiLU(inplace=True)
        self.fc2 = nn.Conv2d(reduced, channels, 1)
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    """1x1 expansion, 3x3 depthwise convolution, squeeze-excitation, 1x1 projection, plus the input."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int = 4) -> None:
        super().__init__()
        mid = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU(inplace=True))
        self.depthwise = nn.Sequential(
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.SiLU(inplace=True)
        )
        self.se = SqueezeExcite(mid, max(8, cin // 4))
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.residual else y


class TwoBranch(nn.Module):
    """A 3x3 and a dilated 3x3 branch side by side, concatenated, then a residual add."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        half = channels // 2
        self.a = nn.Sequential(nn.Conv2d(channels, half, 3, padding=1, bias=False), nn.BatchNorm2d(half), nn.ReLU())
        self.b = nn.Sequential(
            nn.Conv2d(channels, half, 3, padding=2, dilation=2, bias=False), nn.BatchNorm2d(half), nn.ReLU()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.cat([self.a(x), self.b(x)], dim=1)


class MyNet(nn.Module):
    """Stem, six inverted-residual blocks in three stages, two two-branch blocks, classifier."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU(inplace=True))
        blocks: list[nn.Module] = []
        cin = 32
        for cout, stride in ((48, 2), (48, 1), (96, 2), (96, 1), (192, 2), (192, 1)):
            blocks.append(InvertedResidual(cin, cout, stride))
            cin = cout
        blocks += [TwoBranch(cin), TwoBranch(cin)]
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.Conv2d(cin, 640, 1, bias=False), nn.BatchNorm2d(640), nn.SiLU(inplace=True))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(640, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(self.dropout(torch.flatten(self.pool(x), 1)))
