"""Export a priced plan as a runnable torch.distributed program (torch is needed only to run it)."""

from __future__ import annotations

from .plan import EXPORTABLE, ExportPlan, NotExportableError, check_exportable, export_plan
from .program import program_text, write_program

__all__ = [
    "EXPORTABLE",
    "ExportPlan",
    "NotExportableError",
    "check_exportable",
    "export_plan",
    "program_text",
    "write_program",
]
