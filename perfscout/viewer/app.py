"""The viewer's web app (Starlette): pages over the home, and the few actions that change it.

Safety, all in this module:

- every request's ``Host`` must be a loopback name (a DNS-rebinding page cannot reach it);
- reading needs the per-start token once (``/?token=…`` sets a cookie for this port);
- every action is a POST carrying the token in a form field or the ``X-Perfscout-Token``
  header, compared with :func:`hmac.compare_digest`; the cookie alone never acts (CSRF);
- ``read_only`` turns every action away;
- pages are Jinja2 templates with autoescape, under a Content-Security-Policy that runs
  only the viewer's own script file; files of a run are served only from inside its
  directory (:mod:`.paths`), HTML among them sandboxed (no script, no cookies).
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from perfscout.errors import InputError
from perfscout.graph.context import Context
from perfscout.viewer import store as S
from perfscout.viewer import sweeps as W
from perfscout.viewer import timeline as T
from perfscout.viewer.jobs import FORKABLE, Jobs
from perfscout.viewer.paths import RUN_ID, NotServed, check_run_id, child_dir, child_file, run_dir

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-perfscout-token"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
#: The viewer's own pages: its script and style files, nothing inline, nothing from elsewhere.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "form-action 'self'; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'")
#: A run's own files (report.html): rendered, never run, in an origin of their own.
FILE_CSP = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'self'"
#: Inline writes per visit on the timeline up to this many visits; above it they load on demand.
INLINE_VISITS = 300
#: Visits per timeline page: a long run opens at its first page (every visit is one click away).
PAGE_VISITS = 400
SERVED_TYPES = {".json": "application/json", ".md": "text/plain; charset=utf-8", ".txt": "text/plain; charset=utf-8",
                ".log": "text/plain; charset=utf-8", ".csv": "text/plain; charset=utf-8", ".png": "image/png",
                ".yaml": "text/plain; charset=utf-8", ".html": "text/html; charset=utf-8"}


def _utc(ts: float | None) -> str:
    if not ts:
        return "–"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _dur(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s" if s < 120 else f"{s / 60:.1f} min"


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "–" if v is None else ("yes" if v else "no")
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def request_text(request: Any) -> str:
    """A request in a line: its words, or a spec's goal, or the spec itself."""
    if isinstance(request, str):
        return request
    if isinstance(request, dict):
        if request.get("goal"):
            return str(request["goal"])
        if request.get("intent"):
            return str(request["intent"])
    return json.dumps(T.plain(request), ensure_ascii=False, default=str)[:300]


class Viewer:
    """The data behind the pages, for one home and one checkpoint store."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.runs = ctx.runs_dir
        self.jobs = Jobs(ctx)

    def run_path(self, run_id: str) -> Path:
        return run_dir(self.runs, run_id)

    def run_dirs(self) -> list[str]:
        """Run directories on disk (what is listed when the store cannot be read)."""
        if not self.runs.is_dir():
            return []
        out = []
        for d in self.runs.iterdir():
            if d.is_dir() and not d.is_symlink() and (d / "request.json").is_file() and RUN_ID.fullmatch(d.name):
                out.append((d.stat().st_mtime, d.name))
        return [n for _, n in sorted(out, reverse=True)]

    def saved_request(self, run_id: str) -> Any:
        try:
            path = child_file(self.run_path(run_id), "request.json")
            return json.loads(path.read_text(encoding="utf-8")).get("request")
        except (NotServed, OSError, ValueError, AttributeError):
            return None

    def standing(self, st: S.Store, run_id: str, path: list[S.Checkpoint]) -> T.Standing:
        """Where a run stands: from the store's rows, or (a thread of one checkpoint) from
        ``perfscout.agent``'s own reading of its latest state."""
        found = T.standing(path, lambda cid, w: st.load(run_id, cid, w),
                           seed=lambda: st.snapshot(run_id, path[0].id).values)
        if found is not None:
            return found
        from perfscout import agent

        outcome = agent._outcome(st.graph, run_id)
        return T.Standing(status=outcome.status, question=outcome.question, planner=outcome.planner,
                          next=list(st.snapshot(run_id).next or ()), values=outcome.values)

    def list_runs(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen = set()
        with S.open_store(self.ctx) as st:
            for tid, latest in (st.threads() if st is not None else []):
                path, _ = S.lineage(st.checkpoints(tid, decode=(S.INTERRUPT,)))
                now = self.standing(st, tid, path)
                seen.add(tid)
                job = self.jobs.get(tid)
                out.append({"id": tid, "request": request_text(now.values.get("request")),
                            "status": "running" if job and job.state == "running" else now.status,
                            "planner": now.planner or now.values.get("planner_kind") or "",
                            "when": S.checkpoint_time(latest), "question": (now.question or {}).get("question"),
                            "fork_of": self.fork_of(tid)})
        for name in self.run_dirs():
            if name not in seen:
                out.append({"id": name, "request": request_text(self.saved_request(name)), "status": "no checkpoints",
                            "planner": "", "when": (self.runs / name).stat().st_mtime, "question": None,
                            "fork_of": None})
        return out

    def fork_of(self, run_id: str) -> dict[str, Any] | None:
        try:
            doc = json.loads(child_file(self.run_path(run_id), "fork.json").read_text(encoding="utf-8"))
        except (NotServed, OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def timeline(self, run_id: str, start: int = 1) -> dict[str, Any]:
        check_run_id(run_id)
        rdir = self.run_path(run_id)
        with S.open_store(self.ctx) as st:
            cps = st.checkpoints(run_id) if st is not None else []
            if not cps:
                raise NotServed(f"no run {run_id!r} in the checkpoint store ({self.where()})")
            if len(cps) <= INLINE_VISITS:  # a short run: every write shown on the page, so read them all
                cps = st.checkpoints(run_id, decode=None)
            path, other = S.lineage(cps)
            outcome = self.standing(st, run_id, path)
        vs = T.visits(path, rdir if rdir.is_dir() else None)
        claims, claims_problem = T.read_claims(rdir) if rdir.is_dir() else (None, "")
        report_md = _read(rdir / "report.md")
        by_task: dict[str, list[T.ToolCall]] = {}
        for c in T.tool_calls(vs):
            by_task.setdefault(c.task_key, []).append(c)
        job = self.jobs.get(run_id)
        values = outcome.values
        start = max(1, min(start, len(vs) or 1))
        pages = [(i, min(i + PAGE_VISITS - 1, len(vs))) for i in range(1, len(vs) + 1, PAGE_VISITS)]
        page_of = {}
        for v in vs:
            for c in v.calls:
                page_of.setdefault(c.task_key, 1 + (v.index - 1) // PAGE_VISITS * PAGE_VISITS)
        start = 1 + (start - 1) // PAGE_VISITS * PAGE_VISITS
        return {"shown": vs[start - 1:start - 1 + PAGE_VISITS], "start": start, "pages": pages, "page_of": page_of,"id": run_id, "request": values.get("request"), "request_line": request_text(values.get("request")),
                "status": "running" if job and job.state == "running" else outcome.status,
                "planner": outcome.planner or values.get("planner_kind") or "", "visits": vs, "other": other,
                "checkpoints": path, "latest": path[-1].id, "when": path[-1].ts, "job": job,
                "claims": claims, "claims_problem": claims_problem, "by_task": by_task,
                "answer_lines": T.answer_lines(report_md) if claims is None else [],
                "report_md": report_md, "has_html": (rdir / "report.html").is_file(),
                "progress": T.progress(values), "question": outcome.question, "fork_of": self.fork_of(run_id),
                "inline": len(cps) <= INLINE_VISITS, "answers": values.get("answers") or [],
                "sweeps": [s for s in W.find_sweeps(self.runs) if s.startswith(run_id + "/")]}

    def checkpoint(self, run_id: str, checkpoint_id: str) -> dict[str, Any]:
        check_run_id(run_id)
        with S.open_store(self.ctx) as st:
            cps = st.checkpoints(run_id, decode=()) if st is not None else []
            ids = {c.id for c in cps}
            if checkpoint_id not in ids:
                raise NotServed(f"no checkpoint {checkpoint_id[:60]!r} in run {run_id!r}")
            snap = st.snapshot(run_id, checkpoint_id)
        path, _ = S.lineage(cps)
        order = [c.id for c in path]
        here = next(c for c in cps if c.id == checkpoint_id)
        pos = order.index(checkpoint_id) if checkpoint_id in order else None
        values = dict(snap.values or {})
        slots = {k: T.to_json(values.get(k)) for k in FORKABLE if k in values}
        return {"id": run_id, "cp": here, "snap": snap, "state": values, "next": list(snap.next or ()),
                "prev": order[pos - 1] if pos else None,
                "following": order[pos + 1] if pos is not None and pos + 1 < len(order) else None,
                "on_branch": pos is not None, "slots": slots,
                "slot": "intent" if "intent" in slots and values.get("intent") else "request",
                "question": next((i.value for t in snap.tasks for i in t.interrupts), None),
                "progress": T.progress(values), "request_line": request_text(values.get("request"))}

    def visit_writes(self, run_id: str, checkpoint_id: str) -> dict[str, Any]:
        check_run_id(run_id)
        with S.open_store(self.ctx) as st:
            writes = st.writes(run_id, checkpoint_id, decode=None).get(checkpoint_id, []) if st is not None else []
        return {w.channel: w.value for w in writes if not w.channel.startswith(("__", "branch:"))}

    def progress(self, run_id: str) -> dict[str, Any]:
        check_run_id(run_id)
        with S.open_store(self.ctx) as st:
            path, _ = S.lineage(st.checkpoints(run_id, decode=("observations", S.INTERRUPT)) if st is not None else [])
            if not path:
                raise NotServed(f"no run {run_id!r} in the checkpoint store")
            outcome = self.standing(st, run_id, path)
        job = self.jobs.get(run_id)
        running = bool(job and job.state == "running")
        latest = path[-1].id
        return {"id": run_id, "status": "running" if running else outcome.status, "latest": latest,
                "updated": S.checkpoint_time(latest), "next": outcome.next,
                "question": (outcome.question or {}).get("question"), **T.progress(outcome.values),
                "job": None if job is None else {"kind": job.kind, "state": job.state, "error": job.error,
                                                 "nodes": job.nodes, "last_node": job.last_node}}

    def where(self) -> str:
        from perfscout.graph.checkpoint import describe

        return describe(self.ctx)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        return ""


def templates() -> Environment:
    env = Environment(loader=PackageLoader("perfscout.viewer", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters.update(utc=_utc, dur=_dur, num=_num, pretty=T.to_json, q=lambda s: quote(str(s), safe=""))
    env.filters["compact"] = lambda v: v if isinstance(v, str) and len(v) <= 300 else json.dumps(
        T.plain(v), ensure_ascii=False, default=str)[:300]
    env.filters["record_cols"] = lambda records: [c for c in RECORD_COLS if any(c in r for r in records)]
    env.globals.update(SHOWN=W.SHOWN, describe_task=W.describe_task)
    return env


#: Record columns a tool call's records show.
RECORD_COLS = ("codec", "device", "dataset", "mode", "bound", "ratio", "psnr", "max_abs_err", "bound_ok",
               "compress_MBps", "decompress_MBps", "status")


def create_app(ctx: Context | None = None, *, token: str | None = None, read_only: bool = False,
               port: int = 0, allowed_hosts: tuple[str, ...] = LOOPBACK) -> Starlette:
    """The viewer app over ``ctx``'s home; ``token`` is generated when not given (``app.state.token``)."""
    ctx = ctx or Context()
    token = token or secrets.token_urlsafe(24)
    viewer = Viewer(ctx)
    env = templates()
    cookie = f"perfscout_viewer_{port}"

    def page(request: Request, name: str, status: int = 200, **data: Any) -> HTMLResponse:
        html = env.get_template(name).render(read_only=read_only, token=token, home=str(ctx.home_path),
                                             store=_safe_where(viewer), path=request.url.path, **data)
        return HTMLResponse(html, status_code=status)

    def fail(request: Request, status: int, message: str, **data: Any) -> HTMLResponse:
        return page(request, "error.html", status=status, message=message, **data)

    def runs(request: Request) -> Response:
        items = viewer.list_runs()
        return page(request, "runs.html", runs=items, sweeps=W.find_sweeps(viewer.runs))

    def api_runs(request: Request) -> Response:
        return JSONResponse([{**r, "fork_of": r["fork_of"]} for r in viewer.list_runs()])

    def run_page(request: Request) -> Response:
        try:
            start = int(request.query_params.get("from", "1"))
        except ValueError:
            start = 1
        return page(request, "run.html", run=viewer.timeline(request.path_params["run_id"], start))

    def checkpoint_page(request: Request) -> Response:
        return page(request, "checkpoint.html",
                    cp=viewer.checkpoint(request.path_params["run_id"], request.path_params["checkpoint_id"]))

    def writes_fragment(request: Request) -> Response:
        writes = viewer.visit_writes(request.path_params["run_id"], request.path_params["checkpoint_id"])
        return page(request, "writes.html", writes=writes)

    def progress(request: Request) -> Response:
        return JSONResponse(viewer.progress(request.path_params["run_id"]))

    def run_file(request: Request) -> Response:
        root = viewer.run_path(request.path_params["run_id"])
        return _file(child_file(root, request.path_params["name"]))

    def sweep_page(request: Request) -> Response:
        rel = request.query_params.get("dir", "")
        return page(request, "sweep.html", sweep=W.read_sweep(viewer.runs, rel))

    def sweep_file(request: Request) -> Response:
        rel, name = request.query_params.get("dir", ""), request.query_params.get("name", "")
        return _file(child_file(child_dir(viewer.runs, rel), name))

    async def answer(request: Request) -> Response:
        run_id = check_run_id(request.path_params["run_id"])
        form = await read_form(request)
        state = await run_in_threadpool(viewer.progress, run_id)
        if not state.get("question"):
            raise InputError(f"run {run_id} is not waiting for an answer")
        viewer.jobs.answer(run_id, str(form.get("answer") or ""))
        return _back(request, f"/runs/{quote(run_id, safe='')}")

    async def resume(request: Request) -> Response:
        run_id = check_run_id(request.path_params["run_id"])
        state = await run_in_threadpool(viewer.progress, run_id)
        if state["question"]:
            raise InputError(f"run {run_id} is waiting for an answer: answer it instead")
        if state["status"] == "done" or not state["next"]:
            raise InputError(f"run {run_id} has finished: there is nothing to resume (fork it to change something)")
        viewer.jobs.resume(run_id)
        return _back(request, f"/runs/{quote(run_id, safe='')}")

    async def fork(request: Request) -> Response:
        run_id = check_run_id(request.path_params["run_id"])
        form = await read_form(request)
        slot = str(form.get("slot") or "")
        try:
            value = json.loads(str(form.get("value") or ""))
        except (ValueError, RecursionError) as exc:  # nested thousands deep: json raises RecursionError
            raise InputError(f"the new value of {slot} is not valid JSON: {exc}") from exc
        new = await run_in_threadpool(viewer.jobs.fork, run_id, str(form.get("checkpoint_id") or ""), slot, value,
                               str(form.get("new_thread") or ""))
        return _back(request, f"/runs/{quote(new, safe='')}")

    routes = [
        Route("/", runs), Route("/api/runs", api_runs),
        Route("/runs/{run_id}", run_page), Route("/runs/{run_id}/checkpoints/{checkpoint_id}", checkpoint_page),
        Route("/runs/{run_id}/writes/{checkpoint_id}", writes_fragment),
        Route("/api/runs/{run_id}/progress", progress), Route("/runs/{run_id}/files/{name:path}", run_file),
        Route("/sweep", sweep_page), Route("/sweep/file", sweep_file),
        Route("/runs/{run_id}/answer", answer, methods=["POST"]), Route("/runs/{run_id}/resume", resume, methods=["POST"]),
        Route("/runs/{run_id}/fork", fork, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("perfscout.viewer", "static")]), name="static"),
    ]
    async def guard(request: Request, call_next: Any) -> Response:
        if _host_name(request.headers.get("host") or "") not in allowed_hosts:
            return _headers(Response("unexpected Host header: open the viewer at 127.0.0.1\n", status_code=421,
                                     media_type="text/plain"))
        path = request.url.path
        if request.method not in ("GET", "HEAD", "POST"):
            return _headers(Response("method not allowed\n", status_code=405, media_type="text/plain"))
        if request.method == "POST":
            if read_only:
                return _headers(fail(request, 403, "This viewer was started with --read-only: nothing can be "
                                     "changed from the page."))
            try:
                given = request.headers.get(TOKEN_HEADER, "") or (await read_form(request)).get("token", "")
            except InputError as exc:
                return _headers(fail(request, 400, str(exc)))
            if not _same(given, token):
                return _headers(fail(request, 403, "This action needs the token that `perfscout serve` printed "
                                     "(the page's forms carry it; a missing or wrong token is refused)."))
        elif not path.startswith("/static/"):
            query_token = request.query_params.get("token")
            if query_token is not None:
                if not _same(query_token, token):
                    return _headers(fail(request, 403, "Wrong token: open the address `perfscout serve` printed."))
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                response = RedirectResponse(path + ("?" + urlencode(rest) if rest else ""), status_code=303)
                response.set_cookie(cookie, token, httponly=True, samesite="strict", path="/")
                return _headers(response)
            if not _same(request.cookies.get(cookie, ""), token) and not _same(request.headers.get(TOKEN_HEADER, ""),
                                                                                 token):
                return _headers(fail(request, 401, "Open the address that `perfscout serve` printed on its "
                                     "terminal (it ends in ?token=…): the token is asked once per start."))
        try:
            response = await call_next(request)
        except NotServed as exc:
            response = fail(request, 404, str(exc))
        except InputError as exc:
            response = fail(request, 400, str(exc))
        except Exception as exc:  # noqa: BLE001 - a damaged store is a page, not a traceback
            reason = S.unreadable_reason(exc)
            if reason is None:
                log.exception("viewer: unexpected error on %s", path)
                response = fail(request, 500, f"unexpected {type(exc).__name__}: {exc} (a perfscout bug)")
            else:
                response = fail(request, 503, f"The checkpoint store {_safe_where(viewer)} cannot be read: "
                                f"{reason}. Nothing was changed in it. The run directories are still on disk:",
                                dirs=viewer.run_dirs())
        return _headers(response)

    app = Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)])
    app.state.token, app.state.viewer, app.state.read_only = token, viewer, read_only
    return app


#: The largest action body read (a forked slot's JSON is the big one).
MAX_FORM_BYTES = 8 * 2**20


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form (what the pages' forms send); {} for anything else.
    Parsed here rather than with python-multipart: the viewer's forms are never multipart."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InputError(f"the form is larger than {MAX_FORM_BYTES // 2**20} MiB")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"the form could not be read: {exc}") from exc


def _host_name(header: str) -> str:
    """``127.0.0.1:8765`` -> ``127.0.0.1``; ``[::1]:8765`` -> ``[::1]``."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if ":" in header else header


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def _safe_where(viewer: Viewer) -> str:
    try:
        return viewer.where()
    except Exception:  # noqa: BLE001 - only for display
        return "(unknown)"


def _headers(response: Response) -> Response:
    response.headers.setdefault("content-security-policy", PAGE_CSP)
    response.headers["x-content-type-options"] = "nosniff"
    response.headers["referrer-policy"] = "no-referrer"
    response.headers["cache-control"] = "no-store"
    response.headers.setdefault("x-frame-options", "DENY")
    return response


def _back(request: Request, url: str) -> Response:
    if request.headers.get(TOKEN_HEADER):  # a script's request: say where, do not redirect
        return JSONResponse({"location": url}, status_code=202)
    return RedirectResponse(url, status_code=303)


def _file(path: Path) -> Response:
    kind = SERVED_TYPES.get(path.suffix.lower())
    if kind is None:  # anything else is a download, never rendered
        response: Response = FileResponse(path, media_type="application/octet-stream",
                                          headers={"content-disposition": f"attachment; filename=\"{quote(path.name)}\""})
    else:
        response = FileResponse(path, media_type=kind)
    response.headers["content-security-policy"] = FILE_CSP
    response.headers["x-frame-options"] = "SAMEORIGIN"
    return response


def startup_line(port: int, token: str) -> str:
    return f"http://127.0.0.1:{port}/?token={token}"
