"""On one GPU every split but data parallelism is impossible, and the reason says that.

``plan resnet50 --gpus 1 --strategies pp`` said "pp=1 needs 1 pipeline stages, and resnet50 has 18
chain links", which reads as if 18 links were too few for one stage.
"""

from __future__ import annotations

import pytest

from perfmodel.network import get_model
from perfmodel.search.enumerate import no_candidate_reasons


@pytest.mark.parametrize("kind", ["pp", "sp", "hybrid", "filter", "channel", "mp"])
def test_one_gpu_reason_names_the_second_gpu(kind: str) -> None:
    (reason,) = no_candidate_reasons(get_model("resnet50"), 1, 32, 8, (kind,))
    assert reason == f"{kind} splits a step over 2 or more GPUs (on 1 GPU only dp=1 runs)"


def test_the_cli_line(capsys: pytest.CaptureFixture[str]) -> None:
    from perfmodel.cli import main

    with pytest.raises(SystemExit) as e:
        main(["plan", "resnet50", "--gpus", "1", "--strategies", "pp"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "pp splits a step over 2 or more GPUs" in err and "needs 1 pipeline stages" not in err
