"""The trusted bootstrap of one sandbox process (run as a script: ``python -I -B child.py CONFIG``).

Standard library only, imports nothing of the project. In order it applies resource limits;
reads the payload ``{"code", "data", "prelude"}`` as JSON from stdin; imports the allowed
modules and runs the TRUSTED prelude with ``DATA`` bound to the data; locks itself down
(``no_new_privs``, network namespace, Landlock or ``chroot``, dropped privileges, no processes,
seccomp, and last the descriptor freeze); writes one status line ``ISOLATION {json}`` to fd 2;
runs the UNTRUSTED snippet in the prelude's namespace; writes ``RESULT {json}`` to fd 2 and
leaves with ``os._exit``.

Invariants: the ``ISOLATION`` line is written before any untrusted code runs, so the host can
trust it; after the freeze no file, socket or pipe can be opened. CONFIG (argv[1], JSON):
``limits`` (the fields of ``SandboxLimits``), ``allowed_imports``, ``disable`` (test-only:
features to skip), ``require_strong`` (refuse to run the snippet when isolation is weak),
``probe`` (no snippet: test the lockdown and report). Docs: ``docs/guides/sandbox.md``.
"""

import ctypes
import errno
import json
import math
import os
import platform
import resource
import sys

STATUS_FD = 2
NOBODY = 65534

PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SYSCALLS = {  # landlock_create_ruleset, landlock_add_rule, landlock_restrict_self, capset
    "x86_64": (444, 445, 446, 126),
    "aarch64": (444, 445, 446, 91),
}
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
                    5: (1 << 16) - 1}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

# seccomp deny-list (errno EPERM): signals and other processes' memory; namespaces, mounts and
# chroot; program execution; every path-based change to files (creating, removing, renaming,
# truncating, permissions, owners, times, xattrs); creating sockets; io_uring. Reads need a new
# descriptor: the freeze stops them.
SECCOMP_DENY = {
    "x86_64": (0xC000003E, (
        62, 200, 234, 129, 297, 101, 310, 311, 424, 434, 438, 298, 321, 323, 250, 248, 249, 312,
        76, 82, 83, 84, 85, 86, 87, 88, 90, 91, 92, 93, 94, 132, 133, 235, 258, 259, 260, 261, 263,
        264, 265, 266, 268, 280, 316, 452, 188, 189, 190, 197, 198, 199, 59, 322, 163, 167, 168,
        179, 165, 166, 155, 161, 272, 308, 428, 429, 430, 431, 432, 433, 442, 303, 304, 463, 466,
        467, 469, 41, 53, 425)),
    "aarch64": (0xC00000B7, (
        129, 130, 131, 138, 240, 117, 270, 271, 424, 434, 438, 241, 280, 282, 219, 217, 218, 272,
        45, 52, 55, 34, 33, 54, 35, 38, 37, 36, 53, 88, 276, 452, 5, 6, 7, 14, 15, 16, 221, 281,
        89, 224, 225, 60, 40, 39, 41, 51, 97, 268, 428, 429, 430, 431, 432, 433, 442, 264, 265,
        463, 466, 467, 469, 198, 199, 425)),
}
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO_EPERM = 0x7FFF0000, 0x00050000 | errno.EPERM
X32_SYSCALL_BIT = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def status(kind: str, payload: dict) -> None:
    line = (kind + " " + json.dumps(payload) + "\n").encode()
    os.write(STATUS_FD, line)


def finish(kind: str, error=None) -> None:
    try:
        sys.stdout.flush()
    except BaseException:  # the snippet may have broken stdout; the status still goes out
        pass
    status("RESULT", {"kind": kind, "error": error})
    os._exit(0)


def set_limits(limits: dict) -> None:
    cpu = max(1, math.ceil(limits["cpu_seconds"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    files = int(limits["open_files"])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))


def unshare_network(report: dict, disabled: set) -> None:
    """Own network namespace (only a down loopback): as root directly, else via a user namespace."""
    if "netns" in disabled:
        return
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if libc.unshare(flags) == 0:
        report["network"].append("netns")
        if flags & CLONE_NEWUSER:
            report["userns"] = True
    else:
        report["notes"].append(f"unshare: {os.strerror(ctypes.get_errno())}")


def landlock(report: dict, disabled: set, read_paths: list) -> None:
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None or "landlock" in disabled:
        report["notes"].append("landlock: not tried" if numbers else "landlock: unknown arch")
        return
    create, add_rule, restrict = numbers[:3]
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 1:
        report["notes"].append(f"landlock: {os.strerror(ctypes.get_errno())}")
        return
    report["landlock_abi"] = abi
    attr = RulesetAttr(FS_RIGHTS_BY_ABI.get(abi, FS_RIGHTS_BY_ABI[5]),
                       NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                       SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        report["notes"].append(f"landlock ruleset: {os.strerror(ctypes.get_errno())}")
        return
    try:
        for path in read_paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = FS_READ_FILE | (FS_READ_DIR if os.path.isdir(path) else 0)
                rule = PathBeneathAttr(rights, fd)
                if libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    report["notes"].append(f"landlock rule {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            report["notes"].append(f"landlock restrict: {os.strerror(ctypes.get_errno())}")
            return
    finally:
        os.close(ruleset)
    report["files"].append(f"landlock{abi}")
    if abi >= 4:
        report["network"].append("landlock-net")
    if abi >= 6:
        report["signals"].append("landlock-scope")


def chroot_empty(report: dict, disabled: set) -> None:
    """Change root to an empty directory and delete it: no path leads anywhere afterwards."""
    if "chroot" in disabled:
        return
    parent = "/tmp" if os.path.isdir("/tmp") else "/"
    root = os.path.join(parent, "lpg-sandbox-root-" + os.urandom(8).hex())
    try:
        os.mkdir(root, 0o500)
    except OSError as e:
        report["notes"].append(f"chroot: no empty directory ({e.strerror})")
        return
    parent_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chroot(root)
        os.chdir("/")
        report["files"].append("chroot")
    except OSError as e:
        report["notes"].append(f"chroot: {e.strerror}")
    finally:
        try:
            os.rmdir(os.path.basename(root), dir_fd=parent_fd)
        except OSError:
            pass
        os.close(parent_fd)


def drop_privileges(report: dict) -> None:
    if os.geteuid() == 0 and not report.get("userns"):
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        if os.getuid() == NOBODY and os.geteuid() == NOBODY:
            report["signals"].append("uid-drop")
            report["uid"] = NOBODY
    elif report.get("userns"):
        numbers = SYSCALLS.get(platform.machine())
        header = CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
        data = (CapData * 2)()
        if numbers and libc.syscall(numbers[3], ctypes.byref(header), ctypes.byref(data)) == 0:
            report["caps_dropped"] = True
        else:
            report["notes"].append("capset failed")


def _outcome(attempt) -> str:
    try:
        attempt()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def seccomp(report: dict, disabled: set) -> None:
    """Install the classic-BPF deny-list filter (needs no_new_privs; no privilege)."""
    table = SECCOMP_DENY.get(platform.machine())
    if table is None or "seccomp" in disabled or not report.get("no_new_privs"):
        if table is None:
            report["notes"].append("seccomp: unknown arch")
        return
    arch, denied = table
    LD_ABS, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    program = [(LD_ABS, 0, 0, 4), (JEQ, 1, 0, arch), (RET, 0, 0, SECCOMP_RET_ERRNO_EPERM),
               (LD_ABS, 0, 0, 0)]
    checks = ([(JGE, X32_SYSCALL_BIT)] if platform.machine() == "x86_64" else []) + [(JEQ, n) for n in denied]
    for i, (op, k) in enumerate(checks):
        program.append((op, len(checks) - i, 0, k))  # jump over the rest and ALLOW, onto DENY
    program += [(RET, 0, 0, SECCOMP_RET_ALLOW), (RET, 0, 0, SECCOMP_RET_ERRNO_EPERM)]
    filters = (SockFilter * len(program))(*[SockFilter(*ins) for ins in program])
    prog = SockFprog(len(program), filters)
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog),
                  ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0:
        report["seccomp"] = True
        report["signals"].append("seccomp")
        report["network"].append("seccomp-net")
    else:
        report["notes"].append(f"seccomp: {os.strerror(ctypes.get_errno())}")


def self_test() -> dict:
    """Try what a snippet must not manage; each entry is 'allowed' or the refusing errno."""
    import socket

    def read_file():
        with open("/etc/passwd", "rb") as f:
            f.read(1)

    def connect():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(1.0)
            s.connect(("127.0.0.1", 9))
        except ConnectionRefusedError:
            pass  # the connect reached the host's loopback: not confined
        finally:
            s.close()

    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    return {"read_etc_passwd": _outcome(read_file), "connect_loopback": _outcome(connect),
            "unlink_missing_path": _outcome(lambda: os.unlink("/nonexistent-lpg-sandbox-probe")),
            "fork": _outcome(fork), "signal_parent": _outcome(lambda: os.kill(os.getppid(), 0))}


def lock_down(config: dict, read_paths: list) -> dict:
    disabled = set(config.get("disable", ()))
    report = {"files": [], "network": [], "signals": [], "notes": [], "uid": os.geteuid()}
    if "no_new_privs" not in disabled and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        report["no_new_privs"] = True
    unshare_network(report, disabled)
    landlock(report, disabled, read_paths)
    if not report["files"] and (os.geteuid() == 0 or report.get("userns")):
        chroot_empty(report, disabled)
    drop_privileges(report)
    if "nproc" not in disabled:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        report["nproc0"] = os.geteuid() != 0 or bool(report.get("userns"))
    seccomp(report, disabled)
    if config.get("probe"):
        report["checks_before_freeze"] = self_test()
    if "fdfreeze" not in disabled:
        resource.setrlimit(resource.RLIMIT_NOFILE, (0, 0))
        report["fdfreeze"] = True
        report["network"].append("fdfreeze")
        if not report["files"] and report.get("seccomp"):
            report["files"].append("seccomp-fs")  # no open (freeze), no path-based change (seccomp)
    report["open_fds_beyond_stdio"] = [fd for fd in range(3, 256) if _is_open(fd)]
    return report


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def interpreter_paths() -> list:
    """The import directories of the interpreter itself (stdlib, lib-dynload, site-packages):
    those of ``sys.path`` under its prefixes; an editable project checkout is left out."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if real and os.path.isdir(real) and any(real == p or real.startswith(p + os.sep) for p in prefixes):
            paths.append(real)
    return paths


def missing_protections(report: dict) -> list:
    """What a lockdown report lacks to count as strong isolation (``[]`` when strong)."""
    missing = []
    if not report.get("files"):
        missing.append("file confinement (Landlock, Linux >= 5.13; chroot as root or in a user "
                       "namespace; or seccomp with the descriptor freeze)")
    if not report.get("network"):
        missing.append("network confinement (Landlock ABI >= 4, a network namespace, seccomp or "
                       "the descriptor freeze)")
    if not report.get("signals"):
        missing.append("signal isolation (dropping root to uid 65534, Landlock ABI >= 6 or seccomp)")
    if not report.get("nproc0"):
        missing.append("no new processes (RLIMIT_NPROC 0 as a non-root user)")
    if not report.get("no_new_privs"):
        missing.append("no_new_privs")
    return missing


def snippet_traceback(exc: BaseException, code: str) -> str:
    """The exception's last lines inside the snippet, then its type and message."""
    lines = code.splitlines()
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<snippet>":
            where = tb.tb_frame.f_code.co_name
            number = tb.tb_lineno
            text = lines[number - 1].strip() if 0 < number <= len(lines) else ""
            frames.append(f"  line {number}" + ("" if where == "<module>" else f", in {where}")
                          + f": {text}")
        tb = tb.tb_next
    try:
        message = str(exc)
    except BaseException:
        message = "<message unavailable>"
    head = type(exc).__name__ + (f": {message}" if message else "")
    if isinstance(exc, SyntaxError) and exc.lineno:
        head = f"SyntaxError: {exc.msg} (line {exc.lineno})"
    out = (["Traceback (snippet lines, most recent call last):"] + frames[-5:] if frames else [])
    return "\n".join(out + [head[:1000]])


class RefuseNewImports:
    """After the lockdown no file can be opened, so an import of anything not loaded yet would
    fail with a baffling 'Too many open files'; say instead what the LM can do about it."""

    def __init__(self, preloaded):
        self.preloaded = ", ".join(sorted(preloaded)) or "none"

    def find_spec(self, name, path=None, target=None):
        raise ModuleNotFoundError(f"module '{name}' is not available in the sandbox (only these modules "
                                  f"and what they load can be used: {self.preloaded})", name=name)


def main() -> None:
    config = json.loads(sys.argv[1])
    set_limits(config["limits"])
    sys.stdout.reconfigure(encoding="utf-8", errors="backslashreplace", line_buffering=True)
    payload = json.loads(sys.stdin.buffer.read() or b"{}")
    read_paths = interpreter_paths()
    namespace = {"__name__": "__snippet__", "__builtins__": __builtins__, "DATA": payload.get("data")}
    for module in config.get("allowed_imports", ()):
        try:
            __import__(module)
        except ImportError:
            pass
    if config.get("probe"):
        import socket  # noqa: F401  (so the self-test measures the kernel, not the import)
    sys.stderr = sys.stdout
    try:
        exec(compile(payload.get("prelude") or "", "<prelude>", "exec"), namespace)
    except BaseException as e:  # our own code failed; not the snippet's fault
        status("ISOLATION", {"error": "prelude"})
        finish("crash", f"sandbox prelude failed: {type(e).__name__}: {e}"[:1000])
    report = lock_down(config, read_paths)
    sys.meta_path.insert(0, RefuseNewImports(config.get("allowed_imports", ())))
    if config.get("probe"):
        report["checks"] = self_test()
    status("ISOLATION", report)
    if config.get("probe"):
        finish("ok")
    if config.get("require_strong"):
        missing = missing_protections(report)
        if missing:
            finish("crash", "weak isolation in this sandbox process (missing: " + ", ".join(missing)
                   + "); refusing to run the snippet")
    code = payload.get("code") or ""
    try:
        compiled = compile(code, "<snippet>", "exec")
        del payload, config
        exec(compiled, namespace)
    except MemoryError as e:
        finish("memory", snippet_traceback(e, code))
    except BaseException as e:  # KeyboardInterrupt and SystemExit too: the process reports them
        finish("exception", snippet_traceback(e, code))
    finish("ok")


if __name__ == "__main__":
    main()
