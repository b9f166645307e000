"""The console: `subagents serve`, a local web page over a run store (docs/console.md).

The layer above ``cli/``: it reads the store the way the inspecting commands do (their
store opening, run references, transcripts: ``cli.state``, ``cli.log_cmd``) and posts the
same commands (stop, send) through it; nothing below imports it, and ``cli/main.py`` names
its command by string only. Its modules: ``serve_cmd`` (the command), ``guard`` (who may
ask: the token, the Host header, same-origin writes, the headers every answer carries),
``index`` (the runs in memory, their tree, filters and pages: pure), ``feed`` (the store
read into the index and polled for what changed), ``run_page`` (one run's page as data),
``actions`` (stop, send, continue), ``approvals`` (the
pending approvals, read and answered), ``hub`` (each open stream's bounded inbox of changes),
``app`` (the Starlette application), ``limits`` and ``protocol`` (what one client may hold,
and uvicorn's HTTP/1.1 protocol with the deadlines that enforce it), ``static/`` (the
page: plain HTML, JS and CSS, shipped in the wheel, no build step).
"""
