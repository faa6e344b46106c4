"""Web servers on 127.0.0.1 under bounded load: small HTML pages (html-serving) and large image-sized files (background).

The load (wrk and an in-process fixed-rate HTTP client) runs in the recipe runner, outside
the recorded process trees, so only the server's own processes are ever recorded.
"""

from __future__ import annotations

import functools
import http.client
import random
import subprocess
import sys
import time
from pathlib import Path

from procsift.datasets.recipes._run import (
    Labeller, Owned, Recipe, children_of, contended, everything, need, record_pids, start, stop, variants,
    wait_port,
)

__all__ = ["RECIPES"]

# (phase, seconds, parameter): idle; fixed request rate per second; wrk with N connections
HTML_PHASES = [("idle", 6, 0), ("rate", 10, 20), ("wrk", 10, 4), ("idle", 8, 0), ("rate", 10, 150),
               ("wrk", 8, 16), ("rate", 10, 5), ("idle", 5, 0), ("rate", 8, 60)]
IMAGE_PHASES = [("idle", 5, 0), ("rate", 12, 10), ("wrk", 12, 4), ("idle", 6, 0), ("rate", 12, 40),
                ("wrk", 10, 2), ("rate", 10, 3), ("idle", 5, 0), ("rate", 5, 20)]
# One server process on CPU 0, wrk on CPU 1: the server gets a whole core and runs nearly
# without waiting (what a worker does on a busy machine once CPU hogs are idled).
BUSY_PHASES = [("idle", 5, 0), ("wrk", 10, 16), ("rate", 8, 100), ("wrk", 10, 64), ("idle", 5, 0),
               ("wrk", 8, 4), ("rate", 8, 30)]
SERVER_CPU, LOAD_CPU = "0", "1"


def make_content(root: Path, seed: int = 7) -> tuple[list[str], list[str]]:
    """40 HTML pages of 1-20 KB and 16 image-sized files of 100 KB-5 MB; returns their URL paths."""
    rng = random.Random(seed)
    html_dir, img_dir = root / "www" / "html", root / "www" / "img"
    html_dir.mkdir(parents=True, exist_ok=True)
    img_dir.mkdir(parents=True, exist_ok=True)
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
    pages = []
    for i in range(40):
        size = rng.randint(1024, 20 * 1024)
        body: list[str] = []
        while sum(len(b) for b in body) < size:
            body.append("<p>" + " ".join(rng.choice(words) for _ in range(30)) + "</p>\n")
        (html_dir / f"page{i}.html").write_text(f"<html><head><title>p{i}</title></head><body>\n"
                                                + "".join(body)[:size] + "</body></html>\n")
        pages.append(f"/html/page{i}.html")
    images = []
    for i in range(16):
        size = int(10 ** rng.uniform(5, 6.7))  # 100 KB .. 5 MB, log-uniform
        (img_dir / f"photo{i}.jpg").write_bytes(rng.randbytes(size))
        images.append(f"/img/photo{i}.jpg")
    (root / "www" / "index.html").write_text("<html><body>procsift dataset</body></html>\n")
    for p in [root, root / "www", html_dir, img_dir]:
        p.chmod(0o755)
    return pages, images


def _lua(root: Path, paths: list[str], name: str) -> Path:
    script = root / f"{name}.lua"
    quoted = ", ".join(f'"{p}"' for p in paths)
    script.write_text(f"local paths = {{{quoted}}}\nrequest = function()\n"
                      "  return wrk.format(\"GET\", paths[math.random(#paths)])\nend\n")
    return script


def _rate(port: int, paths: list[str], rate: float, seconds: float) -> None:
    """GET random `paths` at a fixed rate over one keep-alive connection, for `seconds`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    rng = random.Random(port)
    t0 = time.monotonic()
    n = 0
    while (now := time.monotonic()) - t0 < seconds:
        due = t0 + n / rate
        if due > now:
            time.sleep(due - now)
        try:
            conn.request("GET", rng.choice(paths))
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        n += 1
    conn.close()


def drive(port: int, paths: list[str], phases: list[tuple[str, int, int]], lua: Path,
          load_cpu: str | None = None) -> None:
    """Run the load phases one after the other; every phase stops itself. wrk runs on `load_cpu` if given."""
    pin = ["taskset", "-c", load_cpu] if load_cpu is not None else []
    for phase, seconds, param in phases:
        if phase == "idle":
            time.sleep(seconds)
        elif phase == "rate":
            _rate(port, paths, param, seconds)
        else:
            subprocess.run([*pin, "wrk", "-t1", f"-c{param}", f"-d{seconds}s", "-s", str(lua),
                            f"http://127.0.0.1:{port}/"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=seconds + 10, check=False)


def _nginx(work: Path, port: int, docroot: Path, workers: int = 2) -> tuple[list[str], int]:
    conf = work / f"nginx-{port}.conf"
    conf.write_text(f"""worker_processes {workers};
pid {work}/nginx-{port}.pid;
error_log {work}/nginx-{port}.err;
daemon off;
events {{ worker_connections 512; }}
http {{
  access_log off;
  types {{ text/html html; image/jpeg jpg; }}
  sendfile on;
  keepalive_requests 100000;
  client_body_temp_path {work}/nginx-tmp;
  proxy_temp_path {work}/nginx-tmp; fastcgi_temp_path {work}/nginx-tmp;
  uwsgi_temp_path {work}/nginx-tmp; scgi_temp_path {work}/nginx-tmp;
  server {{ listen 127.0.0.1:{port}; root {docroot}; }}
}}
""")
    (work / "nginx-tmp").mkdir(exist_ok=True)
    return ["nginx", "-c", str(conf), "-p", str(work)], port


def _lighttpd(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    conf = work / "lighttpd.conf"
    conf.write_text(f"""server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.username = "www-data"
server.groupname = "www-data"
index-file.names = ("index.html")
mimetype.assign = (".html" => "text/html", ".jpg" => "image/jpeg")
""")
    return ["lighttpd", "-D", "-f", str(conf)], port


def _apache(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    conf = work / "apache2.conf"
    mods = "/usr/lib/apache2/modules"
    conf.write_text(f"""LoadModule mpm_event_module {mods}/mod_mpm_event.so
LoadModule authz_core_module {mods}/mod_authz_core.so
LoadModule mime_module {mods}/mod_mime.so
LoadModule dir_module {mods}/mod_dir.so
ServerName localhost
Listen 127.0.0.1:{port}
PidFile {work}/apache2.pid
DefaultRuntimeDir {work}
Mutex file:{work} default
ErrorLog {work}/apache2.err
LogLevel warn
User www-data
Group www-data
StartServers 2
ServerLimit 2
ThreadsPerChild 16
MaxRequestWorkers 32
TypesConfig /etc/mime.types
DocumentRoot "{docroot}"
<Directory "{docroot}">
  Require all granted
</Directory>
""")
    return ["apache2", "-f", str(conf), "-DFOREGROUND"], port


def _python(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    return ["/usr/bin/python3", "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(docroot)], port


def _node(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    js = work / "server.js"
    js.write_text(f"""const http = require('http'), fs = require('fs'), path = require('path');
const root = {str(docroot)!r};
http.createServer((req, res) => {{
  const file = path.join(root, path.normalize(decodeURIComponent(req.url.split('?')[0])));
  if (!file.startsWith(root)) {{ res.writeHead(403); return res.end(); }}
  fs.readFile(file, (err, data) => {{
    if (err) {{ res.writeHead(404); return res.end('not found'); }}
    res.writeHead(200, {{'Content-Type': file.endsWith('.html') ? 'text/html' : 'application/octet-stream'}});
    res.end(data);
  }});
}}).listen({port}, '127.0.0.1');
""")
    return ["node", str(js)], port


def _gunicorn(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    app = work / "static_app.py"
    app.write_text(f"""import os
ROOT = {str(docroot)!r}
def app(environ, start_response):
    path = os.path.normpath(os.path.join(ROOT, environ.get('PATH_INFO', '/').lstrip('/')))
    if not path.startswith(ROOT) or not os.path.isfile(path):
        start_response('404 Not Found', [('Content-Type', 'text/plain')])
        return [b'not found']
    with open(path, 'rb') as fh:
        body = fh.read()
    start_response('200 OK', [('Content-Type', 'text/html'), ('Content-Length', str(len(body)))])
    return [body]
""")
    return ["gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}", "--chdir", str(work),
            "--access-logfile", "-", "static_app:app"], port


def _webfs(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    return ["webfsd", "-F", "-4", "-i", "127.0.0.1", "-p", str(port), "-r", str(docroot), "-c", "128"], port


def _uvicorn(work: Path, port: int, docroot: Path) -> tuple[list[str], int]:
    app = work / "static_asgi.py"
    app.write_text(f"""import os
ROOT = {str(docroot)!r}
async def app(scope, receive, send):
    if scope['type'] != 'http':
        return
    path = os.path.normpath(os.path.join(ROOT, scope['path'].lstrip('/')))
    if not path.startswith(ROOT) or not os.path.isfile(path):
        await send({{'type': 'http.response.start', 'status': 404, 'headers': [(b'content-type', b'text/plain')]}})
        await send({{'type': 'http.response.body', 'body': b'not found'}})
        return
    with open(path, 'rb') as fh:
        body = fh.read()
    await send({{'type': 'http.response.start', 'status': 200,
                'headers': [(b'content-type', b'text/html'), (b'content-length', str(len(body)).encode())]}})
    await send({{'type': 'http.response.body', 'body': body}})
""")
    return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--app-dir", str(work),
            "--no-access-log", "--log-level", "warning", "static_asgi:app"], port


def _server_recipe(start_server: object, html: bool, workers_only: bool, busy: bool = False) -> object:
    """A recipe body: serve, record the server's tree under load, label the workers by construction.

    `busy`: the server is pinned to one CPU and wrk to the other (BUSY_PHASES).
    """

    def run(recipe: Recipe, work: Path, out: Path) -> Labeller:
        port = int(recipe.extra["port"])  # type: ignore[call-overload]
        pages, images = make_content(work)
        argv, port = start_server(work, port, work / "www")  # type: ignore[operator]
        need(argv[0], "wrk")
        if busy:
            argv = ["taskset", "-c", SERVER_CPU, *argv]
        server = start(argv, recipe.source, work / f"{recipe.name}.server.log")
        rec: Owned | None = None
        try:
            wait_port(port)
            time.sleep(1.0)
            phases = BUSY_PHASES if busy else HTML_PHASES if html else IMAGE_PHASES
            paths = pages if html else images
            duration = sum(p[1] for p in phases) + 3
            rec = record_pids(out, [server.pid], recipe, duration, work / f"{recipe.name}.record.log")
            time.sleep(2.0)  # the collector attaches before the load starts
            drive(port, paths, phases, _lua(work, paths, recipe.name), LOAD_CPU if busy else None)
            rec.proc.wait(60)
        finally:
            if rec is not None:
                stop(rec)
            stop(server)
        return children_of(server.pid) if workers_only else everything()

    return run


def _html(name: str, source: str, starter: object, port: int, workers_only: bool,
          apt: tuple[str, ...] = (), notes: str = "", busy: bool = False) -> Recipe:
    return Recipe(name, "html-serving", source, _server_recipe(starter, True, workers_only, busy),  # type: ignore[arg-type]
                  apt=apt, notes=notes, extra={"port": port})


def _images(name: str, source: str, starter: object, port: int, workers_only: bool,
            apt: tuple[str, ...] = (), notes: str = "") -> Recipe:
    return Recipe(name, "background", source, _server_recipe(starter, False, workers_only),  # type: ignore[arg-type]
                  apt=apt, notes=notes, extra={"port": port})


RECIPES: list[Recipe] = [
    _html("html-nginx", "nginx", _nginx, 18080, True, apt=("nginx-light", "wrk"),
          notes="nginx 2 workers; only the workers (children of the master) are labelled"),
    _html("html-nginx-busy", "nginx", functools.partial(_nginx, workers=1), 18092, True, apt=("nginx-light", "wrk"), busy=True,
          notes="nginx, 1 worker pinned to CPU 0, wrk pinned to CPU 1: a saturated worker (a whole core, "
                "few waits); the same application as html-nginx, so held out with it"),
    _html("html-lighttpd", "lighttpd", _lighttpd, 18081, False, apt=("lighttpd",),
          notes="lighttpd is one event-loop process; it is labelled"),
    _html("html-apache2", "apache2", _apache, 18082, True, apt=("apache2",),
          notes="apache2 mpm_event, 2 child processes x 16 threads; only the children are labelled"),
    _html("html-python", "python-http.server", _python, 18083, False,
          notes="python3 -m http.server (ThreadingHTTPServer); the process is labelled"),
    _html("html-node", "node", _node, 18084, False,
          notes="a 15-line node http server reading files with fs.readFile; the process is labelled"),
    _html("html-gunicorn", "gunicorn", _gunicorn, 18085, True, apt=("gunicorn",),
          notes="gunicorn, 2 sync workers, a static-file WSGI app; only the workers are labelled"),
    _images("bg-nginx-images", "nginx-images", _nginx, 18086, True, apt=("nginx-light", "wrk"),
            notes="nginx streaming 100 KB-5 MB files (the papers' image contrast); workers labelled background"),
    _images("bg-lighttpd-images", "lighttpd-images", _lighttpd, 18087, False, apt=("lighttpd", "wrk"),
            notes="lighttpd streaming the same 100 KB-5 MB files; labelled background"),
    _images("bg-apache2-images", "apache2-images", _apache, 18088, True, apt=("apache2", "wrk"),
            notes="apache2 mpm_event streaming the same files; the children labelled background"),
    _images("bg-python-images", "python-images", _python, 18089, False, apt=("wrk",),
            notes="python3 -m http.server streaming the same files; labelled background"),
    _images("bg-node-images", "node-images", _node, 18090, False, apt=("wrk",),
            notes="the node server streaming the same files; labelled background"),
    _images("bg-gunicorn-images", "gunicorn-images", _gunicorn, 18091, True, apt=("gunicorn", "wrk"),
            notes="gunicorn's static-file WSGI app streaming the same files; the workers labelled background"),
    _html("html-webfs", "webfs", _webfs, 18093, False, apt=("webfs", "wrk"),
          notes="webfsd, a single-process select() server using sendfile; the process is labelled"),
    _html("html-uvicorn", "uvicorn", _uvicorn, 18094, False, apt=("wrk",),
          notes="uvicorn (asyncio) running a 15-line ASGI static-file app; the process is labelled"),
    _images("bg-webfs-images", "webfs-images", _webfs, 18095, False, apt=("webfs", "wrk"),
            notes="webfsd streaming the same 100 KB-5 MB files; labelled background"),
    _images("bg-uvicorn-images", "uvicorn-images", _uvicorn, 18096, False, apt=("wrk",),
            notes="the uvicorn ASGI app streaming the same files; labelled background"),
]

# The same servers on a busy machine: three CPU contenders at normal priority beside them
# (recipes/_run.py, contenders()), so that waiting for a CPU is seen under every label.
RECIPES += variants(RECIPES, ("html-nginx", "html-lighttpd", "html-python", "html-gunicorn"), contended)
