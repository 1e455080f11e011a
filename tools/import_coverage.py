"""Import every torchvision classification model with perfmodel and compare with torch's counts.

Not run by the tests. For each model of ``torchvision.models`` (``weights=None``; googlenet and
inception_v3 without auxiliary classifiers, inception_v3 at 299 px, the rest at 224 px) it
prints whether ``perfmodel.network.importers.import_module`` reads it, the parameters against
``sum(p.numel())`` and the forward matmul FLOPs against ``FlopCounterMode`` (on meta tensors,
attention through the math backend so that the counter sees its products) and, with
``--saved``, the activations autograd saves (a real CPU forward at batch 2; distinct float
storages, parameters and the input excluded) against perfmodel's saved activations.

Usage (from the repository root)::

    python tools/import_coverage.py [--bare-torchvision DIR] [--saved] [MODEL ...]

``--bare-torchvision DIR`` loads the model definitions from an unpacked torchvision wheel in
DIR without running ``torchvision/__init__`` (whose compiled operators need the torch build the
wheel was made for): the classification models are plain Python and need none of them.
"""

from __future__ import annotations

import argparse
import sys
import time
import types
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from perfmodel.validation.autograd_saved import saved_storages


def _bare_torchvision(path: str) -> None:
    sys.path.insert(0, path)
    pkg = types.ModuleType("torchvision")
    pkg.__path__ = [f"{path}/torchvision"]
    sys.modules["torchvision"] = pkg
    register = torch.library.register_fake

    def tolerant(*args: Any, **kwargs: Any) -> Any:
        try:
            return register(*args, **kwargs)
        except Exception:  # an operator of the compiled extension that did not load
            return lambda f: f

    torch.library.register_fake = tolerant


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--bare-torchvision", metavar="DIR")
    ap.add_argument("--saved", action="store_true", help="also compare saved activations (slow)")
    args = ap.parse_args()
    if args.bare_torchvision:
        _bare_torchvision(args.bare_torchvision)
    import torchvision.models as tvm

    from perfmodel.network import compile_counts
    from perfmodel.network.importers import import_module

    for name in args.models or tvm.list_models(module=tvm):
        fn = tvm.get_model_builder(name)
        kw: dict[str, Any] = {"weights": None}
        if name in ("googlenet", "inception_v3"):
            kw.update(aux_logits=False, init_weights=False)
        size = 299 if name == "inception_v3" else 224
        t = time.time()
        try:
            net = import_module(lambda fn=fn, kw=kw: fn(**kw), name, (3, size, size))
        except Exception as e:
            print(f"{name:22s} FAIL {e}", flush=True)
            continue
        took = time.time() - t
        try:
            with torch.device("meta"):
                model = fn(**kw)
        except Exception:
            model = fn(**kw).to("meta")
        model.train()
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
            model(torch.empty(2, 3, size, size, device="meta"))
        params = sum(p.numel() for p in model.parameters())
        mine, ref = compile_counts(net).total("fwd_matmul_flops"), fc.get_total_flops() / 2
        line = (f"{name:22s} ok {took:5.2f} s  params {net.params:,} (torch {params:,})  "
                f"GFLOPs {mine / 1e9:.3f} (torch {ref / 1e9:.3f})  links {len(net.links)}")
        if args.saved:
            got = compile_counts(net).total("saved_elems")
            want = saved_storages(fn(**kw), (3, size, size)).float_elements
            line += f"  saved {got:,.0f} (autograd {want:,.0f}, {(got / want - 1) * 100:+.1f}%)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
