"""The docker backend's node image, built locally from a debootstrap rootfs (never pulled).

Three images, each tagged with a content hash, so an `up` rebuilds only what changed:

1. `wrack-node-base:H1`: `debootstrap --variant=minbase --include=NODE_PACKAGES SUITE` from
   the mirror in the host's apt configuration (`/etc/apt/sources.list`,
   `sources.list.d/*.list` and deb822 `*.sources`), trimmed (no .debs, apt lists, docs, man
   pages, translations), tarred and imported (`docker import`) with PATH and LANG set.
   H1 = hash(suite, architecture, packages, the recipe).
2. `wrack-node-deps:H2`: FROM base, a venv `/opt/wrack/venv` (first on PATH) holding the
   project's node dependencies (pyproject `[project] dependencies`, not the harness extra).
   The host downloads the wheels (`pip download`, so the host's pip configuration applies)
   and a container without network installs them.
   H2 = hash(base image id, dependencies, the container's Python, the install script).
3. `wrack-node:H3`: FROM deps, the project's wheel (`clusters/wheel.py`) with `--no-deps`.
   H3 = hash(deps image id, the project's source files and pyproject.toml, the install script).

Stages 2 and 3 run their script in a container (`--network none`) and `docker commit` it:
one layer each, no Dockerfile (docker-py only drives the deprecated legacy builder).

`ensure_image(client)` returns the tag of an up-to-date `wrack-node` image, building the
missing stages; callers hold `image_lock()` so concurrent `up`s build once and no image is
pruned between its build and its use. A build killed half-way (its container, its rootfs
temp dir) is cleaned up by the next `ensure_image`. After a build, older images of that stage that no
container uses are removed. Building the base needs root (debootstrap) and the mirror.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusters.wheel import build_wheel

ROOT = Path(__file__).resolve().parent.parent
LOCK_FILE = Path(os.environ.get("WRACK_DOCKER_LOCK", "/run/wrack/docker.lock"))
VENV = "/opt/wrack/venv"
PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# What a node needs besides the essential packages of minbase (util-linux, mount, coreutils,
# tar...): Python for the broker and the node-side tools, iproute2/iptables for partitions,
# fuse3 for the power-loss filesystem, procps/psmisc for process faults and checks, etcd-server
# for `--db etcd`.
NODE_PACKAGES = ("python3", "python3-venv", "iproute2", "iptables", "fuse3", "procps", "psmisc", "etcd-server")

# Removed from the rootfs before import: caches and documentation nobody on a node reads.
TRIM = ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*",
        "usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*", "var/log/*.log")

Log = Callable[[str], None]


def _stderr_log(msg: str) -> None:
    sys.stderr.write(f"wrack: {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- apt sources


@dataclass(frozen=True)
class AptSource:
    """One apt source entry (a deb822 paragraph or a one-line `deb` line)."""

    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str | None = None
    enabled: bool = True
    origin: str = ""


def parse_one_line(text: str, origin: str = "") -> list[AptSource]:
    """Entries of a one-line-style file (`deb [opt=v ...] URI SUITE [COMPONENT...]`)."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        typ, _, rest = line.partition(" ")
        opts: dict[str, str] = {}
        rest = rest.strip()
        if rest.startswith("["):
            inner, sep, rest = rest[1:].partition("]")
            if not sep:
                continue  # malformed options: apt ignores the line too
            for opt in inner.split():
                k, _, v = opt.partition("=")
                opts[k] = v
        words = rest.split()
        if len(words) < 2:
            continue
        out.append(AptSource((typ,), (words[0],), (words[1],), tuple(words[2:]),
                             opts.get("signed-by"), True, f"{origin}:{n}"))
    return out


def parse_deb822(text: str, origin: str = "") -> list[AptSource]:
    """Entries of a deb822 `.sources` file (paragraphs of `Field: value`, continuation lines
    start with whitespace, `#` comments, `Enabled: no` kept as enabled=False)."""
    out = []
    paragraphs: list[list[str]] = [[]]
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if paragraphs[-1]:
                paragraphs.append([])
            continue
        paragraphs[-1].append(raw)
    for i, para in enumerate(p for p in paragraphs if p):
        fields: dict[str, str] = {}
        key = None
        for line in para:
            if line[0] in " \t" and key is not None:
                fields[key] += "\n" + line.strip()
                continue
            k, sep, v = line.partition(":")
            if not sep:
                continue
            key = k.strip().lower()
            fields[key] = v.strip()
        signed = fields.get("signed-by", "").strip()
        signed_path = signed if signed and "\n" not in signed and signed.startswith("/") else None
        out.append(AptSource(tuple(fields.get("types", "").split()), tuple(fields.get("uris", "").split()),
                             tuple(fields.get("suites", "").split()), tuple(fields.get("components", "").split()),
                             signed_path, fields.get("enabled", "yes").lower() not in ("no", "false", "0"),
                             f"{origin}#{i + 1}"))
    return out


def host_apt_sources(etc_apt: str | os.PathLike[str] = "/etc/apt") -> list[AptSource]:
    """Every apt source configured on this host, in apt's reading order."""
    base = Path(etc_apt)
    out: list[AptSource] = []
    main = base / "sources.list"
    if main.is_file():
        out += parse_one_line(main.read_text(errors="replace"), str(main))
    d = base / "sources.list.d"
    if d.is_dir():
        for f in sorted(d.iterdir()):
            if f.suffix == ".list" and f.is_file():
                out += parse_one_line(f.read_text(errors="replace"), str(f))
            elif f.suffix == ".sources" and f.is_file():
                out += parse_deb822(f.read_text(errors="replace"), str(f))
    return out


def pick_mirror(sources: list[AptSource], suite: str) -> tuple[str, str | None]:
    """(mirror URI, keyring or None) of the first enabled `deb` source that carries `suite`
    with the `main` component; ValueError when there is none."""
    for s in sources:
        if not s.enabled or "deb" not in s.types or suite not in s.suites or "main" not in s.components:
            continue
        for uri in s.uris:
            if re.match(r"^(https?|ftp|file)://", uri):
                keyring = s.signed_by if s.signed_by and os.path.isfile(s.signed_by) else None
                return uri.rstrip("/"), keyring
    raise ValueError(f"no apt source for suite {suite!r} with component main in /etc/apt "
                     "(set WRACK_DEBIAN_MIRROR to a Debian mirror URI)")


def host_suite(os_release: str | os.PathLike[str] = "/etc/os-release") -> str:
    """The host's release codename (VERSION_CODENAME), the suite the node image is built from."""
    if os.environ.get("WRACK_DEBIAN_SUITE"):
        return os.environ["WRACK_DEBIAN_SUITE"]
    try:
        text = Path(os_release).read_text()
    except OSError:
        text = ""
    m = re.search(r'^VERSION_CODENAME="?([a-z]+)"?\s*$', text, re.M)
    if not m:
        raise ValueError(f"{os_release}: no VERSION_CODENAME (set WRACK_DEBIAN_SUITE, e.g. bookworm)")
    return m.group(1)


def host_mirror(suite: str) -> tuple[str, str | None]:
    """The mirror to debootstrap `suite` from: WRACK_DEBIAN_MIRROR or the host's apt config."""
    if os.environ.get("WRACK_DEBIAN_MIRROR"):
        return os.environ["WRACK_DEBIAN_MIRROR"].rstrip("/"), None
    return pick_mirror(host_apt_sources(), suite)


# --------------------------------------------------------------------------- content hashes


def digest(*parts: Any) -> str:
    """A short stable hash of `parts` (their reprs)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def node_dependencies(pyproject: str | os.PathLike[str] = ROOT / "pyproject.toml") -> list[str]:
    """The project's node dependencies (`[project] dependencies`)."""
    with open(pyproject, "rb") as f:
        return list(tomllib.load(f)["project"].get("dependencies", []))


def source_hash(root: str | os.PathLike[str] = ROOT) -> str:
    """A hash of what goes into the project's wheel: pyproject.toml and every file of the
    top-level packages named by `[tool.setuptools.packages.find] include` (no caches)."""
    root = Path(root)
    with open(root / "pyproject.toml", "rb") as f:
        cfg = tomllib.load(f)
    patterns = cfg.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {}).get("include", ["*"])
    h = hashlib.sha256((root / "pyproject.toml").read_bytes())
    tops = sorted(d for d in root.iterdir() if d.is_dir() and (d / "__init__.py").exists()
                  and any(fnmatch.fnmatch(d.name, p) for p in patterns))
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for fn in sorted(filenames):
                if fn.endswith((".pyc", ".pyo")):
                    continue
                p = Path(dirpath) / fn
                h.update(str(p.relative_to(root)).encode() + b"\0")
                with contextlib.suppress(OSError):
                    h.update(p.read_bytes())
                h.update(b"\0")
    return h.hexdigest()[:16]


def host_arch() -> str:
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or os.uname().machine
    except (OSError, subprocess.SubprocessError):
        return os.uname().machine


# --------------------------------------------------------------------------- lock


@contextlib.contextmanager
def image_lock() -> Iterator[None]:
    """An exclusive lock for building images and creating docker clusters on this machine."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- builds


def _image(client: Any, ref: str) -> Any | None:
    # lazy: docker (harness extra) takes ~0.3 s; clusters.docker imports this module before any client exists
    import docker

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def _prune(client: Any, kind: str, keep_id: str, log: Log) -> None:
    """Remove older images of stage `kind` that no container uses (best effort)."""
    # lazy: docker: see above
    import docker

    for img in client.images.list(filters={"label": f"wrack.image={kind}"}):
        if img.id == keep_id:
            continue
        try:
            client.images.remove(img.id)
            log(f"removed old image {','.join(img.tags) or img.short_id}")
        except docker.errors.APIError:
            pass  # in use by a container, or a parent of a kept image


def _unmount_below(path: str) -> None:
    """Lazily unmount whatever a failed debootstrap left mounted below `path` (proc, sys)."""
    real = os.path.realpath(path)
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for m in sorted((m for m in mounts if m.startswith(real + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=30)


def _trim(rootfs: Path) -> None:
    for pattern in TRIM:
        for p in rootfs.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()
    conf = rootfs / "etc" / "fuse.conf"
    text = conf.read_text() if conf.exists() else ""
    if not re.search(r"^\s*user_allow_other", text, re.M):
        conf.write_text(re.sub(r"^#\s*user_allow_other.*$", "", text, flags=re.M).rstrip("\n")
                        + "\nuser_allow_other\n")


def _rootfs_python(rootfs: Path) -> str:
    target = os.readlink(rootfs / "usr" / "bin" / "python3") if (rootfs / "usr/bin/python3").is_symlink() else ""
    m = re.search(r"python(\d+\.\d+)", target)
    if not m:
        raise RuntimeError("the debootstrapped rootfs has no /usr/bin/python3 -> pythonX.Y")
    return m.group(1)


def base_recipe(suite: str, arch: str) -> tuple[Any, ...]:
    return ("base", 1, suite, arch, NODE_PACKAGES, TRIM, PATH)


def build_base(client: Any, tag: str, suite: str, log: Log) -> Any:
    """debootstrap + trim + import as `tag`; returns the image."""
    if os.geteuid() != 0:
        raise PermissionError("building the docker node image needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise ValueError("debootstrap is not installed (it is in deploy/debian-packages.txt)")
    mirror, keyring = host_mirror(suite)
    log(f"building {tag}: debootstrap --variant=minbase {suite} from {mirror} (about a minute)")
    work = tempfile.mkdtemp(prefix="wrack-rootfs-", dir=os.environ.get("WRACK_ROOTFS_TMP"))
    rootfs = Path(work) / "rootfs"
    try:
        argv = ["debootstrap", "--variant=minbase", "--components=main",
                f"--include={','.join(NODE_PACKAGES)}"]
        if keyring:
            argv.append(f"--keyring={keyring}")
        argv += [suite, str(rootfs), mirror]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        if p.returncode != 0:
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"debootstrap {suite} from {mirror} failed: {' | '.join(tail)}")
        log(f"debootstrap done in {time.monotonic() - t0:.0f} s; importing")
        _trim(rootfs)
        pyver = _rootfs_python(rootfs)
        changes = [f"ENV PATH={PATH}", "ENV LANG=C.UTF-8", 'CMD ["sleep", "infinity"]',
                   f"LABEL wrack.image=base wrack.hash={tag.split(':')[1]} wrack.python={pyver} "
                   f"wrack.suite={suite}"]
        repo, _, htag = tag.partition(":")
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", "-", "."],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            client.api.import_image_from_stream(tar.stdout, repository=repo, tag=htag, changes=changes)
        finally:
            tar.stdout.close()
            err = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
            rc = tar.wait()
        if rc != 0:
            raise RuntimeError(f"tar of the rootfs failed: {err.strip()[-300:]}")
    finally:
        _unmount_below(work)
        shutil.rmtree(work, ignore_errors=True)
    img = _image(client, tag)
    if img is None:
        raise RuntimeError(f"docker import did not produce {tag}")
    return img


def run_and_commit(client: Any, base: str, tag: str, script: str, files: Mapping[str, bytes | Path],
                   labels: Mapping[str, str]) -> Any:
    """Run `script` (sh) in a container of `base` with `files` put below /tmp, offline, and
    commit the result as `tag` (one layer; CMD stays `sleep infinity`). Faster than the
    legacy builder on this storage driver, and independent of it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        dirs = sorted({str(parent) for name in files for parent in Path(name).parents if str(parent) != "."})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            tf.addfile(info)
        for name, data in files.items():
            raw = data.read_bytes() if isinstance(data, Path) else data
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(raw), 0o644, int(time.time())
            tf.addfile(info, io.BytesIO(raw))
    ct = client.containers.create(base, ["sh", "-c", script], network_mode="none",
                                  labels={"wrack.build": tag})
    try:
        if files:
            ct.put_archive("/tmp", buf.getvalue())
        ct.start()
        status = ct.wait(timeout=1200).get("StatusCode", -1)
        if status != 0:
            tail = ct.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
            raise RuntimeError(f"building {tag}: `{script[:80]}...` exited {status}: {tail[-400:]}")
        repo, _, ver = tag.partition(":")
        label_line = " ".join(f"{k}={v}" for k, v in labels.items())
        ct.commit(repository=repo, tag=ver, changes=['CMD ["sleep", "infinity"]', f"LABEL {label_line}"])
    finally:
        ct.remove(force=True)
    img = _image(client, tag)
    if img is None:
        raise RuntimeError(f"docker commit did not produce {tag}")
    return img


def _download_wheels(deps: list[str], pyver: str, dest: str) -> list[Path]:
    argv = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d", dest, *deps]
    if pyver != f"{sys.version_info.major}.{sys.version_info.minor}":
        argv += ["--only-binary=:all:", "--python-version", pyver]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"pip download of the node dependencies failed: "
                           f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return sorted(Path(dest).iterdir())


def deps_script(deps: list[str]) -> str:
    pip = f"{VENV}/bin/pip install -q --no-index --no-cache-dir --disable-pip-version-check"
    reqs = " ".join(shlex.quote(d) for d in deps)
    return (f"python3 -m venv {VENV} && {pip} --find-links /tmp/wrack-wheels {reqs} "
            f"&& rm -rf /tmp/wrack-wheels")


def node_script(wheel_name: str) -> str:
    pip = f"{VENV}/bin/pip install -q --no-index --no-deps --no-cache-dir --disable-pip-version-check"
    return (f"{pip} /tmp/{wheel_name} && rm /tmp/{wheel_name} && {VENV}/bin/pip check -q "
            f"&& {VENV}/bin/python -c 'import broker, clusters, nemesis'")


def clean_stale_builds(client: Any) -> list[str]:
    """Remove what a build killed half-way left: its container (label `wrack.build`) and its
    rootfs temp dir (mounts below it first). Only safe under `image_lock()`."""
    # lazy: docker: see above
    import docker

    removed = []
    for ct in client.containers.list(all=True, filters={"label": "wrack.build"}):
        with contextlib.suppress(docker.errors.NotFound):
            ct.remove(force=True)
            removed.append(f"container {ct.name}")
    tmp = os.environ.get("WRACK_ROOTFS_TMP") or tempfile.gettempdir()
    for d in Path(tmp).glob("wrack-rootfs-*"):
        _unmount_below(str(d))
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"dir {d}")
    return removed


def ensure_image(client: Any, log: Log = _stderr_log) -> str:
    """The tag of an up-to-date node image, building the stages that are missing (call it
    under `image_lock()`)."""
    for what in clean_stale_builds(client):
        log(f"removed the leftover of an interrupted image build: {what}")
    suite = host_suite()
    arch = host_arch()
    base_tag = f"wrack-node-base:{digest(*base_recipe(suite, arch))}"
    base = _image(client, base_tag)
    if base is None:
        t0 = time.monotonic()
        base = build_base(client, base_tag, suite, log)
        log(f"built {base_tag} in {time.monotonic() - t0:.0f} s")
        _prune(client, "base", base.id, log)
    pyver = base.labels.get("wrack.python", "")

    deps = node_dependencies()
    dscript = deps_script(deps)
    deps_tag = f"wrack-node-deps:{digest(base.id, dscript, pyver)}"
    deps_img = _image(client, deps_tag)
    if deps_img is None:
        t0 = time.monotonic()
        log(f"building {deps_tag}: Python {pyver} venv with {', '.join(deps)}")
        with tempfile.TemporaryDirectory(prefix="wrack-wheels-") as tmp:
            wheels = _download_wheels(deps, pyver, tmp)
            files = {f"wrack-wheels/{w.name}": w for w in wheels}
            deps_img = run_and_commit(client, base_tag, deps_tag, dscript, files,
                                      {"wrack.image": "deps", "wrack.hash": deps_tag.split(":")[1]})
        log(f"built {deps_tag} in {time.monotonic() - t0:.0f} s")
        _prune(client, "deps", deps_img.id, log)

    src = source_hash()
    node_tag = f"wrack-node:{digest(deps_img.id, src, node_script('WHEEL'))}"
    node = _image(client, node_tag)
    if node is None:
        t0 = time.monotonic()
        log(f"building {node_tag}: the project's wheel (source {src})")
        wheel = Path(build_wheel.__wrapped__())  # uncached: the source may have changed since
        try:
            node = run_and_commit(client, deps_tag, node_tag, node_script(wheel.name), {wheel.name: wheel},
                                  {"wrack.image": "node", "wrack.hash": node_tag.split(":")[1],
                                   "wrack.source": src})
        finally:
            shutil.rmtree(wheel.parent, ignore_errors=True)
        log(f"built {node_tag} in {time.monotonic() - t0:.1f} s")
        _prune(client, "node", node.id, log)
    return node_tag
