"""ext4tree - turn tar layers into a staged tree and the tree into a reproducible ext4.

Shared by rootfs/build-agent (one tar from mmdebstrap) and rootfs/oci-import (an OCI
image's layers). No root needed: files are staged as the calling user, their owners,
modes and times are recorded from the tar headers, and after `mke2fs -d` a debugfs
pass writes those into the image's inodes.

Every tar is treated as hostile: a member path with `..` or a leading `/`, a member
written through a symlink (an earlier member or layer), a hard link to a path outside
the tree or to a missing file, a device node or FIFO, a name debugfs cannot quote,
a sparse entry, a path longer than MAX_PATH bytes or deeper than MAX_DEPTH, PAX
headers past MAX_PAX bytes, and more bytes or entries than the caps are refused with
TreeError, and nothing is ever written outside the staging directory (every parent is
walked with lstat, never followed, once: directories found real are remembered until
something under them is removed). Work is linear in the entries; memory does not grow
with them (the tar reader's member list is dropped as it goes).
"""

import os
import shutil
import stat
import subprocess
import tarfile

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_PATH = 4096      # bytes of a member's name or link target
MAX_DEPTH = 256      # components of a path
MAX_PAX = 64 << 10   # bytes of one member's PAX headers


def short(name):
    """A name as an error line shows it: at most 120 characters."""
    r = repr(name)
    return r if len(r) <= 120 else r[:100] + "..." + r[-17:]


class TreeError(Exception):
    """A refused input: the message is one line for the user."""


class Tree:
    """A staged root directory plus the metadata the image will carry per path."""

    def __init__(self, stage, max_bytes, max_entries=2_000_000):
        self.stage = stage
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.bytes = 0
        self.entries = 0
        # relative path ("usr/bin/x") -> [uid, gid, permission bits, mtime]
        self.meta = {}
        os.makedirs(stage, exist_ok=True)
        self.meta[""] = [0, 0, 0o755, 0]
        self.dirs = {""}   # paths walked and found real directories

    # --- paths ---------------------------------------------------------------------

    @staticmethod
    def clean(name):
        """The member's path relative to the root; refuses '..', '/', odd bytes, and
        paths too long or too deep."""
        if len(name) > MAX_PATH:
            raise TreeError(f"path longer than {MAX_PATH} bytes in archive: {short(name)}")
        if name.startswith("/"):
            raise TreeError(f"absolute path in archive: {short(name)}")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if any(p == ".." for p in parts):
            raise TreeError(f"path with '..' in archive: {short(name)}")
        if len(parts) > MAX_DEPTH:
            raise TreeError(f"path deeper than {MAX_DEPTH} directories in archive: "
                            f"{short(name)}")
        rel = "/".join(parts)
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            raise TreeError(f"a name that is not UTF-8 in archive: {short(name)}") from None
        # debugfs takes paths in double quotes: no quote, no control characters.
        if any(c == '"' or ord(c) < 0x20 or c == "\x7f" for c in rel):
            raise TreeError(f"unsupported character in archive path: {short(name)}")
        return rel

    def real_dir(self, rel):
        """The host path of directory rel, which must be a real directory all the way
        down (no symlink followed); creates missing ones as 0755 root directories."""
        if rel in self.dirs:
            return os.path.join(self.stage, rel) if rel else self.stage
        cur = self.stage
        done = []
        for part in [p for p in rel.split("/") if p]:
            done.append(part)
            cur = os.path.join(cur, part)
            try:
                st = os.lstat(cur)
            except FileNotFoundError:
                os.mkdir(cur, 0o755)
                self.meta.setdefault("/".join(done), [0, 0, 0o755, 0])
                continue
            if stat.S_ISLNK(st.st_mode):
                raise TreeError(f"archive writes through a symlink: {short('/'.join(done))}")
            if not stat.S_ISDIR(st.st_mode):
                raise TreeError(f"archive uses a non-directory as a directory: "
                                f"{short('/'.join(done))}")
        self.dirs.update("/".join(done[:i + 1]) for i in range(len(done)))
        return cur

    def host(self, rel):
        """Host path of rel, its parent checked by real_dir."""
        parent, _, base = rel.rpartition("/")
        return os.path.join(self.real_dir(parent), base)

    def remove(self, rel):
        """Remove rel (any type) and everything recorded under it."""
        path = self.host(rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        prefix = rel + "/"
        for k in [k for k in self.meta if k == rel or k.startswith(prefix)]:
            del self.meta[k]
        self.dirs = {d for d in self.dirs if d != rel and not d.startswith(prefix)}

    # --- layers ----------------------------------------------------------------------

    def count(self, n):
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise TreeError(f"archive unpacks to more than {self.max_bytes} bytes "
                            "(the size cap; a decompression bomb?)")

    def add_layer(self, fileobj, whiteouts=True, skip_dev_nodes=False):
        """Apply one tar stream (any compression tarfile detects) on top of the tree.
        With whiteouts, OCI/AUFS whiteout files delete from the layers below."""
        created = set()   # paths this layer made: an opaque marker keeps them
        opaque = []
        try:
            tf = tarfile.open(fileobj=fileobj, mode="r|*")
        except tarfile.TarError as e:
            raise TreeError(f"not a tar archive: {e}") from None
        with tf:
            for m in tf:
                tf.members = []   # the reader keeps every member seen: drop them
                self.entries += 1
                if self.entries > self.max_entries:
                    raise TreeError(f"more than {self.max_entries} archive entries")
                if sum(len(k) + len(v) for k, v in m.pax_headers.items()) > MAX_PAX:
                    raise TreeError(f"PAX headers over {MAX_PAX} bytes in archive: "
                                    f"{short(m.name)}")
                if m.issparse():
                    raise TreeError(f"sparse file in archive (not supported): {short(m.name)}")
                if len(m.linkname) > MAX_PATH:
                    raise TreeError(f"link target longer than {MAX_PATH} bytes in archive: "
                                    f"{short(m.name)}")
                rel = self.clean(m.name)
                if rel == "":
                    if m.isdir():
                        self.meta[""] = [m.uid, m.gid, m.mode & 0o7777, m.mtime]
                    continue
                parent, _, base = rel.rpartition("/")
                if whiteouts and base == OPAQUE:
                    opaque.append(parent)
                    continue
                if whiteouts and base.startswith(WHITEOUT):
                    target = base[len(WHITEOUT):]
                    # ".wh.." would delete its own directory, ".wh..." the one above
                    # (the importer's staging directory at the top).
                    if target in ("", ".", ".."):
                        raise TreeError(f"whiteout naming {target or 'nothing'!r} in archive: "
                                        f"{short(m.name)}")
                    self.remove(f"{parent}/{target}".lstrip("/"))
                    continue
                if m.ischr() or m.isblk() or m.isfifo():
                    if skip_dev_nodes and (rel == "dev" or rel.startswith("dev/")):
                        continue
                    raise TreeError(f"device node or FIFO in archive: {short(m.name)}")
                self.add_member(tf, m, rel)
                created.add(rel)
        for d in opaque:
            self.make_opaque(d, created)

    def make_opaque(self, d, created):
        """Empty directory d of what the lower layers put there."""
        path = self.real_dir(d)
        for name in os.listdir(path):
            rel = f"{d}/{name}".lstrip("/")
            if rel in created:
                continue
            if any(c.startswith(rel + "/") for c in created):
                # a directory this layer wrote into: only its lower content goes
                self.make_opaque(rel, created)
                continue
            self.remove(rel)

    def add_member(self, tf, m, rel):
        path = self.host(rel)
        try:
            old = os.lstat(path)
        except FileNotFoundError:
            old = None
        if old is not None and not (m.isdir() and stat.S_ISDIR(old.st_mode)):
            self.remove(rel)
        if m.isdir():
            if old is None or not stat.S_ISDIR(old.st_mode):
                os.mkdir(path, 0o755)
        elif m.issym():
            self.count(len(m.linkname))
            os.symlink(m.linkname, path)
        elif m.islnk():
            target = self.clean(m.linkname)
            tpath = self.host(target)
            try:
                tst = os.lstat(tpath)
            except FileNotFoundError:
                raise TreeError(f"hard link to a missing file: {short(m.name)} -> "
                                f"{short(m.linkname)}") from None
            if not stat.S_ISREG(tst.st_mode):
                raise TreeError(f"hard link to a non-file: {short(m.name)} -> "
                                f"{short(m.linkname)}")
            os.link(tpath, path, follow_symlinks=False)
            self.meta[rel] = self.meta.get(target, [0, 0, tst.st_mode & 0o7777, 0])
            return
        elif m.isreg():
            src = tf.extractfile(m)
            # O_EXCL|O_NOFOLLOW: never through a link put there behind our back.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                while True:
                    buf = src.read(1 << 20)
                    if not buf:
                        break
                    self.count(len(buf))
                    out.write(buf)
        else:
            raise TreeError(f"unsupported archive entry type in {short(m.name)}")
        self.meta[rel] = [m.uid, m.gid, m.mode & 0o7777, m.mtime]

    def add_file(self, src, rel, mode, uid=0, gid=0, mtime=0):
        """Put a host file into the tree (mayfly's init and agent)."""
        rel = self.clean(rel)
        self.remove(rel)
        path = self.host(rel)
        shutil.copyfile(src, path, follow_symlinks=True)
        self.meta[rel] = [uid, gid, mode, mtime]

    def add_symlink(self, target, rel, mtime=0):
        rel = self.clean(rel)
        self.remove(rel)
        os.symlink(target, self.host(rel))
        self.meta[rel] = [0, 0, 0o777, mtime]

    def add_text(self, text, rel, mode=0o644, mtime=0):
        rel = self.clean(rel)
        self.remove(rel)
        with open(self.host(rel), "w") as f:
            f.write(text)
        self.meta[rel] = [0, 0, mode, mtime]

    # --- the image -----------------------------------------------------------------------

    def write_ext4(self, img, label, uuid, epoch, tmpdir, slack_mib=64):
        """Write the tree as a journal-less ext4 image at img: the same tree, label,
        uuid and epoch give the same bytes (mke2fs -d sorts each directory; every
        inode's owner, mode and times are then set from the recorded metadata)."""
        used = 0
        n = 0
        seen = set()   # hard-linked inodes: their blocks count once
        for dirpath, dirnames, filenames in os.walk(self.stage):
            for name in dirnames + filenames:
                st = os.lstat(os.path.join(dirpath, name))
                n += 1
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                used += (st.st_size + 4095) // 4096 * 4096 + 4096
        # ext4's own metadata and room to work in: a fifth more, plus slack.
        mib = (used * 6 // 5) // (1 << 20) + slack_mib
        inodes = n + n // 5 + 4096
        with open(img, "wb") as f:
            f.truncate(mib << 20)
        env = dict(os.environ, E2FSPROGS_FAKE_TIME=str(epoch), LC_ALL="C")
        run(["mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-b", "4096",
             "-N", str(inodes), "-I", "256", "-m", "0", "-L", label, "-U", uuid,
             "-E", f"root_owner=0:0,hash_seed={uuid}", "-d", self.stage, img], env,
            "mke2fs")
        script = os.path.join(tmpdir, "fixup.debugfs")
        with open(script, "w") as f:
            for rel in sorted(self.meta):
                uid, gid, perm, mtime = self.meta[rel]
                st = os.lstat(os.path.join(self.stage, rel) if rel else self.stage)
                p = f'"/{rel}"'
                f.write(f"sif {p} uid {uid}\nsif {p} gid {gid}\n")
                f.write(f"sif {p} mode 0{stat.S_IFMT(st.st_mode) | perm:o}\n")
                for field in ("atime", "ctime", "crtime"):
                    f.write(f"sif {p} {field} @{epoch}\n")
                f.write(f"sif {p} mtime @{min(mtime, epoch) if mtime else epoch}\n")
        out = run(["debugfs", "-w", "-f", script, img], env, "debugfs")
        # debugfs exits 0 even when a command fails: anything but its banner and the
        # echoed commands is an error.
        bad = [l for l in out.splitlines()
               if not (l.startswith("debugfs ") or l.startswith("debugfs: "))]
        if bad:
            raise TreeError("debugfs: " + "; ".join(bad[:3]))
        run(["e2fsck", "-f", "-n", img], env, "e2fsck")
        return mib


def run(argv, env, what):
    """Run a tool; its combined output, or TreeError with its last lines."""
    path = os.environ.get("PATH", "") + ":/sbin:/usr/sbin"
    env = dict(env, PATH=path)
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    if p.returncode != 0:
        tail = " | ".join(p.stdout.strip().splitlines()[-3:])
        raise TreeError(f"{what} failed (exit {p.returncode}): {tail}")
    return p.stdout
