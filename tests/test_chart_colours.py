"""Charts give every part its own colour: no two parts of one chart look alike (the walkthrough found
the palette's red on a part beside the exposed gradient exchange's)."""

from __future__ import annotations

from matplotlib.colors import to_hex
from matplotlib.patches import Patch

from perfmodel.report.charts import plan_chart
from perfmodel.report.charts_base import PART_COLOURS, part_colour
from perfmodel.search import plan
from perfmodel.strategies import predict

#: plans whose breakdowns hold every step part the strategies price (pipelines, spatial, filter and
#: channel splits, DataParallel, parameter servers, amp)
SPECS = ("dp=8", "pp=2,dp=4", "sp=2,dp=4", "filter=2,dp=4", "channel=2,dp=4", "dp=8,comm=dataparallel",
         "dp=8,comm=ps-central", "pp=4,mb=4,recompute=true")


def _parts() -> list[str]:
    keys: dict[str, None] = {}
    for s in SPECS:
        keys.update(dict.fromkeys(predict("resnet50", 8, s, "a100-80gb-dgx", "amp", None, 64).breakdown))
    return list(keys)


def test_every_part_of_one_chart_has_its_own_colour() -> None:
    parts = _parts()
    assert len(parts) >= 12  # the specs reach the parts they are there for
    seen: dict[str, str] = {}
    colours = [part_colour(k, seen) for k in [*parts, "a_new_part", "another_new_part"]]
    assert len(set(colours)) == len(colours)


def test_no_two_named_parts_share_a_colour() -> None:
    named = list(PART_COLOURS.values())
    assert len(set(named)) == len(named)


def test_the_plan_chart_legend_has_distinct_colours() -> None:
    fig = plan_chart(plan("resnet50", 8, "a100-80gb-dgx", "amp", 256, top=8))
    handles = [h for sf in fig.subfigs for leg in sf.legends for h in leg.legend_handles]
    fills = [to_hex(h.get_facecolor()) for h in handles if isinstance(h, Patch) and not h.get_hatch()]
    assert len(fills) >= 3 and len(set(fills)) == len(fills)
