#!/usr/bin/python3
"""Run the shell examples of README.md, in order, and check what they print.

Usage: readme.py [--no-serve] README.md TOP BUILD TMPDIR

Another Markdown file's examples run the same way (doc/ci.md, with
--no-serve: no default disk is served for them).

The README's examples are its indented code blocks.  They are meant to be
pasted into a shell in the order they appear, against the default disk of
scripts/serve.sh, and this test does exactly that, so they stay true:

  * One server is started as scripts/serve.sh starts it (without building),
    and runs for the whole test; examples that use "the default disk" use
    it, the others start servers of their own.
  * Each block runs in a fresh bash in a directory where build/, tests/ and
    scripts/ are the tree's, so "cd build" and "build/client/nbdzone" work.
  * Every "/tmp/" in a block becomes a private directory of this test: the
    examples' fixed socket and directory names cannot meet a user's
    running server or another test.
  * In a block, a line starting with "#" is a comment; a line indented two
    more spaces than the commands is output the command above it must
    print (stdout and stderr together): each such line must appear, in
    order, in what it printed; "..." in it matches anything.  A command
    with expected output may fail (the output shows the error it must
    print); any other command must exit 0.  What a job started with "&"
    prints counts as printed by the "wait" that ends it.
  * After a command that starts a server (nbdkit, znbd) the runner waits
    until every Unix socket named on its line accepts a connection, as a
    person typing the next line would; then the block goes on.
  * A block right after a line "<!-- readme-test: skip -->" (or
    "<!-- readme-test: skip, WHY -->") is not run: the setup commands
    themselves, an example that boots a VM guest.
  * A here-document belongs to the command that opens it.
When a block ends, every process it left that still names the private
directory is killed.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time

SKIP = "<!-- readme-test: skip"  # ... -->, with the reason before -->
SERVER = re.compile(r"^(\S*/)?(znbd|nbdkit)\s")


def blocks(text):
    """(heading, [lines dedented by 4]) for each runnable indented block."""
    out, heading, prev = [], "", ""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("# ")
        if line.startswith("    ") and (prev.strip() == "" or
                                         prev.startswith(SKIP)):
            skip = prev.startswith(SKIP) or (
                prev.strip() == "" and i >= 2 and lines[i - 2].startswith(SKIP))
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or (
                    lines[i].strip() == "" and i + 1 < len(lines)
                    and lines[i + 1].startswith("    "))):
                body.append(lines[i][4:])
                i += 1
            if not skip:
                out.append((heading, body))
            prev = ""
            continue
        prev = line
        i += 1
    return out


def commands(body):
    """[(command, [expected lines])] of one block."""
    cmds = []
    i = 0
    while i < len(body):
        line = body[i]
        if line.startswith("  ") and cmds and not line.strip().startswith("#"):
            cmds[-1][1].append(line.strip())
            i += 1
            continue
        if line.strip() == "" or line.lstrip().startswith("#"):
            i += 1
            continue
        cmd = line
        while cmd.endswith("\\") and i + 1 < len(body):
            i += 1
            cmd += "\n" + body[i]
        # A here-document: its lines are the command's, up to the word.
        m = re.search(r"<<-?\s*(['\"]?)([A-Z_][A-Z0-9_]*)\1(\s|$)", cmd)
        if m:
            while i + 1 < len(body):
                i += 1
                cmd += "\n" + body[i]
                if body[i].strip() == m.group(2):
                    break
        cmds.append((cmd, []))
        i += 1
    return cmds


def unix_sockets(cmd):
    """The Unix socket paths a server command line names."""
    paths = re.findall(r"(?:-U\s+|zone_control=)(\S+)", cmd)
    return [p for p in paths if p != "-"]


def wait_sockets(paths, timeout=30, proc=None):
    """None once every path in PATHS accepts a connection, else why not
    (TIMEOUT s passed, or PROC exited first)."""
    end = time.monotonic() + timeout
    for p in paths:
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(p)
                break
            except OSError:
                if proc is not None and proc.poll() is not None:
                    return "%s: the server exited (status %d)" % (p, proc.returncode)
                if time.monotonic() > end:
                    return "%s: no server listening after %d s" % (p, timeout)
                time.sleep(0.05)
            finally:
                s.close()
    return None


def kill_leftovers(tag, keep):
    """Kill every process whose command line names TAG, except KEEP's."""
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in keep or int(pid) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if tag.encode() in cmdline:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def run_block(n, heading, cmds, work, tmp):
    """Run one block; returns a list of failure messages."""
    rt = os.path.join(tmp, "run%d" % n)
    os.mkdir(rt)
    script = ["cd %s" % work]
    for k, (cmd, _) in enumerate(cmds):
        cmd = cmd.replace("/tmp/", tmp + "/")
        # A job started with & prints into the block's background log,
        # which a later "wait" command's expected output is matched with.
        out = "bg" if cmd.rstrip().endswith("&") else "out.%d" % k
        script.append("{ %s\n} >>%s/%s 2>&1 </dev/null; echo $? >%s/rc.%d"
                      % (cmd, rt, out, rt, k))
        if SERVER.match(cmd.lstrip()):
            script.append("%s --wait %s" % (
                sys.argv[0], " ".join(unix_sockets(cmd)) or "-"))
    with open(os.path.join(rt, "block.sh"), "w") as f:
        f.write("\n".join(script) + "\n")
    # A user's shell, not make check's: none of its test variables.
    env = {k: v for k, v in os.environ.items()
           if k not in ("top_builddir", "top_srcdir", "builddir", "srcdir")}
    p = subprocess.run(["bash", os.path.join(rt, "block.sh")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300)
    fails = []
    if p.returncode != 0:
        fails.append("the block's shell exited %d: %s" % (
            p.returncode, p.stdout.decode(errors="replace")[-2000:]))
    for k, (cmd, expect) in enumerate(cmds):
        try:
            with open("%s/rc.%d" % (rt, k)) as f:
                rc = int(f.read())
            out = []
            names = ["out.%d" % k]
            if cmd.lstrip().startswith("wait"):
                names.append("bg")
            for name in names:
                if os.path.exists("%s/%s" % (rt, name)):
                    with open("%s/%s" % (rt, name), errors="replace") as f:
                        out += f.read().splitlines()
        except (OSError, ValueError):
            fails.append("%s\n  did not run" % cmd)
            break
        if not expect and rc != 0:
            fails.append("%s\n  exited %d; it printed:\n%s" % (
                cmd, rc, "\n".join("    " + o for o in out[-20:])))
            continue
        j = 0
        for e in expect:
            pat = re.compile("^" + ".*".join(
                re.escape(part) for part in e.split("...")) + "$")
            while j < len(out) and not pat.match(out[j].strip()):
                j += 1
            if j == len(out):
                fails.append("%s\n  should print\n    %s\n  it printed:\n%s" % (
                    cmd, e, "\n".join("    " + o for o in out[-20:])))
                break
            j += 1
    return fails


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--wait":
        err = wait_sockets([p for p in sys.argv[2:] if p != "-"])
        if err:
            print(err)
            sys.exit(1)
        return
    args = sys.argv[1:]
    serve_disk = args[0] != "--no-serve"
    if not serve_disk:
        args = args[1:]
    readme, top, build, tmp = args[:4]
    with open(readme) as f:
        todo = blocks(f.read())
    work = os.path.join(tmp, "top")
    os.mkdir(work)
    os.symlink(build, os.path.join(work, "build"))
    for d in ("tests", "scripts"):
        os.symlink(os.path.join(top, d), os.path.join(work, d))

    # The default disk, as scripts/serve.sh serves it (already built), on
    # a port the kernel had free: another process may take it before
    # serve.sh binds it (tests run in parallel), so another one then.
    serve, err = None, None
    for attempt in range(5 if serve_disk else 0):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        env = dict(os.environ, ZNBD_SERVE_BUILD="no", BUILD=build,
                   ZNBD_SOCKET=tmp + "/znbd.sock", ZNBD_CONTROL=tmp + "/znbd.ctl",
                   ZNBD_PORT=str(port))
        env.pop("ZNBD_FRONTEND", None)
        env.pop("ZNBD_PARAMS", None)
        log_path = os.path.join(tmp, "serve.log")
        log = open(log_path, "w")
        serve = subprocess.Popen([os.path.join(top, "scripts/serve.sh")],
                                 env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        err = wait_sockets([tmp + "/znbd.sock", tmp + "/znbd.ctl"], proc=serve)
        if not err:
            break
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()
        log.close()
        with open(log_path) as f:
            text = f.read()
        if "could not listen" not in text and "Address already in use" not in text:
            break
        print("port %d taken, trying another" % port)
    if err:
        print("FAIL: scripts/serve.sh did not serve: " + err)
        with open(log_path) as f:
            print(f.read()[-2000:])
        sys.exit(1)
    keep = {serve.pid} if serve else set()
    for pid in os.listdir("/proc") if serve else []:  # serve.sh's servers
        try:
            with open("/proc/%s/stat" % pid) as f:
                if int(f.read().rsplit(")", 1)[1].split()[3]) == serve.pid:
                    keep.add(int(pid))
        except (OSError, ValueError, IndexError):
            pass

    failed = 0
    for n, (heading, body) in enumerate(todo):
        cmds = commands(body)
        if not cmds:
            continue
        t0 = time.monotonic()
        fails = run_block(n, heading, cmds, work, tmp)
        kill_leftovers(tmp + "/", keep)
        what = "%s block %d (%s, %d commands, %.1f s)" % (
            os.path.basename(readme), n, heading, len(cmds),
            time.monotonic() - t0)
        if fails:
            failed += 1
            print("FAIL: " + what)
            for m in fails:
                print("  " + m.replace("\n", "\n  "))
        else:
            print("ok: " + what)
    if serve:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=30)
    name = os.path.basename(readme)
    if failed:
        print("FAIL: %d of %d %s blocks" % (failed, len(todo), name))
        sys.exit(1)
    print("PASS: %d %s blocks, every command as %s says"
          % (len(todo), name, name))


if __name__ == "__main__":
    main()
