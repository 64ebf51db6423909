#!/usr/bin/env python3
"""A tiny FUSE filesystem whose directory listing never returns: a stand-in for a data
directory on a dead NFS server or a wedged FUSE mount.

Usage: hung_readdir_fs.py MOUNTPOINT
getattr and statfs answer (the mount looks healthy to stat and df); readdir blocks forever, so
listing the mount's root blocks in the kernel until this process is killed.
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


class HungReaddir(Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            now = time.time()
            return dict(st_mode=(stat.S_IFDIR | 0o755), st_nlink=2,
                        st_ctime=now, st_mtime=now, st_atime=now)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        threading.Event().wait()  # never set

    def statfs(self, path):
        return dict(f_bsize=4096, f_frsize=4096, f_blocks=1000, f_bfree=500,
                    f_bavail=500, f_files=100, f_ffree=50, f_namemax=255)


if __name__ == "__main__":
    FUSE(HungReaddir(), sys.argv[1], foreground=True, nothreads=False, allow_other=True)
