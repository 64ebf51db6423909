#!/usr/bin/env python3
"""A tiny FUSE filesystem whose statfs never returns: a stand-in for a dead NFS server.

Usage: hung_statfs_fs.py MOUNTPOINT
getattr/readdir answer normally (so the mount itself works); statfs blocks forever, which
makes statvfs(2) on the mount block in the kernel until this process is killed.
"""
import errno
import stat
import sys
import threading
import time

try:  # Debian's python3-fusepy installs the module as `fusepy`; PyPI's as `fuse`.
    from fusepy import FUSE, FuseOSError, Operations
except ImportError:
    from fuse import FUSE, FuseOSError, Operations


class HungStatfs(Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            now = time.time()
            return dict(st_mode=(stat.S_IFDIR | 0o755), st_nlink=2,
                        st_ctime=now, st_mtime=now, st_atime=now)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", ".."]

    def statfs(self, path):
        threading.Event().wait()  # never set


if __name__ == "__main__":
    FUSE(HungStatfs(), sys.argv[1], foreground=True, nothreads=False, allow_other=True)
