"""Run reports: a self-contained HTML page per run (:func:`build_report`, also importable as
``write_report``) and headless-Chromium rendering (:func:`privtext.report.chromium.render`) to check that it draws
without console errors."""

from .html import REPORT, build_report

write_report = build_report

__all__ = ["REPORT", "build_report", "write_report"]
