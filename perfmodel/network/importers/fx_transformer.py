"""The torch.fx tracer that reads torch's transformer layers as the training-mode bodies they run.

``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``, their stacks
``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` and ``nn.Transformer`` live in ``torch.nn``,
so torch.fx's default tracer keeps each as one opaque node, and their ``forward`` cannot be traced
through: before computing anything it checks the inputs for the inference fast path
(``src.dim()``, ``src.is_nested``, the masks' dtypes), Python control flow on traced values.

In training that check always declines the fast path ("training is enabled", torch's
``why_not_sparsity_fast_path``), and what runs is the layer's own blocks, in the order its
``norm_first`` flag gives (``torch/nn/modules/transformer.py``, the layer's ``forward`` after
``x = src``; Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture", for the
post-LN and pre-LN orders):

* encoder layer, post-LN: ``x = norm1(x + _sa_block(x))``, ``x = norm2(x + _ff_block(x))``;
  pre-LN: ``x = x + _sa_block(norm1(x))``, ``x = x + _ff_block(norm2(x))``;
* decoder layer: the same with a cross-attention block ``_mha_block(x, memory)`` between the two,
  normalised by ``norm2`` (``norm3`` after the feed-forward block);
* a stack: each layer in turn, then its optional final ``norm``; ``nn.Transformer``: the encoder
  over ``src``, the decoder over ``tgt`` with the encoder's output as memory.

:func:`tracer_class`'s tracer traces those bodies in place of the ``forward``, calling the layer's
own ``_sa_block`` / ``_mha_block`` / ``_ff_block`` methods, so every ``nn.MultiheadAttention``,
``nn.Linear``, ``nn.Dropout`` and ``nn.LayerNorm`` inside is a node of its own under the layer's
path. A self-attention's mask is read only as a causal mask flagged ``is_causal=True`` (``src_mask`` /
``tgt_mask`` / ``mask`` with ``is_causal`` / ``tgt_is_causal``), which the attention prices as a
causal kernel; any other mask, and a call with arguments the module's ``forward`` does not take,
is refused in one line. A subclass that overrides ``forward`` is traced as written.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .emit import UnsupportedOp

__all__ = ["tracer_class"]


def tracer_class(torch: Any) -> type:
    """A ``torch.fx.Tracer`` subclass that traces torch's transformer modules (and subclasses that
    keep their ``forward``) through their training-mode bodies (module docstring); built on the
    caller's torch, which perfmodel imports lazily."""
    classes = {getattr(torch.nn, name): body for name, body in _BODIES.items()}

    def body_of(m: Any) -> Callable[..., Any] | None:
        for cls, body in classes.items():
            if isinstance(m, cls) and type(m).forward is cls.forward:
                return body
        return None

    class TransformerTracer(torch.fx.Tracer):  # type: ignore[misc,name-defined]
        """torch.fx's tracer with the transformer modules read as their bodies (module docstring)."""

        def is_leaf_module(self, m: Any, qualname: str) -> bool:
            return body_of(m) is None and bool(super().is_leaf_module(m, qualname))

        def trace(self, root: Any, concrete_args: Any = None) -> Any:
            """The graph of ``root``; a transformer module as the whole network is traced through
            its body over its one input (tracing reads the class's ``forward``, so the root's class
            is swapped for one whose ``forward`` is the body while it traces)."""
            body = body_of(root) if isinstance(root, torch.nn.Module) else None
            if body is None:
                return super().trace(root, concrete_args)
            cls = type(root)

            def forward(m: Any, x: Any) -> Any:
                return body(m, x)

            root.__class__ = type(cls.__name__, (cls,), {"forward": forward})
            try:
                return super().trace(root, concrete_args)
            finally:
                root.__class__ = cls

        def call_module(self, m: Any, forward: Callable[..., Any], args: Any, kwargs: Any) -> Any:
            body = body_of(m)
            if body is None:
                return super().call_module(m, forward, args, kwargs)
            where = f"{_named(m)} at module '{self.path_of_module(m)}'"
            try:
                inspect.signature(body).bind(m, *args, **kwargs)
            except TypeError as e:  # the arguments its forward does not take, named as torch would
                raise UnsupportedOp(f"{where}: {e}") from None
            try:
                return super().call_module(m, lambda *a, **k: body(m, *a, **k), args, kwargs)
            except _Masked as e:  # named where it is, by the module that was called with it
                raise UnsupportedOp(f"{where}: {e}") from None

    return TransformerTracer


def _named(m: Any) -> str:
    """``nn.TransformerEncoderLayer``, or a subclass's own name."""
    cls = type(m)
    return f"nn.{cls.__name__}" if cls.__module__.startswith("torch.nn") else cls.__name__


class _Masked(UnsupportedOp):
    """A transformer module called with a mask or a causal flag (located by the tracer)."""


def _unmasked(m: Any, **given: Any) -> None:
    """Refuse masks and causal flags, which the attention reader does not price."""
    named = [k for k, v in given.items() if v is not None and v is not False]
    if named:
        raise _Masked(f"{', '.join(named)} not read (perfmodel prices unmasked or causal attention; call it "
                      f"without {' or '.join(named)})")


def _causal(mask: Any, is_causal: bool | None, names: tuple[str, str]) -> tuple[Any, bool]:
    """(mask, is_causal) to hand a self-attention: none, or a causal mask flagged ``is_causal=True``,
    which the attention runs as a causal kernel (:mod:`.fx_attention`). A mask without the flag
    would be read by value (torch's ``_detect_is_causal_mask``) or applied as given: refused."""
    if mask is None and not is_causal:
        return None, False
    if mask is None or is_causal is not True:
        raise _Masked(f"{names[0]} is read only as a causal mask, with {names[1]}=True (perfmodel prices "
                      f"unmasked or causal attention)")
    return mask, True


def _encoder_layer(m: Any, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                   is_causal: bool = False) -> Any:
    """``nn.TransformerEncoderLayer`` in training (module docstring)."""
    _unmasked(m, src_key_padding_mask=src_key_padding_mask)
    mask, causal = _causal(src_mask, is_causal, ("src_mask", "is_causal"))
    x = src
    if m.norm_first:
        x = x + m._sa_block(m.norm1(x), mask, None, is_causal=causal)
        return x + m._ff_block(m.norm2(x))
    x = m.norm1(x + m._sa_block(x, mask, None, is_causal=causal))
    return m.norm2(x + m._ff_block(x))


def _decoder_layer(m: Any, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                   tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                   tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Any:
    """``nn.TransformerDecoderLayer`` in training (module docstring)."""
    _unmasked(m, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
              memory_key_padding_mask=memory_key_padding_mask, memory_is_causal=memory_is_causal)
    mask, causal = _causal(tgt_mask, tgt_is_causal, ("tgt_mask", "tgt_is_causal"))
    x = tgt
    if m.norm_first:
        x = x + m._sa_block(m.norm1(x), mask, None, causal)
        x = x + m._mha_block(m.norm2(x), memory, None, None)
        return x + m._ff_block(m.norm3(x))
    x = m.norm1(x + m._sa_block(x, mask, None, causal))
    x = m.norm2(x + m._mha_block(x, memory, None, None))
    return m.norm3(x + m._ff_block(x))


def _encoder(m: Any, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
             is_causal: bool | None = None) -> Any:
    """``nn.TransformerEncoder``: its layers in turn, then its final norm if it has one."""
    _unmasked(m, src_key_padding_mask=src_key_padding_mask)
    mask, causal = _causal(mask, is_causal, ("mask", "is_causal"))
    x = src
    for layer in m.layers:
        x = layer(x, src_mask=mask, is_causal=causal)
    return m.norm(x) if m.norm is not None else x


def _decoder(m: Any, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
             tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
             tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
    """``nn.TransformerDecoder``: its layers in turn over ``memory``, then its final norm."""
    _unmasked(m, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
              memory_key_padding_mask=memory_key_padding_mask, memory_is_causal=memory_is_causal)
    mask, causal = _causal(tgt_mask, tgt_is_causal, ("tgt_mask", "tgt_is_causal"))
    x = tgt
    for layer in m.layers:
        x = layer(x, memory, tgt_mask=mask, tgt_is_causal=causal)
    return m.norm(x) if m.norm is not None else x


def _transformer(m: Any, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None, memory_mask: Any = None,
                 src_key_padding_mask: Any = None, tgt_key_padding_mask: Any = None,
                 memory_key_padding_mask: Any = None, src_is_causal: bool | None = None,
                 tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
    """``nn.Transformer``: the encoder over ``src``, the decoder over ``tgt`` and its output."""
    _unmasked(m, memory_mask=memory_mask, src_key_padding_mask=src_key_padding_mask,
              tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
              memory_is_causal=memory_is_causal)
    smask, scausal = _causal(src_mask, src_is_causal, ("src_mask", "src_is_causal"))
    tmask, tcausal = _causal(tgt_mask, tgt_is_causal, ("tgt_mask", "tgt_is_causal"))
    return m.decoder(tgt, m.encoder(src, mask=smask, is_causal=scausal), tgt_mask=tmask, tgt_is_causal=tcausal)


_BODIES: dict[str, Callable[..., Any]] = {
    "TransformerEncoderLayer": _encoder_layer, "TransformerDecoderLayer": _decoder_layer,
    "TransformerEncoder": _encoder, "TransformerDecoder": _decoder, "Transformer": _transformer,
}
