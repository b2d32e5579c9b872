"""Sweep reports: plots (:mod:`.plots`), a data-driven written summary (:mod:`.summary`)
and the Markdown / self-contained HTML rendering (:mod:`.render`)."""
