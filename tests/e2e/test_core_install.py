"""The core install is a library: ``pip install failover`` (no extras) in a fresh virtualenv
imports, loads a whole config file (its ``gateway:`` section included) and answers a
``Router.complete`` over loopback HTTP, with none of the server stack or the other HTTP
clients installed; ``failover serve`` then says which extra it needs.

The package is built from this checkout and its core requirements come from the package
index (or pip's cache): about 20-40 s, most of it pip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_STACK = ("starlette", "uvicorn", "prometheus_client", "aiohttp", "httpx", "looptime")

pytestmark = pytest.mark.e2e

SCRIPT = textwrap.dedent(
    """
    import asyncio, importlib.util, sys, tempfile
    from pathlib import Path

    STACK = {stack!r}
    assert [m for m in STACK if importlib.util.find_spec(m) is not None] == [], "not a core install"

    import failover
    from failover import Request, Router
    from failover.testing import FakeProvider, FakeServer, Reply, Script

    async def main() -> None:
        a = FakeProvider("a", "openai", Script.always(Reply.ok("hello from a")))
        async with FakeServer(a) as srv:
            cfg = Path(tempfile.mkdtemp()) / "failover.yaml"
            cfg.write_text(
                "targets:\\n"
                "  a: {{dialect: openai, base_url: '" + srv.base_url_for(a) + "', model: m, tokenizer: estimate}}\\n"
                "routes:\\n  chat: {{primary: [a]}}\\n"
                "gateway:\\n  envelope: {{deadline_ms: 5000}}\\n"  # serve's section: validated, not used here
            )
            async with Router.from_config(cfg) as router:
                resp = await router.complete("chat", Request.simple("hi"))
        print(resp.text, resp.record.target_used, len(resp.record.attempts))
        loaded = sorted(m for m in STACK if m in sys.modules)
        assert loaded == [], loaded

    asyncio.run(main())
    try:
        import failover.gateway
    except ModuleNotFoundError as exc:
        print("gateway:", exc)
    """
)


def test_the_core_install_answers_a_router_call_without_the_server_stack(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    # this interpreter's pip installs into the new environment (`--python`): no pip bootstrap there
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert install.returncode == 0, install.stderr[-3000:]

    run = subprocess.run(
        [str(python), "-c", SCRIPT.format(stack=SERVER_STACK)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "hello from a a 1"
    assert lines[1].startswith("gateway: failover.gateway (failover serve) needs ") and "failover[gateway]" in lines[1]

    cli = venv / "bin" / "failover"
    for command in ("serve", "demo"):  # the server; the simulator's virtual clock
        run = subprocess.run([str(cli), command], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run.stderr
        assert f"failover {command}: needs the gateway extra" in run.stderr
        assert "pip install 'failover[gateway]'" in run.stderr and "Traceback" not in run.stderr

    check = subprocess.run(
        [str(cli), "check-config", "--offline", str(ROOT / "examples" / "failover.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    assert "ok (0 errors" in check.stdout
