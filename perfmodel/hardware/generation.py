"""The GPU generation (architecture) of a device name: the one recogniser every check uses."""

from __future__ import annotations

import re

__all__ = ["GENERATIONS", "generation"]

#: GPU architecture by the letter of NVIDIA's product and chip names (P100/GP100 Pascal, V100/GV100
#: Volta, T4 Turing, A100/A800/A10G/RTX A6000 Ampere, L4/L40S Ada, H100/H800/GH200 Hopper, B200
#: Blackwell): the letter, optionally after the chip prefix ``G``, then the model number.
GENERATIONS = {"P": "pascal", "V": "volta", "T": "turing", "A": "ampere", "L": "ada", "H": "hopper",
               "B": "blackwell"}

_TOKEN = re.compile(r"G?([PVTALHB])\d{1,4}[A-Z]*")
#: Words of other vendors' device names, whose model numbers share NVIDIA's letters (Intel Arc
#: A770, AMD Radeon Pro V620, Google TPU v4): such a name has no NVIDIA generation.
_OTHER_VENDORS = frozenset({"AMD", "RADEON", "INSTINCT", "INTEL", "ARC", "TPU", "GOOGLE"})
#: GeForce GTX 10-series model numbers (Pascal: GP102/GP104/GP106/GP107, NVIDIA's GTX 1080 and
#: TITAN X (Pascal) launch specifications), and the TITAN X (Pascal) / TITAN Xp names; the Maxwell
#: "GeForce GTX TITAN X" matches none of them.
_PASCAL_CONSUMER = frozenset({"1050", "1060", "1070", "1080"})


def generation(device_name: str) -> str | None:
    """The architecture of a device name (``NVIDIA A100-SXM4-80GB`` -> ``ampere``, ``Tesla V100S-PCIE``
    -> ``volta``, ``Quadro GV100`` -> ``volta``, ``TITAN V`` -> ``volta``, ``GeForce GTX 1080``,
    ``GeForce GTX 1080 Ti`` and ``TITAN X (Pascal)`` -> ``pascal``), or None when no token of
    the name is a product name of :data:`GENERATIONS` (a user's own GPU: left unchecked)."""
    tokens = [t.upper() for t in re.split(r"[\s\-_/]+", device_name.strip()) if t]
    if any(t in _OTHER_VENDORS for t in tokens):
        return None
    for i, token in enumerate(tokens):
        m = _TOKEN.fullmatch(token)
        if m:
            return GENERATIONS[m.group(1)]
        if token == "V" and i > 0 and tokens[i - 1] == "TITAN":
            return "volta"
        if token in _PASCAL_CONSUMER or token == "(PASCAL)" or (token == "XP" and tokens[i - 1:i] == ["TITAN"]):
            return "pascal"
    return None
