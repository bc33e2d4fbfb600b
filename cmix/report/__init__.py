"""The evaluation report (``cmix report``): run folders' metrics into tables, figures and
one self-contained HTML page, written by :func:`cmix.report.write.write_report`.

The statistics: :mod:`~cmix.report.collect` (the runs as one table, the grid, the
summary, predictions) and :mod:`~cmix.report.verdicts` (paired tests, Holm, the headline
verdicts and the answers). The figures: :mod:`~cmix.report.plots` (matplotlib) and
:mod:`~cmix.report.figures` (which figures, their captions). The page:
:mod:`~cmix.report.tables` (its HTML tables) and :mod:`~cmix.report.page` (report.html;
its CSS is package data, ``report.css``).
"""
