"""A real two-node Ray cluster on loopback for the ``--executor ray`` tests (not a test module).

Ray picks a node's address itself and turns ``127.0.0.1`` into the machine's outward address;
so the cluster lives in a network namespace of its own whose only interface is loopback
(``unshare --net``): every address Ray can pick there is 127.0.0.1, and nothing it sends can
leave the machine. The head (``ray start --head``) and a second node (``ray start --address``)
each offer one CPU; commands that talk to the cluster (the CLI under test, a probe driver) are
run inside the namespace with ``nsenter``. ``stop`` kills exactly the processes in that
namespace — the ones this helper started — and nothing else on the machine.

Ray also keeps state outside the network: its session folders and the address file
``ray start`` leaves (``/tmp/ray``), and the token of its token authentication
(``~/.ray/auth_token``, which any local ``ray.init()`` writes and any later ``ray start`` then
turns on — while a driver given an explicit address does not: that was the
``InvalidAuthToken … RAY_AUTH_MODE is currently 'disabled'`` of a full-suite run, after the
benchmark's smoke test had made a local cluster). So each cluster gets a clean environment of
its own: no inherited ``RAY_*`` variable, ``RAY_TMPDIR`` its own folder (sessions, sockets,
address file), and token authentication on with a token of its own (``RAY_AUTH_MODE=token``,
``RAY_AUTH_TOKEN_PATH``), which every process here — nodes, drivers, the CLI under test —
is given, and nothing else on the machine knows.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _ctrl_c import ctrl_c_reaches_children

PORT = 6379  # free by construction: the namespace is new
ADDRESS = f"127.0.0.1:{PORT}"

# Brings loopback up (a new namespace has it down), then holds the namespace open until its
# stdin closes (the test process ended, however it ended).
_HOLDER = """
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifr = struct.pack("16sh", b"lo", 0)
flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))  # SIOCSIFFLAGS: IFF_UP
print("up", flush=True)
sys.stdin.read()
"""


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


class RayCluster:
    def __init__(self) -> None:
        self.root = os.geteuid() == 0
        unshare = ["unshare", "--net"] if self.root else ["unshare", "--user",
                                                          "--map-root-user", "--net"]
        self.holder = subprocess.Popen([*unshare, sys.executable, "-c", _HOLDER],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True)
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != "up":
            raise RuntimeError("could not make a loopback-only network namespace "
                               "(unshare --net)")
        self.netns = os.readlink(f"/proc/{self.holder.pid}/ns/net")
        self.temp = Path(tempfile.mkdtemp(prefix="hr-ray-"))  # short: Ray's socket paths
        self.token = self.temp / "auth_token"
        self.token.touch(mode=0o600)
        self.token.write_text(secrets.token_hex(32))
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": ADDRESS,
                    "RAY_TMPDIR": str(self.temp), "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN_PATH": str(self.token)}

    def _env(self, extra: dict[str, str | None]) -> dict[str, str]:
        """This cluster's environment with ``extra`` laid over it (None: left out)."""
        merged = {**self.env, **extra}
        return {k: v for k, v in merged.items() if v is not None}

    def prefix(self) -> list[str]:
        pid = str(self.holder.pid)
        if self.root:
            return ["nsenter", f"--net=/proc/{pid}/ns/net", "--"]
        return ["nsenter", "-t", pid, "-U", "-n", "--preserve-credentials", "--"]

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[str]:
        env = self._env(kw.pop("env", {}))
        with ctrl_c_reaches_children():  # a test interrupts it
            return subprocess.Popen([*self.prefix(), *argv], env=env, text=True, **kw)

    def run(self, argv: Sequence[str], timeout: float = 600,
            **kw: Any) -> subprocess.CompletedProcess[str]:
        env = self._env(kw.pop("env", {}))
        return subprocess.run([*self.prefix(), *argv], env=env, text=True,
                              capture_output=True, timeout=timeout, **kw)

    def start(self) -> RayCluster:
        common = ["--num-cpus", "1", "--object-store-memory", str(80 << 20),
                  "--disable-usage-stats"]
        head = self.run([_bin("ray"), "start", "--head", "--port", str(PORT),
                         "--include-dashboard", "false", *common])
        self._wait_for_nodes(1, head)
        node = self.run([_bin("ray"), "start", "--address", ADDRESS, *common])
        self._wait_for_nodes(2, node)
        return self

    def _wait_for_nodes(self, count: int, started: subprocess.CompletedProcess[str]) -> None:
        """Until ``count`` nodes are alive. ``ray start`` gives a raylet a fixed 30 s to
        register and then exits 1 — while the raylet it started goes on and registers a
        little later on a loaded machine; so the node counts, not that exit code."""
        if started.returncode == 0 and count == 1:
            return
        code = ("import time\n"
                "for _ in range(360):\n"
                f"    if sum(n['Alive'] for n in ray.nodes()) >= {count}: break\n"
                "    time.sleep(0.5)\n"
                "print(sum(n['Alive'] for n in ray.nodes()))")
        alive, why, deadline = 0, "", time.monotonic() + 300
        while alive < count and time.monotonic() < deadline:
            try:  # the driver itself finds no node to attach to until the head registered
                alive = int(self.probe(code).strip().splitlines()[-1])
            except (RuntimeError, ValueError, IndexError) as exc:
                why = str(exc)
                if "AuthenticationError" in why:  # a wrong token never gets right by waiting
                    break
                time.sleep(3)
        if alive < count:
            raise RuntimeError(f"the Ray cluster has {alive} of {count} nodes alive "
                               f"({why[-1500:]});\nray start said:\n{started.stdout[-2000:]}"
                               f"\n{started.stderr[-2000:]}")

    def probe(self, code: str) -> str:
        """Run ``code`` in a Ray driver joined to the cluster; its stdout."""
        script = (f"import ray\nray.init(address={ADDRESS!r}, log_to_driver=False, "
                  f"logging_level='ERROR')\n{code}\n")
        done = self.run([sys.executable, "-c", script], timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"probe driver failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def _members(self) -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.holder.pid:
                try:
                    if os.readlink(entry / "ns" / "net") == self.netns:
                        pids.append(int(entry.name))
                except OSError:
                    continue
        return pids

    def stop(self) -> None:
        for _ in range(3):  # Ray's processes may start a child while the others go
            members = self._members()
            if not members:
                break
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        self.holder.kill()
        self.holder.wait()
        shutil.rmtree(self.temp, ignore_errors=True)
