"""control_while.py CTL PID REQUEST...: send the REQUESTs to the zone
control socket CTL (one connection each, znbdctl.control) round after
round while process PID runs, then print how many were sent.  Exits 1
at the first reply that is not "ok".  On the standard library alone, so
that the guest runs it with python3 -S.  scripts/check-tsan.sh and
tests/vm/guest-ublk-tsan.sh load the control socket's thread with it
while fio keeps the I/O threads busy."""
import sys

from znbdctl import control


def running(pid):
    """Whether PID is alive: not gone, not a zombie of the shell."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    ctl, pid, reqs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    n = 0
    while running(pid):
        for r in reqs:
            reply = control(ctl, r, 10.0)
            if not reply.startswith("ok"):
                sys.exit("control %r: %r" % (r, reply))
            n += 1
    print(n)


if __name__ == "__main__":
    main()
