"""Power loss: a LazyFS-like FUSE file system in Python (docs/nemesis.md, "Power loss").

- `cache.py`: a file's dirty extents, logical size, flush and lose (pure + the backing fd);
- `journal.py`: directory operations and which of them a power loss undoes;
- `fs.py`: the mfusepy file system and its control commands;
- `mount.py`: serving it through libfuse3 (`LazyFUSE`: zero-copy reads and writes, handles);
- `control.py`: the control socket (server in the daemon, client anywhere);
- `__main__.py`: `python -m nemesis.lazyfs mount|ctl` on a node;
- `hook.py`: the BrokerDB hook (mount, lose on kill, unmount) and the `power-loss` fault.
"""
