#!/usr/bin/env python3
"""A FUSE filesystem whose statfs never answers, and that says whose statfs it got: a stand-in
for a drive that stopped answering in the middle of a command.

Usage: hung_statfs_told_fs.py MOUNTPOINT CALLS
As hung_statfs_fs.py, but each statfs first appends the caller's pid to the file CALLS (outside
the mount), then blocks forever. A caller waits interruptibly until the request reaches this
server; from then on even SIGKILL leaves it in uninterruptible sleep (D) until the server dies,
so a test waits for the caller's pid in CALLS before it counts on that.
"""
import errno
import stat
import sys
import threading
import time

try:  # Debian's python3-fusepy installs the module as `fusepy`; PyPI's as `fuse`.
    from fusepy import FUSE, FuseOSError, Operations, fuse_get_context
except ImportError:
    from fuse import FUSE, FuseOSError, Operations, fuse_get_context


class HungStatfsTold(Operations):
    def __init__(self, calls):
        self.calls = calls

    def getattr(self, path, fh=None):
        if path == "/":
            now = time.time()
            return dict(st_mode=(stat.S_IFDIR | 0o755), st_nlink=2,
                        st_ctime=now, st_mtime=now, st_atime=now)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", ".."]

    def statfs(self, path):
        _, _, pid = fuse_get_context()
        with open(self.calls, "a") as f:
            f.write(f"{pid}\n")
        threading.Event().wait()  # never set


if __name__ == "__main__":
    FUSE(HungStatfsTold(sys.argv[2]), sys.argv[1], foreground=True, nothreads=False,
         allow_other=True)
