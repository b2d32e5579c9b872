"""`perfscout serve`: a local web viewer over the perfscout home (runs, checkpoints, sweeps).

Layers inside: :mod:`.paths` (what may be served: run ids and file names checked for
containment), :mod:`.store` (the checkpointer read node by node, without loading every
checkpoint), :mod:`.timeline` (a run as node visits, tool calls, rules, questions, claims),
:mod:`.sweeps` (sweep directories), :mod:`.jobs` (answer / resume / fork in the background,
through :mod:`perfscout.agent`), :mod:`.app` (the Starlette routes, the token, the pages).
"""
