"""The one report model and the sweep report.

- :mod:`.blocks`: the typed blocks every report is built from (heading, paragraph, list,
  table, collapsible details, code block, figure, note, finding) and their inline content;
- :mod:`.markdown` and :mod:`.html`: the two renderers (the page and each block type are
  Jinja2 templates in ``templates/``, package data); :mod:`.output` writes both files;
- :mod:`.plots`: the figures the sweep and the agent reports share;
- :mod:`.render` (the sweep report), :mod:`.summary` (its data-driven sentences) and
  :mod:`.gpu` (its GPU section).
"""
